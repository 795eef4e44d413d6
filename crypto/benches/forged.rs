//! What forged signatures cost the verifier: a 1,000-signature block with 0 %, 1 % and 10 % of
//! its signatures forged, checked by the verifier's search for invalid items (`new`) and by the
//! one it replaced (`previous`, in `previous/mod.rs`), side by side in one run; `mixed`
//! alternates a clean block and a 10 % one, as when a forger's batches sit between honest
//! ones. Also the costs the search's group sizes are chosen from: one single check and one batch
//! check of N items, both on prepared items (key decoded, message hashed).
//!
//! `cargo bench -p crypto --bench forged -- --warm-up-time 1 --measurement-time 3`
//!
//! Times are the process's CPU time (all its threads), not wall time: on a shared machine other
//! processes' load stretches wall time by whatever share of the cores they take, while CPU time
//! is what capacity is made of. Caches and hyperthreads shared with that load still add noise:
//! compare rows of one run, not runs.

mod previous;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crypto::internals::{KeyCache, Prepared};
use crypto::{KeyPair, ParallelVerifier, PublicKey, Signature};
use previous::PreviousVerifier;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::hint::black_box;
use std::time::Duration;

const BLOCK: usize = 1000;

struct Item {
    message: Vec<u8>,
    signature: Signature,
    key: PublicKey,
}

fn view(item: &Item) -> (&[u8], &Signature, &PublicKey) {
    (&item.message, &item.signature, &item.key)
}

/// `n` transfer-sized (about 140-byte) messages signed by 64 accounts, `forged` of them (at
/// random positions, the same every run) with a message that is not the one signed.
fn block(n: usize, forged: usize) -> Vec<Item> {
    let keys: Vec<KeyPair> = (0..64).map(KeyPair::from_seed).collect();
    let mut items: Vec<Item> = (0..n)
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
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    for i in rand::seq::index::sample(&mut rng, n, forged) {
        items[i].message[139] ^= 1;
    }
    items
}

/// CPU time used by this process so far.
fn cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to write; the clock exists on Linux.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The CPU time of `iters` runs of `work`.
fn cpu<R>(iters: u64, mut work: impl FnMut() -> R) -> Duration {
    let start = cpu_time();
    for _ in 0..iters {
        black_box(work());
    }
    cpu_time() - start
}

fn prepared(c: &mut Criterion) {
    let keys = KeyCache::new(1024);
    let items: Vec<Prepared> = block(2048, 0)
        .iter()
        .map(|it| {
            let a = keys.decode(&it.key).expect("valid key");
            Prepared::with_key(&it.message, &it.signature, &it.key, a).expect("decodes")
        })
        .collect();
    let mut group = c.benchmark_group("prepared");
    group.throughput(Throughput::Elements(1));
    group.bench_function("single", |b| b.iter_custom(|n| cpu(n, || items[0].check())));
    for n in [
        2usize, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512, 1024, 2048,
    ] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("batch", n), &n, |b, &n| {
            b.iter_custom(|iters| cpu(iters, || Prepared::check_batch(&items[..n])))
        });
    }
    group.finish();
}

fn forged(c: &mut Criterion) {
    let mut group = c.benchmark_group("forged");
    group.sample_size(20);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let blocks = [
        ("0pct", block(BLOCK, 0)),
        ("1pct", block(BLOCK, BLOCK / 100)),
        ("10pct", block(BLOCK, BLOCK / 10)),
    ];
    for threads in [1, cores] {
        let label = if threads == 1 {
            "1-thread".to_owned()
        } else {
            format!("{threads}-threads")
        };
        // Fresh verifiers per block: each adapts to its block's share, as a node's does to a
        // steady share of forgeries.
        for (share, items) in &blocks {
            let expected = ParallelVerifier::new(1).expect("pool").verify(items, view);
            let new = ParallelVerifier::new(threads).expect("pool");
            let old = PreviousVerifier::new(threads);
            assert_eq!(new.verify(items, view), expected);
            assert_eq!(old.verify(items, view), expected);
            group.throughput(Throughput::Elements(BLOCK as u64));
            group.bench_function(BenchmarkId::new(format!("previous/{label}"), share), |b| {
                b.iter_custom(|n| cpu(n, || old.verify(items, view)))
            });
            group.bench_function(BenchmarkId::new(format!("new/{label}"), share), |b| {
                b.iter_custom(|n| cpu(n, || new.verify(items, view)))
            });
        }
        let new = ParallelVerifier::new(threads).expect("pool");
        let old = PreviousVerifier::new(threads);
        let (clean, dirty) = (&blocks[0].1, &blocks[2].1);
        group.throughput(Throughput::Elements(2 * BLOCK as u64));
        group.bench_function(
            BenchmarkId::new(format!("previous/{label}"), "mixed"),
            |b| b.iter_custom(|n| cpu(n, || (old.verify(clean, view), old.verify(dirty, view)))),
        );
        group.bench_function(BenchmarkId::new(format!("new/{label}"), "mixed"), |b| {
            b.iter_custom(|n| cpu(n, || (new.verify(clean, view), new.verify(dirty, view))))
        });
    }
    group.finish();
}

criterion_group!(benches, prepared, forged);
criterion_main!(benches);
