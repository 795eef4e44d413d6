//! Finding the invalid items among prepared signatures with batch checks: adaptive group testing.
//!
//! A batch check of n items costs far less than n single checks but only says whether all n
//! are valid. Items are checked in groups whose size is chosen, group after group, for the share
//! of invalid items seen so far; a group that fails is searched the same way (it holds at least
//! one invalid item). A chunk with k invalid items among n costs its clean batch, then groups
//! for the rest (about sqrt(k·n) batches) and about log2(n/k) small batches and a few single
//! checks per invalid item: the single checks grow with k, not with n. Only where invalid items
//! are so dense that batching no longer pays (about one in seven) do the groups shrink to single
//! checks.
//!
//! This is the one fallback for a failed batch: the verifier stage, the attesters and the
//! mempool's ingress check all reach it through `ParallelVerifier::verify`. The ingress check
//! (at the node a client sends to, before a batch is sealed) keeps forgeries out of honest
//! authors' batches, but does not make this unnecessary: a Byzantine author skips it and seals
//! forgeries anyway, so every node that checks a batch (each one under `all`, the attesters
//! under `attested`) still needs a check that forgeries cannot make expensive, and the ingress
//! check itself meets its clients' forgeries. This is that check.

use crate::signature::Prepared;

/// Per-item cost of one batch check of `n` prepared items (key decoded, message hashed),
/// relative to one single check of a prepared item, for the largest `n` listed at or below the
/// batch's size: CPU time in the `prepared` group of `cargo bench -p crypto --bench forged`,
/// three runs on the shared 2-core test machine (a single check: 27 to 34 µs). Noisy, but they
/// only steer how items are grouped, never an answer.
const BATCH_COST: [(usize, f64); 14] = [
    (2, 0.75),
    (3, 0.62),
    (4, 0.55),
    (6, 0.48),
    (8, 0.43),
    (12, 0.40),
    (16, 0.38),
    (32, 0.36),
    (64, 0.34),
    (128, 0.30),
    (256, 0.26),
    (512, 0.23),
    (1024, 0.21),
    (2048, 0.20),
];

/// Group sizes tried, besides everything that is left of a range.
const GROUP_SIZES: [usize; 19] = [
    2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
];

/// Items the verifier's recent invalid share counts for when a chunk starts: enough to size the
/// first groups, little enough that the chunk's own checks overrule a stale history within a
/// few groups (a forger who floods one batch cannot make the next clean ones expensive).
const PRIOR_WEIGHT: f64 = 16.0;

/// Weight an observation keeps per item settled after it (a half-life of about 44 items). One
/// client's transactions sit together in a batch, so forgeries come in runs; without forgetting,
/// a run would make the clean rest of the chunk look dense and cost it small groups.
const DECAY: f64 = 1.0 - 1.0 / 64.0;

/// How much checking a chunk took, and what it found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Work {
    pub batches: usize,
    pub batch_items: usize,
    pub singles: usize,
    /// Items that decoded, and how many of them turned out invalid.
    pub prepared: usize,
    pub invalid: usize,
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

/// Whether each of `items` is valid, exactly as its single check ([`Prepared::check`]) says,
/// and the work it took. `prior` is the share of invalid items recently seen (0 to 1).
///
/// Why the answers are the single checks': a batch fails only if one of its items fails its single
/// check (the cofactored equations add up exactly), and passes with an invalid item only with
/// probability about 2^-128 over its fresh random weights. So an item is marked valid when a batch
/// holding it passes, and invalid when its single check fails, or when it is the one item of a
/// failed range whose every other item passed (the same 2^-128 bound, from those passes).
pub(crate) fn settle(items: &[Prepared], prior: f64) -> (Vec<bool>, Work) {
    let mut search = Search {
        items,
        valid: vec![false; items.len()],
        share: Share::new(prior),
        work: Work {
            prepared: items.len(),
            ..Work::default()
        },
    };
    search.settle(0, items.len(), false);
    search.work.invalid = search.valid.iter().filter(|&&ok| !ok).count();
    (search.valid, search.work)
}

struct Search<'a> {
    items: &'a [Prepared],
    valid: Vec<bool>,
    share: Share,
    work: Work,
}

impl Search<'_> {
    /// Settles `items[start..end]`; `failed`: a batch check of the whole range failed, so it holds
    /// an invalid item (the range is then never checked whole again).
    fn settle(&mut self, start: usize, end: usize, failed: bool) {
        let mut at = start;
        // The range is known to hold an invalid item not yet found.
        let mut unfound = failed;
        while at < end {
            let rest = end - at;
            let share = if unfound {
                // At least one invalid item among the rest.
                self.share.get().max(1.0 / rest as f64)
            } else {
                self.share.get()
            };
            let size = group_size(share, rest);
            if unfound && size >= rest {
                if rest == 1 {
                    // Every other item of the failed range passed: this one is the invalid one.
                    self.share.observe(1, 1);
                    return;
                }
                // The best group is the rest, which is known to fail: check its first half.
                let half = at + rest / 2;
                if self.batch(at, half) {
                    at = half;
                    continue;
                }
                self.settle(at, half, true);
                self.settle(half, end, false);
                return;
            }
            if size == 1 {
                let ok = self.single(at);
                unfound &= ok;
                at += 1;
                continue;
            }
            if !self.batch(at, at + size) {
                self.settle(at, at + size, true);
                unfound = false;
            }
            at += size;
        }
    }

    /// Batch-checks `items[start..end]` (at least 2), marking them valid if it passes.
    fn batch(&mut self, start: usize, end: usize) -> bool {
        self.work.batches += 1;
        self.work.batch_items += end - start;
        let ok = Prepared::check_batch(&self.items[start..end]);
        if ok {
            self.valid[start..end].fill(true);
            self.share.observe(end - start, 0);
        }
        ok
    }

    fn single(&mut self, at: usize) -> bool {
        self.work.singles += 1;
        let ok = self.items[at].check();
        self.valid[at] = ok;
        self.share.observe(1, usize::from(!ok));
        ok
    }
}

/// The share of invalid items where the search is: a prior, then what was settled, the latest
/// items weighing most.
struct Share {
    invalid: f64,
    settled: f64,
}

impl Share {
    fn new(prior: f64) -> Self {
        let prior = if prior.is_nan() {
            0.0
        } else {
            prior.clamp(0.0, 1.0)
        };
        Share {
            invalid: prior * PRIOR_WEIGHT,
            settled: PRIOR_WEIGHT,
        }
    }

    fn observe(&mut self, settled: usize, invalid: usize) {
        let keep = DECAY.powi(i32::try_from(settled).unwrap_or(i32::MAX));
        self.invalid = self.invalid * keep + invalid as f64;
        self.settled = self.settled * keep + settled as f64;
    }

    fn get(&self) -> f64 {
        self.invalid / self.settled
    }
}

/// Per-item cost of a batch check of `n` items, in single checks.
fn batch_cost(n: usize) -> f64 {
    BATCH_COST
        .iter()
        .rev()
        .find(|(size, _)| *size <= n)
        .map_or(1.0, |(_, cost)| *cost)
}

/// The group size, 1 (single checks) up to `rest`, with the least expected cost per item when
/// items are invalid independently with probability `share`: the batch, plus, if it fails, about
/// what finding its invalid items costs. On a tie the larger group, so a clean history checks a
/// chunk as one batch.
pub(crate) fn group_size(share: f64, rest: usize) -> usize {
    let share = if share.is_nan() {
        0.0
    } else {
        share.clamp(0.0, 1.0)
    };
    let mut best = (1.0, 1);
    let sizes = GROUP_SIZES
        .iter()
        .copied()
        .filter(|&n| n < rest)
        .chain(std::iter::once(rest))
        .filter(|&n| n >= 2);
    for n in sizes {
        let dirty = 1.0 - (1.0 - share).powi(i32::try_from(n).unwrap_or(i32::MAX));
        let cost = batch_cost(n) + dirty * search_cost(n, share) / n as f64;
        if cost <= best.0 {
            best = (cost, n);
        }
    }
    best.1
}

/// About what finding the invalid items of a failed group of `n` costs, in single checks: with
/// κ invalid items expected, the first log2 κ halvings check the whole group each, then each
/// item's half costs about 1.5 group checks (half the time its sibling must be checked too);
/// never more than checking each item alone.
fn search_cost(n: usize, share: f64) -> f64 {
    let n_items = n as f64;
    let dirty = 1.0 - (1.0 - share).powi(i32::try_from(n).unwrap_or(i32::MAX));
    let expected = if dirty > 0.0 {
        (n_items * share / dirty).max(1.0)
    } else {
        1.0
    };
    (n_items * batch_cost(n) * (expected.log2() + 1.5)).min(n_items)
}

#[cfg(test)]
mod tests;
