//! How many uncommitted batches each committee member has stored on this node.

use crypto::{Digest, PublicKey};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Counts, per member, the batches it sent us that are stored and not yet committed, and refuses
/// more than `limit` (`Parameters::max_uncommitted_batches_per_author`). "Author" is the member
/// whose authenticated connection delivered the batch: batches carry no author, and whoever
/// sends us a batch is the one making us hold it. A batch leaves the count when a block that
/// names it commits. Shared by every connection of the mempool port and by the synchronizer,
/// which hears of commits.
#[derive(Clone)]
pub struct AuthorQuota {
    limit: usize,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    by_author: HashMap<PublicKey, HashSet<Digest>>,
    author_of: HashMap<Digest, PublicKey>,
}

impl AuthorQuota {
    pub fn new(limit: usize) -> Self {
        AuthorQuota {
            limit,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `author` may make us store `digest` (which we do not hold yet); counts it if so.
    /// A digest already counted (a retransmission, or the same batch from another member) costs
    /// nothing more.
    pub fn admit(&self, author: PublicKey, digest: Digest) -> bool {
        let mut state = self.lock();
        if state.author_of.contains_key(&digest) {
            return true;
        }
        let held = state.by_author.entry(author).or_default();
        if held.len() >= self.limit {
            return false;
        }
        held.insert(digest);
        state.author_of.insert(digest, author);
        true
    }

    /// These batches committed: they no longer count against anyone.
    pub fn committed(&self, digests: &[Digest]) {
        let mut state = self.lock();
        for digest in digests {
            if let Some(author) = state.author_of.remove(digest) {
                if let Some(held) = state.by_author.get_mut(&author) {
                    held.remove(digest);
                    if held.is_empty() {
                        state.by_author.remove(&author);
                    }
                }
            }
        }
    }

    /// Uncommitted batches `author` has stored here.
    #[cfg(test)]
    pub fn uncommitted(&self, author: &PublicKey) -> usize {
        self.lock().by_author.get(author).map_or(0, HashSet::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyPair;

    #[test]
    fn refuses_over_the_limit_until_a_commit() {
        let quota = AuthorQuota::new(2);
        let (a, b) = (KeyPair::from_seed(1).name, KeyPair::from_seed(2).name);
        let d = |i: u8| Digest::of(&[i]);
        assert!(quota.admit(a, d(1)));
        assert!(quota.admit(a, d(2)));
        assert!(!quota.admit(a, d(3)));
        // Another member has its own allowance; a digest already counted is free.
        assert!(quota.admit(b, d(3)));
        assert!(quota.admit(a, d(3)));
        assert_eq!(quota.uncommitted(&a), 2);
        quota.committed(&[d(1), d(9)]);
        assert_eq!(quota.uncommitted(&a), 1);
        assert!(quota.admit(a, d(4)));
        assert!(!quota.admit(a, d(5)));
    }
}
