//! What a read of the process's clock costs: the real clock, the process's clock undilated,
//! then dilated (×8), side by side in one run. Dilation is why every clock read of the node and
//! the client goes through `plumbing::clock`; `libfaketime`, the other way to slow a process's
//! clocks, costs about 690 ns a read on this machine.
//!
//! `cargo bench -p plumbing --bench clock -- --warm-up-time 1 --measurement-time 3`
//!
//! The groups run in order in one process, and the last one dilates it (a process is dilated
//! once): run the whole bench, not a filter that skips the undilated group.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use plumbing::clock;

fn reads(c: &mut Criterion, label: &str) {
    let mut group = c.benchmark_group(format!("clock read, {label}"));
    group.bench_function("std Instant::now", |b| b.iter(std::time::Instant::now));
    group.bench_function("clock::Instant::now", |b| b.iter(clock::Instant::now));
    group.bench_function("clock::now_ms", |b| b.iter(clock::now_ms));
    let start = clock::Instant::now();
    group.bench_function("Instant::elapsed", |b| {
        b.iter(|| black_box(start).elapsed())
    });
    group.finish();
}

fn undilated(c: &mut Criterion) {
    reads(c, "undilated");
}

fn dilated(c: &mut Criterion) {
    clock::dilate(8, None).expect("the bench process is dilated once");
    reads(c, "dilated ×8");
}

criterion_group!(benches, undilated, dilated);
criterion_main!(benches);
