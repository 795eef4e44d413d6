//! What a standard authenticated channel would cost against the committee handshake we have:
//! one connection's handshake (ours: an ed25519 signature and its verification; Noise IK over
//! X25519, as Aptos's validator network runs it) and the transport protection of one 500 KB
//! batch frame (sealed by the sender, opened by the receiver) with either AEAD a Noise or TLS
//! channel would use, against a plain copy of the frame for scale.
//!
//! `cargo bench -p network --bench handshake -- --warm-up-time 1 --measurement-time 5`
//!
//! A handshake runs once per connection, so only the transport matters per transaction: every
//! batch crosses n - 1 links, sealed once per link and opened once at each end (at 4 nodes,
//! 6 × the batch's bytes per batch). Run on a quiet machine; the AEADs use AES-NI, CLMUL and
//! AVX2 where the CPU has them.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crypto::KeyPair;
use network::handshake::{accept, dial, Credentials, Gate, Purpose};
use snow::{Builder, HandshakeState, TransportState};
use std::hint::black_box;
use std::net::SocketAddr;

const BATCH_BYTES: usize = 500_000;
/// A Noise message carries at most 65,535 bytes, 16 of them the AEAD tag.
const NOISE_CHUNK: usize = 65_535 - 16;

const IK_CHACHA: &str = "Noise_IK_25519_ChaChaPoly_BLAKE2s";
const IK_AESGCM: &str = "Noise_IK_25519_AESGCM_SHA256";

fn our_handshake(c: &mut Criterion) {
    let keys: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
    let gate = Gate::new(
        keys[0].name,
        Purpose::Consensus,
        keys.iter().map(|k| k.name),
    );
    let address: SocketAddr = "127.0.0.1:1".parse().expect("address");
    let credentials = Credentials::new(keys[1].name, keys[1].secret.clone(), Purpose::Consensus)
        .dialling([(address, keys[0].name)]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("handshake");
    group.bench_function("ours (ed25519 challenge, both ends)", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let (mut a, mut d) = tokio::io::duplex(1024);
                let (accepted, dialed) = tokio::join!(
                    accept(&mut a, &gate),
                    dial(&mut d, &credentials, &keys[0].name)
                );
                accepted.expect("accepted");
                dialed.expect("dialed");
            })
        })
    });
    for pattern in [IK_CHACHA, IK_AESGCM] {
        group.bench_function(format!("{pattern} (both ends)"), |b| {
            let (initiator_key, responder_key) = (keypair(pattern), keypair(pattern));
            b.iter(|| noise_pair(pattern, &initiator_key, &responder_key))
        });
    }
    group.finish();
}

fn keypair(pattern: &str) -> snow::Keypair {
    Builder::new(pattern.parse().expect("pattern"))
        .generate_keypair()
        .expect("keypair")
}

/// Runs IK's two messages between a fresh initiator and responder; returns both transports.
fn noise_pair(
    pattern: &str,
    initiator_key: &snow::Keypair,
    responder_key: &snow::Keypair,
) -> (TransportState, TransportState) {
    let mut initiator: HandshakeState = Builder::new(pattern.parse().expect("pattern"))
        .local_private_key(&initiator_key.private)
        .remote_public_key(&responder_key.public)
        .build_initiator()
        .expect("initiator");
    let mut responder: HandshakeState = Builder::new(pattern.parse().expect("pattern"))
        .local_private_key(&responder_key.private)
        .build_responder()
        .expect("responder");
    let (mut message, mut payload) = ([0u8; 256], [0u8; 256]);
    let len = initiator
        .write_message(&[], &mut message)
        .expect("-> e, es, s, ss");
    responder
        .read_message(&message[..len], &mut payload)
        .expect("read");
    let len = responder
        .write_message(&[], &mut message)
        .expect("<- e, ee, se");
    initiator
        .read_message(&message[..len], &mut payload)
        .expect("read");
    (
        initiator.into_transport_mode().expect("transport"),
        responder.into_transport_mode().expect("transport"),
    )
}

fn transport(c: &mut Criterion) {
    let frame = vec![7u8; BATCH_BYTES];
    let mut group = c.benchmark_group("transport per 500 KB batch frame");
    group.throughput(Throughput::Bytes(BATCH_BYTES as u64));
    group.bench_function("plain copy (scale)", |b| {
        let mut copy = vec![0u8; BATCH_BYTES];
        b.iter(|| {
            copy.copy_from_slice(black_box(&frame));
            black_box(&copy);
        })
    });
    for pattern in [IK_CHACHA, IK_AESGCM] {
        let (initiator_key, responder_key) = (keypair(pattern), keypair(pattern));
        let (mut sender, mut receiver) = noise_pair(pattern, &initiator_key, &responder_key);
        let (mut sealed, mut opened) = (vec![0u8; 65_535], vec![0u8; 65_535]);
        group.bench_function(format!("{pattern}: seal + open"), |b| {
            b.iter(|| {
                for chunk in frame.chunks(NOISE_CHUNK) {
                    let len = sender
                        .write_message(black_box(chunk), &mut sealed)
                        .expect("seal");
                    let len = receiver
                        .read_message(&sealed[..len], &mut opened)
                        .expect("open");
                    black_box(&opened[..len]);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, our_handshake, transport);
criterion_main!(benches);
