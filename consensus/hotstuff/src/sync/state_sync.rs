//! The core's side of state sync: when to ask peers for a checkpoint, which replies to look at,
//! and when enough of them agree on one to adopt it (see the `checkpoint` crate for why f+1 matching
//! reports suffice).
//!
//! Members checkpoint the same blocks but not at the same moment, so one request may get
//! different answers (one member is a checkpoint ahead of another). Reports are therefore kept
//! across requests, a few per member, and a checkpoint is adopted as soon as any one of them
//! has f+1 stake behind it.
//!
//! A reply is looked at only while a request of ours is outstanding, and one per member per
//! request: a member cannot push reports we did not ask for, and each reply costs a proof check
//! and the hashing of a state of up to megabytes, so what replies cost is bounded by members
//! times requests, one request per `retry` at most.

use crate::wire::CheckpointReply;
use bytes::Bytes;
use config::{Committee, Stake};
use crypto::{Digest, Hash, PublicKey};
use plumbing::clock::Instant;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

/// Checkpoints remembered per member; older ones of the same member are forgotten first. A
/// Byzantine member can thus occupy at most this many entries.
const REPORTS_PER_MEMBER: usize = 3;

/// A checkpoint enough members agree on.
pub struct Agreed {
    pub block: crate::messages::Block,
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
    /// Whether a request went out that no adoption answered yet, and who replied to the latest.
    outstanding: bool,
    answered: HashSet<PublicKey>,
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
            outstanding: false,
            answered: HashSet::new(),
            reports: HashMap::new(),
            by_member: HashMap::new(),
        }
    }

    /// Whether a request may go out now (at most one per `retry`); if so, it counts as sent, and
    /// every member may answer it once.
    pub fn should_request(&mut self) -> bool {
        let now = Instant::now();
        if self
            .last_request
            .is_some_and(|at| now.duration_since(at) < self.retry)
        {
            return false;
        }
        self.last_request = Some(now);
        self.outstanding = true;
        self.answered.clear();
        true
    }

    /// Ends the outstanding request, if any, unanswered: the node caught up by replaying the
    /// chain. Reports already counted are kept (a later request may complete one).
    pub fn caught_up(&mut self) {
        self.outstanding = false;
    }

    /// Whether a reply from `author` is to be looked at: a member's first to the outstanding
    /// request. Called before anything costly; an admitted reply uses up the member's turn
    /// whether or not it then checks out.
    pub fn admit(&mut self, author: &PublicKey) -> bool {
        self.outstanding && self.committee.stake(author) > 0 && self.answered.insert(*author)
    }

    /// Counts `reply`, which `admit` let in and whose block is proven committed past our last
    /// commit; returns its checkpoint once members with f+1 stake reported it. Hashes the state.
    pub fn add(&mut self, reply: CheckpointReply) -> Option<Agreed> {
        let author = reply.author;
        let key = (reply.block.digest(), Digest::of(&reply.state));
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
        self.outstanding = false;
        Some(Agreed {
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
    use crate::messages::commit_proof::CommitProof;
    use crate::messages::tests::{committee, keys, signed_block};
    use crate::messages::QC;
    use config::Round;
    use crypto::{Hash, KeyPair};

    /// A report (the proof is not looked at here: the core checks it before `add`).
    fn reply(author: &KeyPair, leader: &KeyPair, round: Round, state: &[u8]) -> CheckpointReply {
        CheckpointReply {
            author: author.name,
            block: signed_block(QC::genesis(), None, round, vec![], leader),
            proof: CommitProof {
                descendants: Vec::new(),
                qc: QC::genesis(),
            },
            state: Bytes::copy_from_slice(state),
        }
    }

    /// Admits and adds, as the core does.
    fn offer(sync: &mut StateSync, reply: CheckpointReply) -> Option<Option<Agreed>> {
        sync.admit(&reply.author).then(|| sync.add(reply))
    }

    #[test]
    fn f_plus_one_matching_reports_are_adopted_and_f_are_not() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        let leader = &keys[0];
        assert!(sync.should_request());
        assert!(offer(&mut sync, reply(&keys[1], leader, 7, b"s"))
            .expect("admitted")
            .is_none());
        // The same member again is not even looked at.
        assert!(offer(&mut sync, reply(&keys[1], leader, 7, b"s")).is_none());
        // Another member reporting another state for the same block does not help it.
        assert!(offer(&mut sync, reply(&keys[2], leader, 7, b"forged"))
            .expect("admitted")
            .is_none());
        let adopted = offer(&mut sync, reply(&keys[3], leader, 7, b"s"))
            .expect("admitted")
            .expect("two of four (f + 1) agree");
        assert_eq!(adopted.state.as_ref(), b"s");
        assert_eq!(adopted.digest, Digest::of(b"s"));
        assert_eq!(adopted.block.round, 7);
        assert_eq!(
            adopted.block.digest(),
            reply(&keys[3], leader, 7, b"s").block.digest()
        );
    }

    /// Replies nobody asked for are not looked at (not hashed, not counted), however many
    /// members push them; nor are strangers'. Once adopted, the request is answered.
    #[test]
    fn byzantine_checkpoint_replies_without_a_request_are_not_looked_at() {
        let keys = keys(4);
        let stranger = KeyPair::from_seed(99);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        for member in &keys[1..] {
            assert!(offer(&mut sync, reply(member, &keys[0], 9, b"pushed")).is_none());
        }
        assert_eq!(sync.held(), 0);
        assert!(sync.should_request());
        assert!(offer(&mut sync, reply(&stranger, &keys[0], 9, b"s")).is_none());
        assert!(offer(&mut sync, reply(&keys[1], &keys[0], 9, b"s")).is_some());
        let adopted = offer(&mut sync, reply(&keys[2], &keys[0], 9, b"s")).expect("admitted");
        assert!(adopted.is_some());
        assert!(offer(&mut sync, reply(&keys[3], &keys[0], 9, b"s")).is_none());
    }

    /// A request the node no longer needs (it caught up by replay) admits nothing: a member
    /// cannot keep pushing reports into a request of long ago.
    #[test]
    fn byzantine_replies_after_the_node_caught_up_are_not_looked_at() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        assert!(sync.should_request());
        sync.caught_up();
        for member in &keys[1..] {
            assert!(offer(&mut sync, reply(member, &keys[0], 9, b"pushed")).is_none());
        }
        assert_eq!(sync.held(), 0);
    }

    /// One reply per member per request: a member flooding replies costs one proof check and
    /// one hash per request, and requests go out once per retry delay at most.
    #[tokio::test(start_paused = true)]
    async fn byzantine_a_flood_of_replies_is_looked_at_once_per_request() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        assert!(sync.should_request());
        let looked_at = (0..1_000).filter(|_| sync.admit(&keys[3].name)).count();
        assert_eq!(looked_at, 1);
        assert!(!sync.should_request());
        tokio::time::advance(Duration::from_millis(1_001)).await;
        assert!(sync.should_request());
        assert!(sync.admit(&keys[3].name));
        assert!(!sync.admit(&keys[3].name));
    }

    #[tokio::test(start_paused = true)]
    async fn reports_of_members_a_checkpoint_apart_meet_once_the_slower_catches_up() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        assert!(sync.should_request());
        assert!(offer(&mut sync, reply(&keys[1], &keys[0], 10, b"a"))
            .expect("admitted")
            .is_none());
        assert!(offer(&mut sync, reply(&keys[2], &keys[0], 20, b"b"))
            .expect("admitted")
            .is_none());
        // Member 1 answers the next request from its next checkpoint.
        tokio::time::advance(Duration::from_millis(1_001)).await;
        assert!(sync.should_request());
        let adopted = offer(&mut sync, reply(&keys[1], &keys[0], 20, b"b"))
            .expect("admitted")
            .expect("members 1 and 2 agree on round 20");
        assert_eq!(adopted.block.round, 20);
        assert_eq!(sync.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn byzantine_member_cannot_fill_the_table() {
        let keys = keys(4);
        let mut sync = StateSync::new(committee(&keys), Duration::from_secs(1));
        for round in 1..1_000 {
            tokio::time::advance(Duration::from_millis(1_001)).await;
            assert!(sync.should_request());
            let _ = offer(&mut sync, reply(&keys[3], &keys[0], round, b"junk"));
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
