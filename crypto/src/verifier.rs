//! Verifies many independent signatures on a dedicated thread pool, with batch verification
//! per chunk and a search of failed batches (`locate`) to find exactly which items are invalid.

use crate::keys::PublicKey;
use crate::locate::{self, Work};
use crate::signature::Signature;
use crate::signature::{KeyCache, Prepared};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
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
/// batches too small to pay off (while forgeries are common, smaller chunks: see
/// `chunk_size_at`). A chunk is checked in groups sized for the share of invalid
/// items seen so far (one batch for the whole chunk after clean calls); a group that fails is
/// searched with smaller batches, so k forgeries cost a few small batches and single checks each
/// on top of the clean price, not a single check per item; only where they are dense enough
/// that batching no longer pays do the groups shrink to single checks.
///
/// The answer for every item is exactly [`Signature::verify_bytes`]'s, whatever the chunking
/// (see `signature::Prepared` for why the batch and single rules cannot disagree).
pub struct ParallelVerifier {
    /// Shared with the verifiers [`Self::sharing_threads`] makes.
    pool: Arc<rayon::ThreadPool>,
    threads: usize,
    min_chunk: usize,
    /// Recent share of invalid items (f64 bits), to size the first groups of a chunk.
    invalid_rate: AtomicU64,
    keys: Arc<KeyCache>,
}

impl ParallelVerifier {
    /// Smallest chunk handed to one thread. Measured per-signature batch cost, decoding
    /// included, relative to a single check (`cargo bench -p crypto --bench verify`, batch/N
    /// against single): 0.62 at 8 items, 0.57 at 16, 0.52 at 128, 0.44 at 1024.
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
            pool: Arc::new(pool),
            threads,
            min_chunk: min_chunk.max(1),
            invalid_rate: AtomicU64::new(0f64.to_bits()),
            keys: Arc::new(KeyCache::new(KEY_CACHE_LIMIT)),
        })
    }

    /// A verifier on the same threads, with the same decoded keys, but a history of invalid
    /// items of its own. Items from different sources differ in how many are invalid (a node's
    /// clients may forge many, the batches its peers sealed from checked transactions none): a
    /// shared history would size one source's groups for the other's forgeries.
    pub fn sharing_threads(&self) -> ParallelVerifier {
        ParallelVerifier {
            pool: self.pool.clone(),
            threads: self.threads,
            min_chunk: self.min_chunk,
            invalid_rate: AtomicU64::new(0f64.to_bits()),
            keys: self.keys.clone(),
        }
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

    /// [`Self::chunk_size`], unless recent calls saw so many invalid items that chunks will be
    /// checked in groups of at most a sixteenth of a chunk: then about four chunks per thread
    /// (not below the minimum). Batches lose nothing to it, and the threads share out searches
    /// whose cost varies with each chunk's forgeries, instead of one waiting for the other.
    fn chunk_size_at(&self, len: usize, invalid_rate: f64) -> usize {
        let chunk = self.chunk_size(len);
        if 16 * locate::group_size(invalid_rate, chunk) <= chunk {
            len.div_ceil(4 * self.threads)
                .max(self.min_chunk)
                .min(chunk)
        } else {
            chunk
        }
    }

    /// A moving average of the share of decodable items found invalid by recent calls. It only
    /// sizes the first groups of a chunk, never decides an answer; the chunk's own checks soon
    /// outweigh it.
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
        let rate = self.invalid_rate();
        let chunk = self.chunk_size_at(items.len(), rate);
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

/// Decoded keys kept by one verifier (about 160 bytes each).
const KEY_CACHE_LIMIT: usize = 100_000;

/// Writes the validity of each item of `items` into `out` (same length): decodes and hashes each
/// item once, then finds the invalid ones among those that decode (see [`locate::settle`]),
/// starting from the recent `invalid_rate`.
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
    // Items that do not decode stay `false` and never enter a batch, so a batch fails only on
    // the verification equation.
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
    let (valid, work) = locate::settle(&prepared, invalid_rate);
    for (&i, ok) in index.iter().zip(valid) {
        out[i] = ok;
    }
    work
}

#[cfg(test)]
mod tests;
