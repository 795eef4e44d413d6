//! The batches this node sealed from transactions its ingress check passed (see `ingress.rs`):
//! the stage that checks committed batches takes their transactions as they are instead of
//! checking them a second time.
//!
//! Why that is safe: the node trusts its own ingress check exactly as it trusts its own seal.
//! The batch is the bytes this node put together, every transaction of which its own check
//! passed, and the digest that commits names those bytes; checking them again here could only
//! repeat the same deterministic answer. Nobody else's word is taken: a peer's batch is never
//! in this set, so it is still checked in full (or, under `--verify=attested`, taken on the
//! statements of f+1 stake of attesters).
//!
//! Bounded in batches: the oldest are forgotten first, which only costs a check (a batch that
//! commits after a thousand of its successors were sealed).

use crypto::Digest;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Batches remembered: far more than are ever sealed and not yet through the verifier.
const REMEMBERED: usize = 1_024;

#[derive(Clone, Default)]
pub struct CheckedBatches {
    inner: Arc<Mutex<Remembered>>,
}

#[derive(Default)]
struct Remembered {
    batches: HashSet<Digest>,
    order: VecDeque<Digest>,
}

impl CheckedBatches {
    fn lock(&self) -> MutexGuard<'_, Remembered> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This node sealed `batch` from checked transactions only.
    pub fn sealed(&self, batch: Digest) {
        let mut remembered = self.lock();
        if remembered.batches.insert(batch) {
            remembered.order.push_back(batch);
        }
        while remembered.order.len() > REMEMBERED {
            if let Some(oldest) = remembered.order.pop_front() {
                remembered.batches.remove(&oldest);
            }
        }
    }

    /// Whether this node sealed `batch` from checked transactions (and still remembers it).
    pub fn contains(&self, batch: &Digest) -> bool {
        self.lock().batches.contains(batch)
    }

    /// The batch is through the check: it is forgotten (a second commit of it is checked).
    pub fn forget(&self, batch: &Digest) {
        let mut remembered = self.lock();
        if remembered.batches.remove(batch) {
            remembered.order.retain(|b| b != batch);
        }
    }

    pub fn len(&self) -> usize {
        self.lock().batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_what_was_sealed_until_it_is_forgotten_or_too_old() {
        let checked = CheckedBatches::default();
        let digest = |i: usize| Digest::of(&i.to_le_bytes());
        checked.sealed(digest(0));
        assert!(checked.contains(&digest(0)));
        assert!(!checked.contains(&digest(1)));
        checked.forget(&digest(0));
        assert!(!checked.contains(&digest(0)));
        assert!(checked.is_empty());
        for i in 0..REMEMBERED + 10 {
            checked.sealed(digest(i));
        }
        assert_eq!(checked.len(), REMEMBERED);
        assert!(!checked.contains(&digest(9)), "the oldest go first");
        assert!(checked.contains(&digest(10)));
        assert!(checked.contains(&digest(REMEMBERED + 9)));
    }
}
