//! The core's side of state sync: when to ask peers for a checkpoint, and when enough of them
//! agree on one to adopt it (see `checkpoint.rs` for why f+1 matching reports suffice).
//!
//! Members checkpoint the same blocks but not at the same moment, so one request may get
//! different answers (one member is a checkpoint ahead of another). Reports are therefore kept
//! across requests, a few per member, and a checkpoint is adopted as soon as any one of them
//! has f+1 stake behind it.

use super::checkpoint::CheckpointReply;
use crate::config::{Committee, Round, Stake};
use bytes::Bytes;
use crypto::{Digest, PublicKey};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// Checkpoints remembered per member; older ones of the same member are forgotten first. A
/// Byzantine member can thus occupy at most this many entries.
const REPORTS_PER_MEMBER: usize = 3;

/// A checkpoint enough members agree on.
pub struct Adopted {
    pub block: super::messages::Block,
    pub state: Bytes,
    pub digest: Digest,
}

struct Report {
    reply: CheckpointReply,
    state_digest: Digest,
    members: BTreeSet<PublicKey>,
}

pub struct StateSync {
    committee: Committee,
    /// How long to wait before asking again.
    retry: Duration,
    last_request: Option<Instant>,
    /// (block digest, state digest) -> the first reply with it and who reported it.
    reports: HashMap<(Digest, Digest), Report>,
    /// Per member, the keys it reported, oldest first.
    by_member: HashMap<PublicKey, Vec<(Digest, Digest)>>,
}

impl StateSync {
    pub fn new(committee: Committee, retry: Duration) -> Self {
        StateSync {
            committee,
            retry,
            last_request: None,
            reports: HashMap::new(),
            by_member: HashMap::new(),
        }
    }

    /// Whether a request may go out now (at most one per `retry`); if so, it counts as sent.
    pub fn should_request(&mut self) -> bool {
        let now = Instant::now();
        if self
            .last_request
            .is_some_and(|at| now.duration_since(at) < self.retry)
        {
            return false;
        }
        self.last_request = Some(now);
        true
    }

    /// Counts `reply` (whose author the network layer authenticated); returns a checkpoint past
    /// `committed_round` once members with f+1 stake reported it.
    pub fn add(&mut self, reply: CheckpointReply, committed_round: Round) -> Option<Adopted> {
        let author = reply.author;
        if self.committee.stake(&author) == 0 || reply.block.round <= committed_round {
            return None;
        }
        let key = reply.key();
        let keys = self.by_member.entry(author).or_default();
        if !keys.contains(&key) {
            keys.push(key);
            if keys.len() > REPORTS_PER_MEMBER {
                let forgotten = keys.remove(0);
                self.forget(&author, forgotten);
            }
        }
        let report = self.reports.entry(key).or_insert_with(|| Report {
            state_digest: key.1,
            reply,
            members: BTreeSet::new(),
        });
        report.members.insert(author);
        let stake: Stake = report
            .members
            .iter()
            .map(|member| self.committee.stake(member))
            .sum();
        if stake < self.committee.validity_threshold() {
            return None;
        }
        let report = self.reports.remove(&key)?;
        // Everything else is older than what we adopt, or lost to it.
        self.reports.clear();
        self.by_member.clear();
        self.last_request = None;
        Some(Adopted {
            block: report.reply.block,
            state: report.reply.state,
            digest: report.state_digest,
        })
    }

    fn forget(&mut self, member: &PublicKey, key: (Digest, Digest)) {
        if let Some(report) = self.reports.get_mut(&key) {
            report.members.remove(member);
            if report.members.is_empty() {
                self.reports.remove(&key);
            }
        }
    }

    /// Reports held (for tests: bounded whatever members send).
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.reports.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotstuff::messages::tests::{committee, keys, signed_block};
    use crate::hotstuff::messages::QC;
    use crypto::{Hash, KeyPair};

    fn reply(author: &KeyPair, leader: &KeyPair, round: Round, state: &[u8]) -> CheckpointReply {
        CheckpointReply {
            author: author.name,
            block: signed_block(QC::genesis(), None, round, vec![], leader),
            state: Bytes::copy_from_slice(state),
        }
    }

    #[test]
    fn f_plus_one_matching_reports_are_adopted_and_f_are_not() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        let leader = &keys[0];
        assert!(sync.add(reply(&keys[1], leader, 7, b"s"), 0).is_none());
        // The same member again does not count twice.
        assert!(sync.add(reply(&keys[1], leader, 7, b"s"), 0).is_none());
        // Another member reporting another state for the same block does not help it.
        assert!(sync.add(reply(&keys[2], leader, 7, b"forged"), 0).is_none());
        let adopted = sync
            .add(reply(&keys[3], leader, 7, b"s"), 0)
            .expect("two of four (f + 1) agree");
        assert_eq!(adopted.state.as_ref(), b"s");
        assert_eq!(adopted.digest, Digest::of(b"s"));
        assert_eq!(adopted.block.round, 7);
        assert_eq!(
            adopted.block.digest(),
            reply(&keys[3], leader, 7, b"s").block.digest()
        );
    }

    #[test]
    fn reports_at_or_below_the_committed_round_and_from_strangers_are_ignored() {
        let keys = keys(4);
        let stranger = KeyPair::from_seed(99);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        assert!(sync.add(reply(&keys[1], &keys[0], 7, b"s"), 7).is_none());
        assert!(sync.add(reply(&keys[2], &keys[0], 7, b"s"), 7).is_none());
        assert_eq!(sync.held(), 0);
        assert!(sync.add(reply(&stranger, &keys[0], 9, b"s"), 0).is_none());
        assert!(sync.add(reply(&keys[1], &keys[0], 9, b"s"), 0).is_none());
        assert_eq!(sync.held(), 1);
    }

    #[test]
    fn reports_of_members_a_checkpoint_apart_meet_once_the_slower_catches_up() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        assert!(sync.add(reply(&keys[1], &keys[0], 10, b"a"), 0).is_none());
        assert!(sync.add(reply(&keys[2], &keys[0], 20, b"b"), 0).is_none());
        let adopted = sync
            .add(reply(&keys[1], &keys[0], 20, b"b"), 0)
            .expect("members 1 and 2 agree on round 20");
        assert_eq!(adopted.block.round, 20);
        assert_eq!(sync.held(), 0);
    }

    #[test]
    fn byzantine_member_cannot_fill_the_table() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        for round in 1..1_000 {
            let _ = sync.add(reply(&keys[3], &keys[0], round, b"junk"), 0);
        }
        assert_eq!(sync.held(), REPORTS_PER_MEMBER);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_are_spaced_by_the_retry_delay() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        assert!(sync.should_request());
        assert!(!sync.should_request());
        tokio::time::advance(Duration::from_millis(1_001)).await;
        assert!(sync.should_request());
    }
}
