//! From the clients' bytes to a sealed batch: the cost per transaction of the mempool's path.
//!
//! - `per transaction`: each frame decoded on its own (tokio-util's length-delimited codec, one
//!   `Bytes` per transaction) and pushed into the batch with a fresh prefix;
//! - `whole runs`: the frames' bounds checked and the run appended with one copy, as the
//!   clients' port and the batch maker do (a batch body holds the clients' frames as they are).
//!
//! Both read the same stream in 64 KiB reads (a connection's read buffer) and seal 500 KB
//! batches of 197-byte transactions, the benchmark's default sizes.

use batch::{take_frames, BatchBuilder, TxFrames};
use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};

const TX_SIZE: usize = 197;
const TXS: usize = 10_000;
const BATCH_SIZE: usize = 500_000;
const READ: usize = 64 * 1024;

fn stream() -> Vec<u8> {
    let txs: Vec<Vec<u8>> = (0..TXS).map(|i| vec![i as u8; TX_SIZE]).collect();
    TxFrames::from_transactions(&txs).bytes().to_vec()
}

fn per_transaction(stream: &[u8]) -> usize {
    let mut codec = LengthDelimitedCodec::new();
    let mut buffer = BytesMut::with_capacity(READ);
    let mut builder = BatchBuilder::with_capacity(BATCH_SIZE + TX_SIZE);
    let mut sealed = 0;
    for read in stream.chunks(READ) {
        buffer.extend_from_slice(read);
        while let Ok(Some(frame)) = codec.decode(&mut buffer) {
            let tx = frame.freeze();
            builder.push(&tx);
            if builder.payload_len() >= BATCH_SIZE {
                sealed += builder.seal(0, BATCH_SIZE + TX_SIZE).tx_count() as usize;
            }
        }
    }
    sealed + builder.seal(0, 0).tx_count() as usize
}

fn whole_runs(stream: &[u8]) -> usize {
    let mut buffer = BytesMut::with_capacity(READ);
    let mut builder = BatchBuilder::with_capacity(BATCH_SIZE + TX_SIZE);
    let mut sealed = 0;
    for read in stream.chunks(READ) {
        buffer.extend_from_slice(read);
        while let Ok(Some(run)) = take_frames(&mut buffer, TX_SIZE, usize::MAX, usize::MAX) {
            let mut rest = Some(run);
            while let Some(run) = rest.take() {
                let room = BATCH_SIZE.saturating_sub(builder.payload_len());
                let (head, tail) = run.split_reaching(room);
                builder.append(&head);
                if builder.payload_len() >= BATCH_SIZE {
                    sealed += builder.seal(0, BATCH_SIZE + TX_SIZE).tx_count() as usize;
                }
                rest = tail;
            }
        }
    }
    sealed + builder.seal(0, 0).tx_count() as usize
}

fn framing(c: &mut Criterion) {
    let stream = stream();
    assert_eq!(per_transaction(&stream), TXS);
    assert_eq!(whole_runs(&stream), TXS);
    let mut group = c.benchmark_group("framing");
    group.throughput(Throughput::Elements(TXS as u64));
    group.bench_function("per transaction", |b| {
        b.iter_batched(|| (), |()| per_transaction(&stream), BatchSize::SmallInput)
    });
    group.bench_function("whole runs", |b| {
        b.iter_batched(|| (), |()| whole_runs(&stream), BatchSize::SmallInput)
    });
    group.finish();
}

criterion_group!(benches, framing);
criterion_main!(benches);
