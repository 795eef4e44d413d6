//! What a read of the process's clock costs: the real clock, the process's clock undilated,
//! then dilated (×8), side by side in one run. Dilation is why every clock read of the node and
//! the client goes through `plumbing::clock`; `libfaketime`, the other way to slow a process's
//! clocks, intercepts every read of the real clock instead.
//!
//! `cargo bench -p plumbing --bench clock -- --warm-up-time 1 --measurement-time 3`
//!
//! The groups run in order in one process, and the last one dilates it (a process is dilated
//! once): run the whole bench, not a filter that skips the undilated group. For `fab experiment
//! dilation`: with `HOTMOVE_BENCH_TABLE=FILE` each read's median ns is also written to FILE as
//! JSON rows (`HOTMOVE_BENCH_QUICK=1`: short measurements).

use criterion::{black_box, criterion_group, criterion_main, Bencher, Criterion};
use plumbing::clock;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Criterion's samples per benchmark (its default).
const SAMPLE_SIZE: usize = 100;

/// Nanoseconds per read of every sample, by (group, read).
static SAMPLES: Mutex<BTreeMap<(String, String), Vec<f64>>> = Mutex::new(BTreeMap::new());

/// Times `read` as criterion asks, keeping each sample's ns per read for the table.
fn timed<T>(group: &str, name: &str, read: impl Fn() -> T) -> impl FnMut(&mut Bencher) {
    let key = (group.to_string(), name.to_string());
    move |b: &mut Bencher| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for _ in 0..iters {
                black_box(read());
            }
            let took = start.elapsed();
            if let Ok(mut samples) = SAMPLES.lock() {
                let ns = took.as_nanos() as f64 / iters.max(1) as f64;
                samples.entry(key.clone()).or_default().push(ns);
            }
            took
        })
    }
}

fn reads(c: &mut Criterion, label: &str) {
    let mut group = c.benchmark_group(format!("clock read, {label}"));
    if std::env::var_os("HOTMOVE_BENCH_QUICK").is_some() {
        group
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_millis(500));
    }
    group.bench_function(
        "std Instant::now",
        timed(label, "std Instant::now", std::time::Instant::now),
    );
    group.bench_function(
        "clock::Instant::now",
        timed(label, "clock::Instant::now", clock::Instant::now),
    );
    group.bench_function(
        "clock::now_ms",
        timed(label, "clock::now_ms", clock::now_ms),
    );
    let start = clock::Instant::now();
    group.bench_function(
        "Instant::elapsed",
        timed(label, "Instant::elapsed", move || start.elapsed()),
    );
    group.finish();
}

fn undilated(c: &mut Criterion) {
    reads(c, "undilated");
}

fn dilated(c: &mut Criterion) {
    clock::dilate(8, None).expect("the bench process is dilated once");
    reads(c, "dilated ×8");
    write_table();
}

/// Each read's median ns per read, to `HOTMOVE_BENCH_TABLE` when set.
fn write_table() {
    let Ok(path) = std::env::var("HOTMOVE_BENCH_TABLE") else {
        return;
    };
    let Ok(mut samples) = SAMPLES.lock() else {
        return;
    };
    let rows: Vec<String> = samples
        .iter_mut()
        .map(|((group, read), ns)| {
            // The measurement's samples are the last ones (the warm-up's come first).
            let mut ns = ns.split_off(ns.len().saturating_sub(SAMPLE_SIZE));
            ns.sort_by(f64::total_cmp);
            let median = ns.get(ns.len() / 2).copied().unwrap_or(f64::NAN);
            format!(
                "{{\"group\": \"{group}\", \"read\": \"{read}\", \"ns\": {median:.2}, \"samples\": {}}}",
                ns.len()
            )
        })
        .collect();
    if let Err(e) = std::fs::write(&path, format!("[\n{}\n]\n", rows.join(",\n"))) {
        eprintln!("cannot write the table to {path}: {e}");
        std::process::exit(1);
    }
}

criterion_group!(benches, undilated, dilated);
criterion_main!(benches);
