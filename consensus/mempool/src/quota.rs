//! How many uncommitted batches each committee member has stored on this node, and which
//! batches committed recently (a batch that arrives again after it committed is not stored).

use config::Round;
use crypto::{Digest, PublicKey};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Counts, per member, the batches it sent us that are stored and not yet committed, and refuses
/// more than `limit` (`Parameters::max_uncommitted_batches_per_author`). "Author" is the member
/// whose authenticated connection delivered the batch: batches carry no author, and whoever
/// sends us a batch is the one making us hold it. A batch leaves the count when a block that
/// names it commits. Shared by every connection of the mempool port and by the synchronizer,
/// which hears of commits.
///
/// A batch that committed and was collected may arrive again (a retransmission, a sync reply
/// that crossed the commit): stored again, it would never commit again, so it would stay in the
/// store and count against its sender for good. Committed batches are therefore remembered for
/// `keep_rounds` rounds (the GC depth), and one of them that arrives again is acknowledged
/// without being stored or counted ([`Admission::Committed`]).
#[derive(Clone)]
pub struct AuthorQuota {
    limit: usize,
    keep_rounds: Round,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    by_author: HashMap<PublicKey, HashSet<Digest>>,
    author_of: HashMap<Digest, PublicKey>,
    /// Batches committed recently, by the round they were heard of as committed.
    committed: HashSet<Digest>,
    committed_at: BTreeMap<Round, Vec<Digest>>,
}

/// What to do with a batch a member sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Store it: it counts against the member now.
    Store,
    /// The member holds its limit of uncommitted batches here already.
    Refuse,
    /// It committed recently: acknowledge it, store nothing.
    Committed,
}

impl AuthorQuota {
    /// At most `limit` uncommitted batches per member; committed ones remembered for
    /// `keep_rounds` rounds.
    pub fn new(limit: usize, keep_rounds: Round) -> Self {
        AuthorQuota {
            limit,
            keep_rounds,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `author` may make us store `digest` (which we do not hold yet); counts it if so.
    /// A digest already counted (a retransmission, or the same batch from another member) costs
    /// nothing more.
    pub fn admit(&self, author: PublicKey, digest: Digest) -> Admission {
        let mut state = self.lock();
        if state.committed.contains(&digest) {
            return Admission::Committed;
        }
        if state.author_of.contains_key(&digest) {
            return Admission::Store;
        }
        let held = state.by_author.entry(author).or_default();
        if held.len() >= self.limit {
            return Admission::Refuse;
        }
        held.insert(digest);
        state.author_of.insert(digest, author);
        Admission::Store
    }

    /// Whether `digest` committed recently (a batch that arrives again is not stored).
    pub fn is_committed(&self, digest: &Digest) -> bool {
        self.lock().committed.contains(digest)
    }

    /// These batches committed (heard of at `round`): they no longer count against anyone,
    /// and are not stored again for `keep_rounds` rounds.
    pub fn committed(&self, digests: &[Digest], round: Round) {
        let mut state = self.lock();
        let fresh: Vec<Digest> = digests
            .iter()
            .filter(|d| !state.committed.contains(*d))
            .copied()
            .collect();
        state.committed.extend(fresh.iter().copied());
        state.committed_at.entry(round).or_default().extend(fresh);
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

    /// Forgets the batches committed more than `keep_rounds` rounds before `round`.
    pub fn cleanup(&self, round: Round) {
        let mut state = self.lock();
        let floor = round.saturating_sub(self.keep_rounds);
        let keep = state.committed_at.split_off(&floor);
        let old = std::mem::replace(&mut state.committed_at, keep);
        for digest in old.into_values().flatten() {
            state.committed.remove(&digest);
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
        let quota = AuthorQuota::new(2, 10);
        let (a, b) = (KeyPair::from_seed(1).name, KeyPair::from_seed(2).name);
        let d = |i: u8| Digest::of(&[i]);
        assert_eq!(quota.admit(a, d(1)), Admission::Store);
        assert_eq!(quota.admit(a, d(2)), Admission::Store);
        assert_eq!(quota.admit(a, d(3)), Admission::Refuse);
        // Another member has its own allowance; a digest already counted is free.
        assert_eq!(quota.admit(b, d(3)), Admission::Store);
        assert_eq!(quota.admit(a, d(3)), Admission::Store);
        assert_eq!(quota.uncommitted(&a), 2);
        quota.committed(&[d(1), d(9)], 1);
        assert_eq!(quota.uncommitted(&a), 1);
        assert_eq!(quota.admit(a, d(4)), Admission::Store);
        assert_eq!(quota.admit(a, d(5)), Admission::Refuse);
    }

    /// A batch that committed and then arrives again (a retransmission after it was collected)
    /// is not counted against its sender: it would never commit again, so it would hold a
    /// place of the sender's quota for good. Before, an honest member's quota filled with such
    /// entries.
    #[test]
    fn byzantine_a_batch_that_arrives_again_after_its_commit_is_not_counted() {
        let quota = AuthorQuota::new(1, 10);
        let a = KeyPair::from_seed(1).name;
        let (old, new) = (Digest::of(b"old"), Digest::of(b"new"));
        assert_eq!(quota.admit(a, old), Admission::Store);
        quota.committed(&[old], 5);
        // Collected by the committer, then sent again.
        assert_eq!(quota.admit(a, old), Admission::Committed);
        assert_eq!(quota.uncommitted(&a), 0);
        assert_eq!(quota.admit(a, new), Admission::Store);
        // Remembered for `keep_rounds` rounds only.
        quota.cleanup(15);
        assert!(quota.is_committed(&old));
        quota.cleanup(16);
        assert!(!quota.is_committed(&old));
    }
}
