//! The verifier's search for invalid items as it was before `locate` (the reference the `forged`
//! bench compares with): chunks start with batches sized for the recent invalid rate (single
//! checks from about 10 %), a failed batch is split into 16 parts checked in parallel, and when
//! more than half of the parts fail, the failed parts' items are checked one by one. Chunking
//! and key caching are the verifier's, so the two differ only in how invalid items are found.

use crypto::internals::{KeyCache, Prepared};
use crypto::{PublicKey, Signature};
use rayon::prelude::*;
use std::sync::Mutex;

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
const FAN_OUT: usize = 16;
const RATE_MEMORY: usize = 1024;

pub struct PreviousVerifier {
    pool: rayon::ThreadPool,
    threads: usize,
    min_chunk: usize,
    invalid_rate: Mutex<f64>,
    keys: KeyCache,
}

impl PreviousVerifier {
    /// `threads` threads (0: one per core), chunks of at least 128 items, like the verifier.
    pub fn new(threads: usize) -> Self {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("verifier pool");
        PreviousVerifier {
            pool,
            threads,
            min_chunk: 128,
            invalid_rate: Mutex::new(0.0),
            keys: KeyCache::new(100_000),
        }
    }

    pub fn verify<T, F>(&self, items: &[T], view: F) -> Vec<bool>
    where
        T: Sync,
        F: Fn(&T) -> (&[u8], &Signature, &PublicKey) + Sync,
    {
        let mut valid = vec![false; items.len()];
        if items.is_empty() {
            return valid;
        }
        let chunk = items.len().div_ceil(self.threads).max(self.min_chunk);
        let rate = *self.invalid_rate.lock().expect("rate");
        let (prepared, invalid) = self.pool.install(|| {
            valid
                .par_chunks_mut(chunk)
                .zip(items.par_chunks(chunk))
                .map(|(out, chunk)| self.verify_chunk(chunk, &view, out, rate))
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        });
        if prepared > 0 {
            let mut old = self.invalid_rate.lock().expect("rate");
            let weight = prepared as f64 / (prepared + RATE_MEMORY) as f64;
            *old += weight * (invalid as f64 / prepared as f64 - *old);
        }
        valid
    }

    fn verify_chunk<T, F>(
        &self,
        items: &[T],
        view: &F,
        out: &mut [bool],
        rate: f64,
    ) -> (usize, usize)
    where
        F: Fn(&T) -> (&[u8], &Signature, &PublicKey),
    {
        let mut prepared = Vec::with_capacity(items.len());
        let mut index = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (message, signature, key) = view(item);
            let p = self
                .keys
                .decode(key)
                .and_then(|a| Prepared::with_key(message, signature, key, a));
            if let Ok(p) = p {
                prepared.push(p);
                index.push(i);
            }
        }
        let mut valid = vec![false; prepared.len()];
        let first = first_batch_size(prepared.len(), rate);
        if first >= prepared.len() {
            if !check_range(&prepared, &mut valid) {
                locate(&prepared, &mut valid, prepared.len().div_ceil(FAN_OUT));
            }
        } else {
            locate(&prepared, &mut valid, first);
        }
        let invalid = valid.iter().filter(|&&ok| !ok).count();
        for (&i, ok) in index.iter().zip(valid) {
            out[i] = ok;
        }
        (prepared.len(), invalid)
    }
}

fn first_batch_size(len: usize, rate: f64) -> usize {
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
        let dirty = 1.0 - (1.0 - rate).powi(n as i32);
        let cost = cost_at(n) + dirty;
        if cost <= best.0 {
            best = (cost, n);
        }
    }
    best.1
}

/// Whether the range is settled (all valid, or its one item checked); false: a batch failed.
fn check_range(prepared: &[Prepared], valid: &mut [bool]) -> bool {
    match prepared {
        [] => true,
        [one] => {
            valid[0] = one.check();
            true
        }
        _ => {
            let ok = Prepared::check_batch(prepared);
            if ok {
                valid.fill(true);
            }
            ok
        }
    }
}

fn locate(prepared: &[Prepared], valid: &mut [bool], part: usize) {
    let part = part.max(1);
    let settled: Vec<bool> = prepared
        .par_chunks(part)
        .zip(valid.par_chunks_mut(part))
        .map(|(p, v)| check_range(p, v))
        .collect();
    let failed = settled.iter().filter(|ok| !**ok).count();
    let dense = 2 * failed > settled.len();
    prepared
        .par_chunks(part)
        .zip(valid.par_chunks_mut(part))
        .zip(settled.par_iter())
        .filter(|(_, ok)| !**ok)
        .for_each(|((p, v), _)| {
            if dense {
                for (item, ok) in p.iter().zip(v.iter_mut()) {
                    *ok = item.check();
                }
            } else {
                locate(p, v, p.len().div_ceil(FAN_OUT));
            }
        });
}
