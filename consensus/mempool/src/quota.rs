//! How many uncommitted batches each committee member has stored on this node, which batches
//! committed recently (a batch that arrives again after it committed is not stored), and when a
//! batch that never commits stops counting.

use config::Round;
use crypto::{Digest, PublicKey};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Counts, per member, the batches it sent us that are stored and not yet committed, and refuses
/// more than `limit` (`Parameters::max_uncommitted_batches_per_author`). "Author" is the member
/// whose authenticated connection delivered the batch: batches carry no author, and whoever
/// sends us a batch is the one making us hold it. A batch leaves the count when a block that
/// names it commits.
///
/// A batch that committed and was collected may arrive again (a retransmission, a sync reply
/// that crossed the commit): stored again, it would never commit again, so it would stay in the
/// store and count against its sender for good. Committed batches are therefore remembered for
/// `keep_rounds` rounds (the GC depth), and one of them that arrives again is acknowledged
/// without being stored or counted ([`Admission::Committed`]).
///
/// That memory holds only the commits this node saw, and not across a restart: batches that
/// committed in a stretch of the chain it skipped (state sync after a partition, whose healing
/// makes the senders resend up to a buffer of unacknowledged batches) look new, and so do
/// batches that never commit at all (a Byzantine sender's, or ones nobody proposes). So the
/// count also drains by rounds: a batch that has waited `keep_rounds` rounds of commits since it
/// arrived leaves its sender's count, and is handed back by [`AuthorQuota::cleanup`] for the
/// store to delete, unless the caller still needs it (a block it stored that may still commit
/// names it): then it waits another `keep_rounds`. Honest batches are proposed within a few
/// rounds of arriving, so the drain takes only what would otherwise stay for good; what a member
/// can make a node hold is `limit` batches per `keep_rounds` rounds of commits.
///
/// Under `--verify=attested` the same count bounds the checking a member can make this node do
/// ([`AuthorQuota::charge_attesting`]): the bytes of its batches this node attests and that did
/// not commit yet are held within `attest_bytes`, and leave the count as the batches do, when
/// they commit or drain. An honest author never has more than its own backlog of batches
/// uncommitted (`max_uncommitted_bytes`); a member whose batches never commit gets at most
/// `attest_bytes` of them checked per `keep_rounds` rounds of commits, and the rest checked by
/// every node if they ever commit, as under `--verify=all`.
///
/// Shared by every connection of the mempool port, by the synchronizer, which hears of commits,
/// and by the consensus core, which drains it as it commits: whether a block that may still
/// commit names a batch is the core's to tell, and deciding in the task that checks blocks'
/// batches leaves no moment in which a batch is deleted between that check and the block's
/// commit.
#[derive(Clone)]
pub struct AuthorQuota {
    limit: usize,
    keep_rounds: Round,
    attest_bytes: u64,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    by_author: HashMap<PublicKey, HashSet<Digest>>,
    author_of: HashMap<Digest, PublicKey>,
    /// Counted batches by the round (latest commit heard of) they arrived in, or were last
    /// looked at by `cleanup`: what the drain walks, oldest first. Entries of batches that
    /// committed since are skipped there.
    arrivals: BTreeMap<Round, Vec<Digest>>,
    /// Batches committed recently, by the round they were heard of as committed.
    committed: HashSet<Digest>,
    committed_at: BTreeMap<Round, Vec<Digest>>,
    /// The latest round announced by `cleanup`.
    round: Round,
    /// Bytes of each member's uncommitted batches this node attests, and of each such batch.
    attesting: HashMap<PublicKey, u64>,
    attested: HashMap<Digest, u64>,
}

impl State {
    /// Stops counting `digest` against whoever sent it; false if it was not counted.
    fn uncount(&mut self, digest: &Digest) -> bool {
        let Some(author) = self.author_of.remove(digest) else {
            return false;
        };
        if let Some(bytes) = self.attested.remove(digest) {
            if let Some(held) = self.attesting.get_mut(&author) {
                *held = held.saturating_sub(bytes);
                if *held == 0 {
                    self.attesting.remove(&author);
                }
            }
        }
        if let Some(held) = self.by_author.get_mut(&author) {
            held.remove(digest);
            if held.is_empty() {
                self.by_author.remove(&author);
            }
        }
        true
    }
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
    /// At most `limit` uncommitted batches per member; committed ones remembered, and
    /// uncommitted ones counted, for `keep_rounds` rounds.
    pub fn new(limit: usize, keep_rounds: Round) -> Self {
        AuthorQuota {
            limit,
            keep_rounds,
            attest_bytes: u64::MAX,
            state: Arc::default(),
        }
    }

    /// Each member's uncommitted batches this node attests hold at most `bytes`.
    pub fn attesting(self, bytes: u64) -> Self {
        AuthorQuota {
            attest_bytes: bytes,
            ..self
        }
    }

    /// Whether this node may check `digest`, a batch of `bytes` that `author` made it store
    /// (and that is uncommitted), within `author`'s attesting bytes; counts it if so. A batch
    /// counted already, or counted against another member, is not checked again.
    pub fn charge_attesting(&self, author: PublicKey, digest: Digest, bytes: u64) -> bool {
        let mut state = self.lock();
        if state.author_of.get(&digest) != Some(&author) || state.attested.contains_key(&digest) {
            return false;
        }
        let held = state.attesting.get(&author).copied().unwrap_or(0);
        if held.saturating_add(bytes) > self.attest_bytes {
            return false;
        }
        state.attesting.insert(author, held + bytes);
        state.attested.insert(digest, bytes);
        true
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
        let round = state.round;
        state.arrivals.entry(round).or_default().push(digest);
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
            state.uncount(digest);
        }
    }

    /// Round `round` committed. Forgets the batches committed more than `keep_rounds` rounds
    /// before it, and drains those that arrived more than `keep_rounds` rounds before it and
    /// never committed, unless `needed` says they are still (they then wait again): the drained
    /// ones are returned, for the store to delete.
    pub fn cleanup(&self, round: Round, needed: impl Fn(&Digest) -> bool) -> Vec<Digest> {
        let mut state = self.lock();
        state.round = state.round.max(round);
        let round = state.round;
        let floor = round.saturating_sub(self.keep_rounds);
        let keep = state.committed_at.split_off(&floor);
        let old = std::mem::replace(&mut state.committed_at, keep);
        for digest in old.into_values().flatten() {
            state.committed.remove(&digest);
        }
        let waiting = state.arrivals.split_off(&floor);
        let due = std::mem::replace(&mut state.arrivals, waiting);
        let mut drained = Vec::new();
        for digest in due.into_values().flatten() {
            if !state.author_of.contains_key(&digest) {
                continue;
            }
            if needed(&digest) {
                state.arrivals.entry(round).or_default().push(digest);
            } else if state.uncount(&digest) {
                drained.push(digest);
            }
        }
        drained
    }

    /// Bytes of `author`'s uncommitted batches this node attests.
    #[cfg(test)]
    pub fn attesting_bytes(&self, author: &PublicKey) -> u64 {
        self.lock().attesting.get(author).copied().unwrap_or(0)
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
        quota.cleanup(15, |_| false);
        assert!(quota.is_committed(&old));
        quota.cleanup(16, |_| false);
        assert!(!quota.is_committed(&old));
    }

    /// Batches that arrive after they committed in a stretch of the chain this node skipped (a
    /// partition healed and the sender's reliable sender resent them; a restart) were charged
    /// to their sender for good: nothing told the quota they committed, and nothing ever would,
    /// so the sender's count only grew. A counted batch that no block stored here names leaves
    /// the count (and is returned, for the store) once it has waited `keep_rounds` rounds; one
    /// that a block still to commit names stays until that block's round is settled.
    #[test]
    fn byzantine_batches_committed_out_of_sight_drain_from_the_quota() {
        let quota = AuthorQuota::new(2, 10);
        let a = KeyPair::from_seed(1).name;
        let d = |i: u8| Digest::of(&[i]);
        let none = |_: &Digest| false;
        assert!(quota.cleanup(5, none).is_empty());
        assert_eq!(quota.admit(a, d(1)), Admission::Store);
        assert_eq!(quota.admit(a, d(2)), Admission::Store);
        assert_eq!(quota.admit(a, d(3)), Admission::Refuse);
        // A block that may still commit names d(2).
        let named = std::cell::Cell::new(true);
        let needed = |digest: &Digest| named.get() && *digest == d(2);
        assert!(quota.cleanup(15, needed).is_empty(), "10 rounds: not yet");
        assert_eq!(quota.cleanup(16, needed), vec![d(1)]);
        assert_eq!(quota.uncommitted(&a), 1);
        // Arrived at round 16, d(3) goes 10 rounds later; d(2) is still needed then.
        assert_eq!(quota.admit(a, d(3)), Admission::Store);
        assert!(quota.cleanup(26, needed).is_empty());
        assert_eq!(quota.cleanup(27, needed), vec![d(3)]);
        // Its block passed over, d(2) waits its rounds once more, then goes.
        named.set(false);
        assert!(quota.cleanup(30, needed).is_empty());
        assert!(quota.cleanup(37, needed).is_empty());
        assert_eq!(quota.cleanup(38, needed), vec![d(2)]);
        assert_eq!(quota.uncommitted(&a), 0);
        // A batch that commits is not drained later.
        assert_eq!(quota.admit(a, d(4)), Admission::Store);
        quota.committed(&[d(4)], 41);
        assert!(quota.cleanup(60, none).is_empty());
    }

    /// A member whose batches never commit could make this node check as many of them as its
    /// batch quota lets it store, again every `keep_rounds` rounds. Now what this node checks
    /// of a member's uncommitted batches is bounded in bytes, and frees as they commit or drain.
    #[test]
    fn byzantine_attesting_work_per_author_is_bounded_until_its_batches_commit_or_drain() {
        let quota = AuthorQuota::new(100, 10).attesting(250);
        let (a, b) = (KeyPair::from_seed(1).name, KeyPair::from_seed(2).name);
        let d = |i: u8| Digest::of(&[i]);
        for i in 1..=4 {
            assert_eq!(quota.admit(a, d(i)), Admission::Store);
        }
        assert!(quota.charge_attesting(a, d(1), 100));
        assert!(!quota.charge_attesting(a, d(1), 100), "checked once");
        assert!(quota.charge_attesting(a, d(2), 100));
        assert!(!quota.charge_attesting(a, d(3), 100), "over its bytes");
        assert_eq!(quota.attesting_bytes(&a), 200);
        // Another member's share is its own; a batch stored for another member is not a's.
        assert_eq!(quota.admit(b, d(9)), Admission::Store);
        assert!(!quota.charge_attesting(a, d(9), 10));
        assert!(quota.charge_attesting(b, d(9), 200));
        // A commit frees its bytes...
        quota.committed(&[d(1)], 1);
        assert!(quota.charge_attesting(a, d(3), 100));
        // ...and so does the drain of batches that never commit.
        assert!(!quota.charge_attesting(a, d(4), 100));
        quota.cleanup(20, |_| false);
        assert_eq!(quota.attesting_bytes(&a), 0);
        assert_eq!(quota.admit(a, d(5)), Admission::Store);
        assert!(quota.charge_attesting(a, d(5), 250));
    }
}
