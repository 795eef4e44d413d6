//! Signature verification rates: one at a time, in batches of growing size (to choose the
//! verifier's minimum chunk), and through the parallel verifier on a block-sized slice.
//!
//! `cargo bench -p crypto -- --warm-up-time 1 --measurement-time 3`
//!
//! Numbers from a shared 2-core machine are only as good as its load at the time: run when it
//! is otherwise idle, and compare rates within one run rather than across runs.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crypto::{KeyPair, ParallelVerifier, PublicKey, Signature};
use std::hint::black_box;

struct Item {
    message: Vec<u8>,
    signature: Signature,
    key: PublicKey,
}

fn view(item: &Item) -> (&[u8], &Signature, &PublicKey) {
    (&item.message, &item.signature, &item.key)
}

/// `n` transfer-sized (about 140-byte) messages signed by 64 accounts.
fn items(n: usize) -> Vec<Item> {
    let keys: Vec<KeyPair> = (0..64).map(KeyPair::from_seed).collect();
    (0..n)
        .map(|i| {
            let kp = &keys[i % keys.len()];
            let mut message = vec![0u8; 140];
            message[..8].copy_from_slice(&(i as u64).to_le_bytes());
            Item {
                signature: Signature::sign_bytes(&message, &kp.secret),
                message,
                key: kp.name,
            }
        })
        .collect()
}

fn single(c: &mut Criterion) {
    let items = items(1);
    let item = &items[0];
    let mut group = c.benchmark_group("single");
    group.throughput(Throughput::Elements(1));
    group.bench_function("verify_bytes", |b| {
        b.iter(|| black_box(item.signature.verify_bytes(&item.message, &item.key)))
    });
    group.finish();
}

fn batch(c: &mut Criterion) {
    let all = items(1024);
    let mut group = c.benchmark_group("batch");
    for n in [2usize, 4, 8, 16, 64, 128, 256, 512, 1024] {
        let messages: Vec<&[u8]> = all[..n].iter().map(|it| it.message.as_slice()).collect();
        let signatures: Vec<Signature> = all[..n].iter().map(|it| it.signature).collect();
        let keys: Vec<PublicKey> = all[..n].iter().map(|it| it.key).collect();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(Signature::verify_batch(&messages, &signatures, &keys)))
        });
    }
    group.finish();
}

/// What `crypto` used before its own cofactored equations: dalek's cofactorless single check and
/// batch, on the same input, so a regression from the switch would show here.
fn dalek_reference(c: &mut Criterion) {
    use ed25519_dalek::{Verifier, VerifyingKey};
    let all = items(256);
    let messages: Vec<&[u8]> = all.iter().map(|it| it.message.as_slice()).collect();
    let signatures: Vec<ed25519_dalek::Signature> = all
        .iter()
        .map(|it| ed25519_dalek::Signature::from_bytes(&it.signature.to_bytes()))
        .collect();
    let key_bytes: Vec<[u8; 32]> = all.iter().map(|it| it.key.0).collect();
    let mut group = c.benchmark_group("dalek_reference");
    group.throughput(Throughput::Elements(1));
    group.bench_function("single", |b| {
        b.iter(|| {
            // Key decoding included, as in `Signature::verify_bytes`.
            let key = VerifyingKey::from_bytes(&key_bytes[0])
                .map(|k| k.verify(messages[0], &signatures[0]));
            black_box(key)
        })
    });
    group.throughput(Throughput::Elements(256));
    group.bench_function(BenchmarkId::new("batch", 256), |b| {
        b.iter(|| {
            let keys: Result<Vec<_>, _> = key_bytes.iter().map(VerifyingKey::from_bytes).collect();
            black_box(keys.map(|keys| ed25519_dalek::verify_batch(&messages, &signatures, &keys)))
        })
    });
    group.finish();
}

/// `n` items of which those at positions `i % every == 0` carry a wrong message.
fn polluted(n: usize, every: usize) -> Vec<Item> {
    let mut all = items(n);
    for item in all.iter_mut().step_by(every) {
        item.message[139] ^= 1;
    }
    all
}

fn parallel(c: &mut Criterion) {
    const N: usize = 4096;
    let valid = items(N);
    let mut group = c.benchmark_group("parallel");
    group.sample_size(20);
    group.throughput(Throughput::Elements(N as u64));
    let one = ParallelVerifier::new(1).expect("verifier pool");
    let all = ParallelVerifier::new(0).expect("verifier pool");
    let threads = format!("{}-threads", all.threads());
    group.bench_function(BenchmarkId::new("1-thread", N), |b| {
        b.iter(|| black_box(one.verify(&valid, view)))
    });
    group.bench_function(BenchmarkId::new(&threads, N), |b| {
        b.iter(|| black_box(all.verify(&valid, view)))
    });
    // The cost of locating invalid items: a few, one in a hundred, and all of them.
    for (label, every) in [
        ("4-invalid", N / 4),
        ("1pct-invalid", 100),
        ("all-invalid", 1),
    ] {
        let input = polluted(N, every);
        group.bench_function(BenchmarkId::new(format!("{threads}-{label}"), N), |b| {
            b.iter(|| black_box(all.verify(&input, view)))
        });
    }
    group.finish();
}

criterion_group!(benches, single, batch, dalek_reference, parallel);
criterion_main!(benches);
