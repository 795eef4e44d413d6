//! Writes the seed corpora: a few valid encodings of every message kind, signed by the keys of
//! `consensus_fuzz::committee`, so the fuzzer starts from inputs that pass the checks.
//!
//! `cargo test --manifest-path consensus/fuzz/Cargo.toml --test seeds` rewrites
//! `corpus/<target>/seed-*` (the output is deterministic: ed25519 signatures are).

use bytes::{BufMut, Bytes, BytesMut};
use hotstuff::{wire, Block, ConsensusMessage, Timeout, Vote, QC, TC};
use batch::{BatchBuilder, TxFrames};
use mempool::MempoolMessage;
use config::Round;
use consensus_fuzz::{committee, keys};
use crypto::{Digest, KeyPair, SignatureService};
use std::path::PathBuf;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("corpus directory");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("seed file");
}

fn leader(round: Round) -> KeyPair {
    let name = committee().leader(round);
    keys()
        .into_iter()
        .find(|k| k.name == name)
        .expect("the leader is a member")
}

async fn block(qc: QC, tc: Option<TC>, round: Round, payload: Vec<Digest>) -> Block {
    let author = leader(round);
    let service = SignatureService::new(author.secret.clone());
    Block::new(qc, tc, author.name, round, payload, &service).await
}

async fn votes(block: &Block) -> Vec<Vote> {
    let mut votes = Vec::new();
    for k in keys().into_iter().take(3) {
        let service = SignatureService::new(k.secret.clone());
        votes.push(Vote::new(block, k.name, &service).await);
    }
    votes
}

fn qc(block: &Block, votes: &[Vote]) -> QC {
    QC {
        hash: consensus_hash(block),
        round: block.round,
        votes: votes.iter().map(|v| (v.author, v.signature)).collect(),
    }
}

fn consensus_hash(block: &Block) -> Digest {
    use crypto::Hash;
    block.digest()
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

#[tokio::test]
async fn write_seeds() {
    let committee = committee();
    let payload: Vec<Digest> = (0..3u8).map(|i| Digest::of(&[i])).collect();

    let b1 = block(QC::genesis(), None, 1, payload.clone()).await;
    let v1 = votes(&b1).await;
    let qc1 = qc(&b1, &v1);
    let b2 = block(qc1.clone(), None, 2, payload[..1].to_vec()).await;
    // Round 2 times out: a TC of round 2 whose highest QC is qc1, then the round-3 leader extends it.
    let mut timeouts = Vec::new();
    for k in keys().into_iter().take(3) {
        let service = SignatureService::new(k.secret.clone());
        timeouts.push(Timeout::new(qc1.clone(), 2, k.name, &service).await);
    }
    let tc = TC {
        round: 2,
        high_qc: qc1.clone(),
        votes: timeouts
            .iter()
            .map(|t| (t.author, t.signature, t.high_qc.round))
            .collect(),
    };
    let b3 = block(qc1.clone(), Some(tc.clone()), 3, vec![]).await;
    for b in [&b1, &b2, &b3] {
        b.verify(committee).expect("a valid block");
    }
    tc.verify(committee).expect("a valid TC");

    let messages = [
        ("propose-genesis-qc", ConsensusMessage::Propose(b1.clone())),
        ("propose-qc", ConsensusMessage::Propose(b2.clone())),
        ("propose-tc", ConsensusMessage::Propose(b3.clone())),
        ("vote", ConsensusMessage::Vote(v1[0].clone())),
        ("timeout", ConsensusMessage::Timeout(timeouts[0].clone())),
        ("tc", ConsensusMessage::TC(tc)),
        (
            "sync-request",
            ConsensusMessage::SyncRequest(consensus_hash(&b1), keys()[0].name, 0),
        ),
    ];
    for (name, message) in &messages {
        write(
            "consensus_message",
            name,
            &wire::encode(message).expect("encode"),
        );
    }
    write(
        "consensus_message",
        "stored-block",
        &wire::encode_block(&b3).expect("encode"),
    );

    // Batches as the mempool port receives them (tag 0), and batch requests (tag 1).
    let mut builder = BatchBuilder::with_capacity(256);
    let empty = builder.seal(1_700_000_000_000, 256);
    for tx in [&b"a client transaction"[..], &[], &[7u8; 148]] {
        builder.push(tx);
    }
    let three = builder.seal(1_700_000_000_001, 256);
    let empty_frame = MempoolMessage::encode_batch(empty.bytes());
    let batch_frame = MempoolMessage::encode_batch(three.bytes());
    let request = MempoolMessage::encode_request(&payload, &keys()[1].name);
    write("mempool_message", "batch-empty", &empty_frame);
    write("mempool_message", "batch-three", &batch_frame);
    write(
        "mempool_message",
        "request-one",
        &MempoolMessage::encode_request(&payload[..1], &keys()[0].name),
    );
    write("mempool_message", "request-three", &request);
    write(
        "mempool_message",
        "authored-three",
        &MempoolMessage::encode_authored(5, three.bytes()),
    );
    let statement = mempool::attest::Attestation::new(
        three.digest(),
        keys()[0].name,
        5,
        mempool::attest::Finding {
            tx_count: 3,
            invalid: vec![1, 2],
        },
        keys()[1].name,
        &keys()[1].secret,
    );
    write(
        "mempool_message",
        "attestation",
        &MempoolMessage::encode_attestation(&statement),
    );

    // Streams of frames; the first byte is the read size minus one.
    let vote = wire::encode(&messages[3].1).expect("encode");
    let mut stream = BytesMut::new();
    stream.put_u8(2);
    for payload in [&vote[..], b"Ack", &batch_frame[..], &[], &request[..]] {
        stream.put_slice(&frame(payload));
    }
    write("frame", "stream", &stream);
    let one = Bytes::from(frame(&vote));
    write("frame", "one-vote", &[&[255u8][..], &one].concat());

    // Clients' streams; the first byte is the read size minus one, the second the largest
    // transaction. One stream of transactions within the limit, one ending in an oversized one.
    let txs: [&[u8]; 4] = [b"a client transaction", &[], &[7u8; 148], &[9u8; 200]];
    let clients = TxFrames::from_transactions(&txs);
    write("tx_frames", "stream", &[&[30u8, 200][..], clients.bytes()].concat());
    write("tx_frames", "oversized", &[&[255u8, 150][..], clients.bytes()].concat());
}
