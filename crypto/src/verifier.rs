//! Verifies many independent signatures on a dedicated thread pool, with batch verification
//! per chunk and a recursive split of failed batches to find exactly which items are invalid.

use crate::signature::{KeyCache, Prepared};
use crate::{PublicKey, Signature};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum VerifierError {
    #[error("cannot start the verifier thread pool: {0}")]
    ThreadPool(#[from] rayon::ThreadPoolBuildError),
}

/// Verifies slices of (message, signature, key) items on its own pool of `verifier-N` threads.
///
/// Each call splits the slice into contiguous chunks of
/// `max(min_chunk, ceil(len / threads))` items, so every thread gets one large batch (batch
/// verification gets cheaper per signature as the batch grows) but a small slice is not cut into
/// batches too small to pay off. Each chunk is checked as one batch; a batch that fails is split
/// into parts that are batch-checked in turn, recursively, until the invalid items are located,
/// so a few bad signatures cost a few extra batches rather than single checks for the whole
/// chunk. While recent calls saw invalid items, chunks start with smaller batches sized for the
/// observed rate, down to single checks for a flood (where batching no longer pays).
///
/// The answer for every item is exactly [`Signature::verify_bytes`]'s, whatever the chunking
/// (see `signature::Prepared` for why the batch and single rules cannot disagree).
pub struct ParallelVerifier {
    pool: rayon::ThreadPool,
    threads: usize,
    min_chunk: usize,
    /// Recent share of invalid items (f64 bits), to size the first batches of a chunk.
    invalid_rate: AtomicU64,
    keys: KeyCache,
}

impl ParallelVerifier {
    /// Smallest chunk handed to one thread. Measured per-signature batch cost, relative to a
    /// single check (see [`BATCH_COST`]): 0.62 at 8 items, 0.57 at 16, 0.52 at 128, 0.44 at 1024.
    /// Below ~64 the batch gain shrinks quickly; above 128 each doubling gains only ~5%, while a
    /// larger minimum would keep a block of a few hundred transactions on one thread.
    pub const DEFAULT_MIN_CHUNK: usize = 128;

    /// A verifier with `threads` threads (0 = one per available core).
    pub fn new(threads: usize) -> Result<Self, VerifierError> {
        Self::with_min_chunk(threads, Self::DEFAULT_MIN_CHUNK)
    }

    /// As [`Self::new`] with an explicit minimum chunk size (at least 1).
    pub fn with_min_chunk(threads: usize, min_chunk: usize) -> Result<Self, VerifierError> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("verifier-{i}"))
            .build()?;
        Ok(ParallelVerifier {
            pool,
            threads,
            min_chunk: min_chunk.max(1),
            invalid_rate: AtomicU64::new(0f64.to_bits()),
            keys: KeyCache::new(KEY_CACHE_LIMIT),
        })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `work` on one of the pool's threads (and waits for it): the work that goes with a
    /// verification (decoding what is verified, say) is then the pool's CPU too.
    pub fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.pool.install(work)
    }

    pub fn min_chunk(&self) -> usize {
        self.min_chunk
    }

    /// Items per chunk (one task on one thread) for a slice of `len` items.
    pub fn chunk_size(&self, len: usize) -> usize {
        len.div_ceil(self.threads).max(self.min_chunk)
    }

    /// A moving average of the share of decodable items found invalid by recent calls. It only
    /// steers how chunks are batched, never the answers.
    pub fn invalid_rate(&self) -> f64 {
        f64::from_bits(self.invalid_rate.load(Ordering::Relaxed))
    }

    /// Whether each item's signature is valid, in the order of `items`. `view` picks out an
    /// item's message, signature and public key; an undecodable key is an invalid item.
    pub fn verify<T, F>(&self, items: &[T], view: F) -> Vec<bool>
    where
        T: Sync,
        F: Fn(&T) -> (&[u8], &Signature, &PublicKey) + Sync,
    {
        let mut valid = vec![false; items.len()];
        if items.is_empty() {
            return valid;
        }
        let chunk = self.chunk_size(items.len());
        let rate = self.invalid_rate();
        let work = self.pool.install(|| {
            valid
                .par_chunks_mut(chunk)
                .zip(items.par_chunks(chunk))
                .map(|(out, chunk)| verify_chunk(chunk, &view, out, rate, &self.keys))
                .reduce(Work::default, |a, b| a + b)
        });
        self.record(work.prepared, work.invalid);
        valid
    }

    /// Folds one call's invalid share into the moving average, weighted by its size (a call of
    /// [`RATE_MEMORY`] items moves the average halfway). Concurrent calls may lose an update,
    /// which only delays the adaptation.
    fn record(&self, prepared: usize, invalid: usize) {
        if prepared == 0 {
            return;
        }
        let observed = invalid as f64 / prepared as f64;
        let weight = prepared as f64 / (prepared + RATE_MEMORY) as f64;
        let old = self.invalid_rate();
        let new = old + weight * (observed - old);
        self.invalid_rate.store(new.to_bits(), Ordering::Relaxed);
    }
}

/// Items over which the invalid rate is averaged.
const RATE_MEMORY: usize = 1024;

/// Per-signature cost of one batch check of `n` items relative to one single check, measured
/// with `cargo bench -p crypto` (batch/N against single/verify_bytes) on the 2-core test machine;
/// larger batches cost like the last entry.
const BATCH_COST: [(usize, f64); 9] = [
    (2, 0.87),
    (4, 0.70),
    (8, 0.62),
    (16, 0.57),
    (64, 0.55),
    (128, 0.52),
    (256, 0.49),
    (512, 0.46),
    (1024, 0.44),
];

/// The size of the first batches for a chunk of `len` decodable items, given the recent invalid
/// rate. It minimises the expected cost per item, batch cost + P(the batch holds an invalid item)
/// × about one single check per item to locate it (an overestimate for large batches, which
/// errs towards smaller ones). No recent invalid items: one batch for the whole chunk. Around
/// 10% invalid and above, batching no longer pays and 1 (check each item alone) comes out.
fn first_batch_size(len: usize, invalid_rate: f64) -> usize {
    let rate = if invalid_rate.is_nan() {
        0.0
    } else {
        invalid_rate.clamp(0.0, 1.0)
    };
    let cost_at = |n: usize| {
        BATCH_COST
            .iter()
            .rev()
            .find(|(size, _)| *size <= n)
            .map_or(1.0, |(_, cost)| *cost)
    };
    let candidates = BATCH_COST
        .iter()
        .map(|(n, _)| *n)
        .filter(|&n| n < len)
        .chain(std::iter::once(len));
    let mut best = (1.0, 1);
    for n in candidates.filter(|&n| n >= 2) {
        let dirty = 1.0 - (1.0 - rate).powi(i32::try_from(n).unwrap_or(i32::MAX));
        let cost = cost_at(n) + dirty;
        // `<=`: on a tie the larger batch, so a clean history gives one batch per chunk.
        if cost <= best.0 {
            best = (cost, n);
        }
    }
    best.1
}

/// Decoded keys kept by one verifier (about 160 bytes each).
const KEY_CACHE_LIMIT: usize = 100_000;

/// Parts a failed batch is split into. Compared with halving in a simulation using
/// [`BATCH_COST`], for a chunk of 2048 checked as one batch, in single checks per item: one bad
/// item 0.98 (halving 1.12), 1% bad 1.65 (3.05), all bad 1.94 (7.3). A wide split finds many bad
/// items in few rounds; halving pays a full pass per level once most parts hold a bad item.
const FAN_OUT: usize = 16;

/// How much checking a chunk took: lets the tests see that locating bad items stays cheap, and
/// feeds the invalid rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Work {
    batches: usize,
    batch_items: usize,
    singles: usize,
    /// Items that decoded, and how many of them turned out invalid.
    prepared: usize,
    invalid: usize,
}

impl std::ops::Add for Work {
    type Output = Work;
    fn add(self, other: Work) -> Work {
        Work {
            batches: self.batches + other.batches,
            batch_items: self.batch_items + other.batch_items,
            singles: self.singles + other.singles,
            prepared: self.prepared + other.prepared,
            invalid: self.invalid + other.invalid,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every item of the range has its final answer.
    Settled,
    /// The range's batch failed: it holds at least one invalid item, not yet located.
    Failed,
}

/// Writes the validity of each item of `items` into `out` (same length), checking them in
/// first batches sized for the recent `invalid_rate`.
fn verify_chunk<T, F>(
    items: &[T],
    view: &F,
    out: &mut [bool],
    invalid_rate: f64,
    keys: &KeyCache,
) -> Work
where
    F: Fn(&T) -> (&[u8], &Signature, &PublicKey),
{
    // Decoding and hashing happen once per item; items that do not decode stay `false` and
    // never enter a batch, so a batch fails only on the verification equation.
    let mut prepared = Vec::with_capacity(items.len());
    let mut index = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let (message, signature, key) = view(item);
        let prepared_item = keys
            .decode(key)
            .and_then(|a| Prepared::with_key(message, signature, key, a));
        if let Ok(p) = prepared_item {
            prepared.push(p);
            index.push(i);
        }
    }
    let mut valid = vec![false; prepared.len()];
    let first = first_batch_size(prepared.len(), invalid_rate);
    let mut work = if first >= prepared.len() {
        let mut work = Work::default();
        if check_range(&prepared, &mut valid, &mut work) == Outcome::Failed {
            work = work + locate(&prepared, &mut valid, prepared.len().div_ceil(FAN_OUT));
        }
        work
    } else {
        locate(&prepared, &mut valid, first)
    };
    work.prepared = prepared.len();
    work.invalid = valid.iter().filter(|&&ok| !ok).count();
    for (&i, ok) in index.iter().zip(valid) {
        out[i] = ok;
    }
    work
}

/// One item: its single check. More: one batch check, marking them all valid if it passes.
fn check_range(prepared: &[Prepared], valid: &mut [bool], work: &mut Work) -> Outcome {
    match prepared {
        [] => Outcome::Settled,
        [one] => {
            work.singles += 1;
            valid[0] = one.check();
            Outcome::Settled
        }
        _ => {
            work.batches += 1;
            work.batch_items += prepared.len();
            if Prepared::check_batch(prepared) {
                valid.fill(true);
                Outcome::Settled
            } else {
                Outcome::Failed
            }
        }
    }
}

/// Settles a range in parts of `part` items: checks every part, then locates the invalid items
/// of each failed part the same way, in [`FAN_OUT`] smaller parts. If more than half of the parts
/// failed, bad items are too dense for further batching to pay, so the failed parts' items get
/// single checks. Every `false` is therefore decided by a single check. The parts are checked in
/// parallel so that idle verifier threads help with a chunk that holds invalid items.
fn locate(prepared: &[Prepared], valid: &mut [bool], part: usize) -> Work {
    let part = part.max(1);
    let first: Vec<(Outcome, Work)> = prepared
        .par_chunks(part)
        .zip(valid.par_chunks_mut(part))
        .map(|(p, v)| {
            let mut work = Work::default();
            (check_range(p, v, &mut work), work)
        })
        .collect();
    let failed = first.iter().filter(|(o, _)| *o == Outcome::Failed).count();
    let dense = 2 * failed > first.len();
    let checked = first.iter().fold(Work::default(), |acc, (_, w)| acc + *w);
    let located = prepared
        .par_chunks(part)
        .zip(valid.par_chunks_mut(part))
        .zip(first.par_iter())
        .filter(|(_, (outcome, _))| *outcome == Outcome::Failed)
        .map(|((p, v), _)| {
            if dense {
                for (item, ok) in p.iter().zip(v.iter_mut()) {
                    *ok = item.check();
                }
                Work {
                    singles: p.len(),
                    ..Work::default()
                }
            } else {
                locate(p, v, p.len().div_ceil(FAN_OUT))
            }
        })
        .reduce(Work::default, |a, b| a + b);
    checked + located
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyPair;

    struct Item {
        message: Vec<u8>,
        signature: Signature,
        key: PublicKey,
    }

    fn view(item: &Item) -> (&[u8], &Signature, &PublicKey) {
        (&item.message, &item.signature, &item.key)
    }

    /// `n` valid items signed by a handful of keys.
    fn valid_items(n: usize) -> Vec<Item> {
        let keys: Vec<KeyPair> = (0..8).map(KeyPair::from_seed).collect();
        (0..n)
            .map(|i| {
                let kp = &keys[i % keys.len()];
                let message = format!("tx {i}").into_bytes();
                Item {
                    signature: Signature::sign_bytes(&message, &kp.secret),
                    message,
                    key: kp.name,
                }
            })
            .collect()
    }

    fn corrupt(item: &mut Item) {
        item.message.push(b'!');
    }

    fn singles(items: &[Item]) -> Vec<bool> {
        items
            .iter()
            .map(|it| it.signature.verify_bytes(&it.message, &it.key).is_ok())
            .collect()
    }

    #[test]
    fn chunk_size_spreads_work_but_keeps_batches_large() {
        let v = ParallelVerifier::with_min_chunk(4, 100).expect("pool");
        assert_eq!(v.threads(), 4);
        assert_eq!(v.chunk_size(0), 100);
        assert_eq!(v.chunk_size(10), 100);
        assert_eq!(v.chunk_size(400), 100);
        assert_eq!(v.chunk_size(401), 101);
        assert_eq!(v.chunk_size(4096), 1024);
        let v = ParallelVerifier::with_min_chunk(3, 0).expect("pool");
        assert_eq!(v.min_chunk(), 1);
        assert_eq!(v.chunk_size(10), 4);
    }

    #[test]
    fn zero_threads_means_every_core() {
        let v = ParallelVerifier::new(0).expect("pool");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(v.threads(), cores);
        assert_eq!(v.min_chunk(), ParallelVerifier::DEFAULT_MIN_CHUNK);
    }

    #[test]
    fn threads_are_named() {
        let v = ParallelVerifier::new(2).expect("pool");
        let name = v
            .pool
            .install(|| std::thread::current().name().map(str::to_owned));
        let name = name.expect("named thread");
        assert!(name.starts_with("verifier-"), "{name}");
    }

    #[test]
    fn accepts_an_inline_closure_over_tuples() {
        let kp = KeyPair::from_seed(1);
        let items: Vec<(Vec<u8>, Signature, PublicKey)> = (0..10u8)
            .map(|i| (vec![i], Signature::sign_bytes(&[i], &kp.secret), kp.name))
            .collect();
        let v = ParallelVerifier::new(2).expect("pool");
        let got = v.verify(&items, |(m, s, k)| (m.as_slice(), s, k));
        assert_eq!(got, vec![true; 10]);
    }

    #[test]
    fn empty_input_gives_empty_output() {
        let v = ParallelVerifier::new(2).expect("pool");
        assert!(v.verify(&[] as &[Item], view).is_empty());
    }

    #[test]
    fn one_bad_in_a_thousand_is_found_exactly_and_cheaply() {
        let mut items = valid_items(1000);
        corrupt(&mut items[617]);
        let mut out = vec![false; items.len()];
        let work = verify_chunk(&items, &view, &mut out, 0.0, &KeyCache::new(16));
        let expected: Vec<bool> = (0..1000).map(|i| i != 617).collect();
        assert_eq!(out, expected);
        // The failed batch of 1000, its 16 parts of 63 (one fails), that part's 16 parts of 4
        // (one fails), then 4 single checks.
        assert_eq!(
            work,
            Work {
                batches: 1 + 16 + 16,
                batch_items: 1000 + 1000 + 63,
                singles: 4,
                prepared: 1000,
                invalid: 1,
            }
        );
        // The parallel path gives the same answer.
        for threads in [1, 2] {
            let v = ParallelVerifier::with_min_chunk(threads, 64).expect("pool");
            assert_eq!(v.verify(&items, view), expected);
        }
    }

    #[test]
    fn a_flood_of_bad_items_falls_back_to_single_checks() {
        let mut items = valid_items(1000);
        for item in items.iter_mut().step_by(2) {
            corrupt(item);
        }
        let mut out = vec![false; items.len()];
        let work = verify_chunk(&items, &view, &mut out, 0.0, &KeyCache::new(16));
        assert_eq!(out, singles(&items));
        // Every part fails, so no further batching: two rounds of batches, then singles.
        assert_eq!(
            work,
            Work {
                batches: 1 + 16,
                batch_items: 2000,
                singles: 1000,
                prepared: 1000,
                invalid: 500,
            }
        );
    }

    #[test]
    fn all_valid_is_one_batch_per_chunk() {
        let items = valid_items(300);
        let mut out = vec![false; items.len()];
        let work = verify_chunk(&items, &view, &mut out, 0.0, &KeyCache::new(16));
        assert!(out.iter().all(|&ok| ok));
        assert_eq!(
            work,
            Work {
                batches: 1,
                batch_items: 300,
                singles: 0,
                prepared: 300,
                invalid: 0,
            }
        );
    }

    #[test]
    fn first_batches_shrink_as_invalid_items_get_common() {
        assert_eq!(first_batch_size(2048, 0.0), 2048);
        assert_eq!(first_batch_size(100, 0.0), 100);
        assert_eq!(first_batch_size(1, 0.0), 1);
        assert_eq!(first_batch_size(0, 0.0), 1);
        assert_eq!(first_batch_size(2048, 0.1), 1);
        assert_eq!(first_batch_size(2048, 1.0), 1);
        assert_eq!(
            first_batch_size(2048, f64::NAN),
            first_batch_size(2048, 0.0)
        );
        let one_percent = first_batch_size(2048, 0.01);
        assert!((4..=16).contains(&one_percent), "{one_percent}");
        let mut previous = usize::MAX;
        for rate in [0.0, 1e-5, 1e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.5] {
            let size = first_batch_size(2048, rate);
            assert!(size <= previous, "rate {rate}: {size} > {previous}");
            previous = size;
        }
    }

    #[test]
    fn a_known_flood_is_checked_item_by_item() {
        let mut items = valid_items(1000);
        for item in items.iter_mut().step_by(5) {
            corrupt(item);
        }
        let mut out = vec![false; items.len()];
        let work = verify_chunk(&items, &view, &mut out, 0.2, &KeyCache::new(16));
        assert_eq!(out, singles(&items));
        assert_eq!(work.batches, 0);
        assert_eq!(work.singles, 1000);
        assert_eq!(work.invalid, 200);
    }

    #[test]
    fn invalid_rate_follows_recent_calls() {
        let v = ParallelVerifier::with_min_chunk(2, 16).expect("pool");
        assert_eq!(v.invalid_rate(), 0.0);
        let mut polluted = valid_items(1024);
        for item in polluted.iter_mut().step_by(2) {
            corrupt(item);
        }
        let expected = singles(&polluted);
        assert_eq!(v.verify(&polluted, view), expected);
        let after_flood = v.invalid_rate();
        assert!((0.2..=0.5).contains(&after_flood), "{after_flood}");
        // The next flood is checked item by item, with the same answers.
        assert_eq!(v.verify(&polluted, view), expected);
        let clean = valid_items(1024);
        for _ in 0..12 {
            assert!(v.verify(&clean, view).iter().all(|&ok| ok));
        }
        assert!(v.invalid_rate() < 0.001, "{}", v.invalid_rate());
    }

    #[test]
    fn bad_items_at_the_edges_and_everywhere() {
        let v = ParallelVerifier::with_min_chunk(2, 16).expect("pool");
        for bad in [
            vec![0],
            vec![99],
            vec![0, 99],
            vec![15, 16, 31, 32, 33],
            (0..100).step_by(3).collect(),
            (0..100).collect(),
        ] {
            let mut items = valid_items(100);
            for &i in &bad {
                corrupt(&mut items[i]);
            }
            let expected = singles(&items);
            assert_eq!(
                expected.iter().filter(|&&ok| !ok).count(),
                bad.len(),
                "{bad:?}"
            );
            assert_eq!(v.verify(&items, view), expected, "{bad:?}");
        }
    }

    #[test]
    fn undecodable_keys_and_garbage_are_invalid_not_panics() {
        let mut items = valid_items(40);
        // 0x02 followed by zeros: y = 2 is not on the curve.
        let mut bad_key = [0u8; 32];
        bad_key[0] = 2;
        items[3].key = PublicKey(bad_key);
        items[5].signature = Signature::default();
        items[7].signature = Signature::from_bytes(&[0xff; 64]);
        items[9].key = PublicKey([0xff; 32]);
        let v = ParallelVerifier::with_min_chunk(2, 4).expect("pool");
        let got = v.verify(&items, view);
        assert_eq!(got, singles(&items));
        for i in [3, 5, 7, 9] {
            assert!(!got[i], "item {i}");
        }
        assert_eq!(got.iter().filter(|&&ok| ok).count(), 36);
    }
}
