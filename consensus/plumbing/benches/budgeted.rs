//! What bounding a queue in bytes costs per message: a send and a receive through a plain tokio
//! channel, a metered one and a budgeted one (the semaphore taken and given back besides), one
//! message at a time and in bursts, on one thread.
//!
//! `cargo bench -p plumbing --bench budgeted -- --warm-up-time 1 --measurement-time 4`
//!
//! The queues bounded in bytes carry blocks, votes, batch requests and replies: per batch or per
//! block, never per transaction. Compare within one run, on a machine doing nothing else.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use plumbing::{budgeted, metered};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// About what a vote weighs on the wire at 4 nodes.
const MESSAGE_BYTES: usize = 200;
const BURST: usize = 100;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn one_message(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("send and receive one message");
    group.throughput(Throughput::Elements(1));
    let (tx, mut rx) = mpsc::channel::<u64>(1_000);
    group.bench_function("mpsc", |b| {
        b.iter(|| {
            runtime.block_on(async {
                tx.send(1).await.expect("send");
                rx.recv().await.expect("receive")
            })
        })
    });
    let (tx, mut rx, _) = metered::channel::<u64>(1_000);
    group.bench_function("metered", |b| {
        b.iter(|| {
            runtime.block_on(async {
                tx.send(1).await.expect("send");
                rx.recv().await.expect("receive")
            })
        })
    });
    let (tx, mut rx, _) = budgeted::channel::<u64>(1_000, 16 << 20);
    group.bench_function("budgeted", |b| {
        b.iter(|| {
            runtime.block_on(async {
                tx.send(1, MESSAGE_BYTES).await.expect("send");
                rx.recv().await.expect("receive")
            })
        })
    });
    group.finish();
}

fn bursts(c: &mut Criterion) {
    let runtime = runtime();
    let mut group = c.benchmark_group("send and receive a burst");
    group.throughput(Throughput::Elements(BURST as u64));
    let (tx, mut rx) = mpsc::channel::<u64>(1_000);
    let mut out = Vec::with_capacity(BURST);
    group.bench_function("mpsc", |b| {
        b.iter(|| {
            runtime.block_on(async {
                for i in 0..BURST as u64 {
                    tx.send(i).await.expect("send");
                }
                out.clear();
                rx.recv_many(&mut out, BURST).await
            })
        })
    });
    let (tx, mut rx, _) = budgeted::channel::<u64>(1_000, 16 << 20);
    group.bench_function("budgeted", |b| {
        b.iter(|| {
            runtime.block_on(async {
                for i in 0..BURST as u64 {
                    tx.send(i, MESSAGE_BYTES).await.expect("send");
                }
                out.clear();
                rx.recv_many(&mut out, BURST).await
            })
        })
    });
    group.finish();
}

criterion_group!(benches, one_message, bursts);
criterion_main!(benches);
