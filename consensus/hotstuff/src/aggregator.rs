//! Collects votes into QCs and timeouts into TCs. Messages must be verified before they get here;
//! the aggregator only counts distinct committee stake.

use crate::messages::{Timeout, Vote, QC, TC};
use config::{Committee, Round, Stake};
use crypto::{Digest, PublicKey, Signature};
use std::collections::{BTreeMap, HashMap, HashSet};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AggregatorError {
    #[error("{0} already voted in this round")]
    AuthorityReuse(PublicKey),
}

#[derive(Default)]
struct QCMaker {
    weight: Stake,
    votes: Vec<(PublicKey, Signature)>,
    used: HashSet<PublicKey>,
    done: bool,
}

#[derive(Default)]
struct TCMaker {
    weight: Stake,
    /// The highest QC among the timeouts so far; the TC carries it (see `TC::high_qc`).
    high_qc: QC,
    votes: Vec<(PublicKey, Signature, Round)>,
    used: HashSet<PublicKey>,
    done: bool,
}

pub struct Aggregator {
    committee: Committee,
    /// Per round, per block digest: an authority votes once per round, across all blocks.
    votes: BTreeMap<Round, (HashSet<PublicKey>, HashMap<Digest, QCMaker>)>,
    timeouts: BTreeMap<Round, TCMaker>,
}

impl Aggregator {
    pub fn new(committee: Committee) -> Self {
        Aggregator {
            committee,
            votes: BTreeMap::new(),
            timeouts: BTreeMap::new(),
        }
    }

    /// Whether `author` already voted in `round`. Checked before a vote's signature, so a replay
    /// costs a map lookup; only a verified vote is recorded (see `add_vote`), so a forgery in
    /// someone's name cannot use up their vote.
    pub fn has_voted(&self, round: Round, author: &PublicKey) -> bool {
        self.votes
            .get(&round)
            .is_some_and(|(voters, _)| voters.contains(author))
    }

    /// Whether the votes for `hash` in `round` already made their QC: a later one adds nothing,
    /// so it is dropped before its signature is checked (the leader gets every member's vote
    /// and needs 2f+1 of them).
    pub fn certified(&self, round: Round, hash: &Digest) -> bool {
        self.votes
            .get(&round)
            .and_then(|(_, makers)| makers.get(hash))
            .is_some_and(|maker| maker.done)
    }

    /// Like `has_voted`, for timeouts.
    pub fn has_timed_out(&self, round: Round, author: &PublicKey) -> bool {
        self.timeouts
            .get(&round)
            .is_some_and(|maker| maker.used.contains(author))
    }

    /// Returns the QC the first time a quorum of stake voted for the same block.
    pub fn add_vote(&mut self, vote: Vote) -> Result<Option<QC>, AggregatorError> {
        let (voters, makers) = self.votes.entry(vote.round).or_default();
        if !voters.insert(vote.author) {
            return Err(AggregatorError::AuthorityReuse(vote.author));
        }
        let maker = makers.entry(vote.hash).or_default();
        maker.used.insert(vote.author);
        maker.votes.push((vote.author, vote.signature));
        maker.weight += self.committee.stake(&vote.author);
        if !maker.done && maker.weight >= self.committee.quorum_threshold() {
            maker.done = true;
            return Ok(Some(QC {
                hash: vote.hash,
                round: vote.round,
                votes: maker.votes.clone(),
            }));
        }
        Ok(None)
    }

    /// Returns the TC the first time a quorum of stake timed out of the same round.
    pub fn add_timeout(&mut self, timeout: Timeout) -> Result<Option<TC>, AggregatorError> {
        let maker = self.timeouts.entry(timeout.round).or_default();
        if !maker.used.insert(timeout.author) {
            return Err(AggregatorError::AuthorityReuse(timeout.author));
        }
        maker
            .votes
            .push((timeout.author, timeout.signature, timeout.high_qc.round));
        if timeout.high_qc.round > maker.high_qc.round {
            maker.high_qc = timeout.high_qc;
        }
        maker.weight += self.committee.stake(&timeout.author);
        if !maker.done && maker.weight >= self.committee.quorum_threshold() {
            maker.done = true;
            return Ok(Some(TC {
                round: timeout.round,
                high_qc: maker.high_qc.clone(),
                votes: maker.votes.clone(),
            }));
        }
        Ok(None)
    }

    /// How many rounds hold pending votes or timeouts.
    #[cfg(test)]
    pub fn rounds(&self) -> usize {
        self.votes.len() + self.timeouts.len()
    }

    /// Forgets everything below `round`: nothing there can matter once the node moved past it.
    pub fn cleanup(&mut self, round: Round) {
        self.votes = self.votes.split_off(&round);
        self.timeouts = self.timeouts.split_off(&round);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys, timeout, vote};

    #[test]
    fn qc_forms_at_quorum_once() {
        let keys = keys(4);
        let mut aggregator = Aggregator::new(committee(&keys));
        let hash = Digest::of(b"b");
        assert_eq!(aggregator.add_vote(vote(hash, 1, &keys[0])), Ok(None));
        assert_eq!(aggregator.add_vote(vote(hash, 1, &keys[1])), Ok(None));
        let qc = aggregator
            .add_vote(vote(hash, 1, &keys[2]))
            .expect("accepted")
            .expect("quorum");
        assert_eq!(qc.votes.len(), 3);
        assert_eq!(qc.verify(&committee(&keys)), Ok(()));
        // A fourth vote does not produce a second QC.
        assert_eq!(aggregator.add_vote(vote(hash, 1, &keys[3])), Ok(None));
    }

    #[test]
    fn duplicate_voter_is_rejected_even_for_another_block() {
        let keys = keys(4);
        let mut aggregator = Aggregator::new(committee(&keys));
        aggregator
            .add_vote(vote(Digest::of(b"a"), 1, &keys[0]))
            .expect("first");
        assert_eq!(
            aggregator.add_vote(vote(Digest::of(b"a"), 1, &keys[0])),
            Err(AggregatorError::AuthorityReuse(keys[0].name))
        );
        assert_eq!(
            aggregator.add_vote(vote(Digest::of(b"b"), 1, &keys[0])),
            Err(AggregatorError::AuthorityReuse(keys[0].name))
        );
    }

    #[test]
    fn split_votes_make_no_qc() {
        let keys = keys(4);
        let mut aggregator = Aggregator::new(committee(&keys));
        for (i, k) in keys.iter().enumerate() {
            let hash = Digest::of(if i % 2 == 0 { b"a" } else { b"b" });
            assert_eq!(aggregator.add_vote(vote(hash, 1, k)), Ok(None));
        }
    }

    #[test]
    fn tc_forms_at_quorum_and_cleanup_forgets() {
        let keys = keys(4);
        let mut aggregator = Aggregator::new(committee(&keys));
        let qc = crate::messages::QC::genesis();
        assert_eq!(
            aggregator.add_timeout(timeout(2, qc.clone(), &keys[0])),
            Ok(None)
        );
        assert!(aggregator
            .add_timeout(timeout(2, qc.clone(), &keys[0]))
            .is_err());
        assert_eq!(
            aggregator.add_timeout(timeout(2, qc.clone(), &keys[1])),
            Ok(None)
        );
        let tc = aggregator
            .add_timeout(timeout(2, qc.clone(), &keys[2]))
            .expect("accepted")
            .expect("quorum");
        assert_eq!(tc.round, 2);
        assert_eq!(tc.verify(&committee(&keys)), Ok(()));
        aggregator.cleanup(3);
        assert!(aggregator.timeouts.is_empty());
    }

    #[test]
    fn tc_carries_the_highest_qc_of_its_timeouts() {
        use crate::messages::tests::qc;
        let keys = keys(4);
        let mut aggregator = Aggregator::new(committee(&keys));
        let low = qc(Digest::of(b"low"), 2, &keys[..3]);
        let high = qc(Digest::of(b"high"), 4, &keys[..3]);
        for (k, q) in keys.iter().zip([low.clone(), high.clone(), low]) {
            if let Some(tc) = aggregator.add_timeout(timeout(5, q, k)).expect("accepted") {
                assert_eq!(tc.high_qc, high);
                assert_eq!(tc.verify(&committee(&keys)), Ok(()));
                return;
            }
        }
        panic!("no TC formed");
    }
}
