//! Verifies many independent signatures on a dedicated thread pool, with batch verification
//! per chunk and a recursive split of failed batches to find exactly which items are invalid.

use crate::signature::Prepared;
use crate::{PublicKey, Signature};
use rayon::prelude::*;
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
/// chunk, and a flood of bad ones costs at most about twice the single checks.
///
/// The answer for every item is exactly [`Signature::verify_bytes`]'s, whatever the chunking
/// (see `signature::Prepared` for why the batch and single rules cannot disagree).
pub struct ParallelVerifier {
    pool: rayon::ThreadPool,
    threads: usize,
    min_chunk: usize,
}

impl ParallelVerifier {
    /// Smallest chunk handed to one batch. The bench (`cargo bench -p crypto`) shows batch cost
    /// per signature still falling steeply up to about 128 items and flattening after that, so
    /// smaller chunks would waste most of the batch gain on small blocks, while larger minimums
    /// would leave threads idle on blocks of a few hundred transactions.
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
        })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn min_chunk(&self) -> usize {
        self.min_chunk
    }

    /// The number of items per batch for a slice of `len` items.
    pub fn chunk_size(&self, len: usize) -> usize {
        len.div_ceil(self.threads).max(self.min_chunk)
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
        self.pool.install(|| {
            valid
                .par_chunks_mut(chunk)
                .zip(items.par_chunks(chunk))
                .for_each(|(out, chunk)| {
                    verify_chunk(chunk, &view, out);
                });
        });
        valid
    }
}

/// Parts a failed batch is split into. Measured against halving in a cost model (batch cost per
/// signature falling from ~0.85 of a single check at 2 items to ~0.3 at 1024): with one bad item
/// the two cost the same, but halving degrades fast as bad items get denser (six times the cost of
/// single checks when every item is bad), while a wide split finds many bad items in few rounds.
const FAN_OUT: usize = 16;

/// How much checking a chunk took; lets the tests see that isolation stays cheap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Work {
    batches: usize,
    batch_items: usize,
    singles: usize,
}

impl std::ops::Add for Work {
    type Output = Work;
    fn add(self, other: Work) -> Work {
        Work {
            batches: self.batches + other.batches,
            batch_items: self.batch_items + other.batch_items,
            singles: self.singles + other.singles,
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

/// Writes the validity of each item of `items` into `out` (same length).
fn verify_chunk<T, F>(items: &[T], view: &F, out: &mut [bool]) -> Work
where
    F: Fn(&T) -> (&[u8], &Signature, &PublicKey),
{
    // Decoding and hashing happen once per item; items that do not decode stay `false` and
    // never enter a batch, so a batch fails only on the verification equation.
    let mut prepared = Vec::with_capacity(items.len());
    let mut index = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let (message, signature, key) = view(item);
        if let Ok(p) = Prepared::new(message, signature, key) {
            prepared.push(p);
            index.push(i);
        }
    }
    let mut valid = vec![false; prepared.len()];
    let mut work = Work::default();
    if check_range(&prepared, &mut valid, &mut work) == Outcome::Failed {
        work = work + isolate(&prepared, &mut valid);
    }
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

/// Locates the invalid items of a range whose batch failed: checks [`FAN_OUT`] parts, then
/// locates the invalid items of each failed part the same way. If more than half of the parts
/// failed, bad items are too dense for further batching to pay, so the failed parts' items get
/// single checks. Every `false` is therefore decided by a single check. The parts are checked in
/// parallel so that idle verifier threads help with a chunk that holds invalid items.
fn isolate(prepared: &[Prepared], valid: &mut [bool]) -> Work {
    let part = prepared.len().div_ceil(FAN_OUT);
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
                isolate(p, v)
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
        let work = verify_chunk(&items, &view, &mut out);
        let expected: Vec<bool> = (0..1000).map(|i| i != 617).collect();
        assert_eq!(out, expected);
        // The failed batch of 1000, its 16 parts of 63 (one fails), that part's 16 parts of 4
        // (one fails), then 4 single checks.
        assert_eq!(
            work,
            Work {
                batches: 1 + 16 + 16,
                batch_items: 1000 + 1000 + 63,
                singles: 4
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
        let work = verify_chunk(&items, &view, &mut out);
        assert_eq!(out, singles(&items));
        // Every part fails, so no further batching: two rounds of batches, then singles.
        assert_eq!(
            work,
            Work {
                batches: 1 + 16,
                batch_items: 2000,
                singles: 1000
            }
        );
    }

    #[test]
    fn all_valid_is_one_batch_per_chunk() {
        let items = valid_items(300);
        let mut out = vec![false; items.len()];
        let work = verify_chunk(&items, &view, &mut out);
        assert!(out.iter().all(|&ok| ok));
        assert_eq!(
            work,
            Work {
                batches: 1,
                batch_items: 300,
                singles: 0
            }
        );
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
