//! The protocol's digest candidates on the inputs it hashes: a vote or a block header (a few
//! hundred bytes), and batches (tens to hundreds of kilobytes: 500 KB is the default batch
//! size). One thread each, as a node hashes a batch on the task that received or sealed it.
//!
//! `cargo bench -p crypto --bench digest -- --warm-up-time 1 --measurement-time 3`
//!
//! Compare rates within one run: a shared 2-core machine's speed drifts between runs.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sha2::{Digest as _, Sha256};
use std::hint::black_box;

fn inputs() -> Vec<(usize, Vec<u8>)> {
    [256, 4 << 10, 64 << 10, 500_000]
        .into_iter()
        .map(|len| (len, (0..len).map(|i| (i * 31 % 251) as u8).collect()))
        .collect()
}

fn digests(c: &mut Criterion) {
    let mut group = c.benchmark_group("digest");
    for (len, input) in inputs() {
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("sha256", len), &input, |b, input| {
            b.iter(|| Sha256::digest(black_box(input)))
        });
        group.bench_with_input(BenchmarkId::new("blake3", len), &input, |b, input| {
            b.iter(|| blake3::hash(black_box(input)))
        });
    }
    group.finish();
}

criterion_group!(benches, digests);
criterion_main!(benches);
