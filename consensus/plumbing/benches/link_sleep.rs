//! How long a sleep of an emulated link's delay takes: tokio's timer against the precise one
//! (`plumbing::precise_sleep`), side by side in one run, on a runtime of two workers as a node
//! has on this machine. The time reported is the sleep's, deadline included: a perfect timer
//! shows the delay itself.
//!
//! `cargo bench -p plumbing --bench link_sleep -- --warm-up-time 1 --measurement-time 5`

use criterion::{criterion_group, criterion_main, Criterion};
use plumbing::{clock, precise_sleep};
use std::time::{Duration, Instant};

fn sleeps(c: &mut Criterion) {
    precise_sleep::enable().expect("timer thread");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("link sleep");
    group.sample_size(50);
    for delay_us in [1_000u64, 250, 2_500] {
        let delay = Duration::from_micros(delay_us);
        group.bench_function(format!("tokio {delay_us} µs"), |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        clock::sleep_until(clock::Instant::now() + delay).await;
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(format!("precise {delay_us} µs"), |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        precise_sleep::sleep_until(Instant::now() + delay).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sleeps);
criterion_main!(benches);
