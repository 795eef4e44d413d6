//! A node whose store holds no vote record (a new `--store` path, or none) asks the other members
//! what bounds the rounds its key may have signed in before, and signs nothing until it knows.
//!
//! Each member answers (`witness.rs`) with the highest-round act of the requester it holds the
//! signature of (a vote or a timeout, alone or inside a certificate), and with its own highest QC
//! and TC. Every round in an answer is proven: by the requester's own signature, or by a
//! certificate's quorum. So a member cannot lie high: the most it can show is a round the
//! requester really signed in, or one after a certificate that really formed. It can lie low
//! (show less than it holds, or nothing): the floor is the highest round over all answers, so a
//! low answer takes nothing away from what another member showed.
//!
//! The floor. The requester signs nothing at or below it:
//! - the highest round a member shows the requester's signature of;
//! - one above the highest certificate a member shows. A member acts in round r only once it
//!   holds a certificate of round r - 1 (the pacemaker enters r on a QC or TC of r - 1, round 1
//!   follows genesis), so every round the requester signed in before is at most one above a
//!   certificate that existed then. Skipping to the round after the committee's highest
//!   certificate costs it the round in progress.
//!
//! A committee in which no certificate formed yet and no member shows a signature of the
//! requester is a fresh one: the floor is 0 and every member starts in round 1 as always.
//!
//! Whom it waits for: members whose stake, with its own, makes a quorum (2f + 1 of 3f + 1), the
//! most it can count on with f members silent; then up to `grace` for the others, so that in a
//! timely network every honest member's answer counts. Why a quorum rather than f + 1: f + 1
//! answers may hold one honest member; 2f + 1 with its own hold at least f honest others out of
//! the 2f, so anything that reached f + 1 honest others (a timeout or a certificate on its way to
//! all) is in at least one answer. What no wait can show: an act of the requester that only
//! Byzantine members received, in a round above every certificate the honest members hold (its
//! vote, sent to a Byzantine next leader, in a round whose QC a Byzantine leader showed it
//! alone).
//!
//! A member shows the requester's signature: the key signed before. Unless the operator accepts
//! the risk (`MissingRecord::RiskEquivocation`), the node stops: its record is lost, and what
//! the peers hold may not be all it signed.

use crate::messages::record::RecordReply;
use crate::messages::{MessageError, QC, TC};
use config::{Committee, Round, Stake};
use crypto::PublicKey;
use plumbing::clock::Instant;
use std::collections::HashSet;
use std::time::Duration;
use thiserror::Error;

/// What a node whose store holds no vote record does when a member shows that its key signed
/// before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MissingRecord {
    /// Stop with an error: restore the store, or accept the risk.
    #[default]
    Refuse,
    /// Go on, signing only above the floor the members' answers set: the operator accepts that
    /// an act only Byzantine members saw may be repeated.
    RiskEquivocation,
}

/// What to do after the answers so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Not enough answers yet (or the others may still answer within the grace).
    Wait,
    /// `peer` holds our signature of `round`: the key signed before, and the operator did not
    /// accept the risk.
    Refuse { round: Round, peer: PublicKey },
    /// Sign only above `floor`. `signed`: the highest round a member shows our signature of.
    Start { floor: Round, signed: Option<Round> },
}

#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum ReplyError {
    #[error("{0} is not another member")]
    NotAPeer(PublicKey),
    #[error("{0} answered already")]
    Again(PublicKey),
    #[error("the act it shows is not ours: {0}")]
    Act(MessageError),
    #[error("its certificate does not verify: {0}")]
    Certificate(MessageError),
}

pub(crate) struct Recall {
    name: PublicKey,
    committee: Committee,
    policy: MissingRecord,
    /// How long, once a quorum answered, the others may still answer.
    grace: Duration,
    answered: HashSet<PublicKey>,
    /// The stake of those that answered, and ours.
    stake: Stake,
    /// The highest round a member showed our signature of, and who.
    signed: Option<(Round, PublicKey)>,
    high_qc: QC,
    high_tc: Option<TC>,
    /// When the answers reached a quorum with our stake.
    quorum_at: Option<Instant>,
}

impl Recall {
    pub(crate) fn new(
        name: PublicKey,
        committee: Committee,
        policy: MissingRecord,
        grace: Duration,
        now: Instant,
    ) -> Self {
        let stake = committee.stake(&name);
        let quorum_at = (stake >= committee.quorum_threshold()).then_some(now);
        Recall {
            name,
            committee,
            policy,
            grace,
            answered: HashSet::new(),
            stake,
            signed: None,
            high_qc: QC::genesis(),
            high_tc: None,
            quorum_at,
        }
    }

    /// Takes `reply`, once per member, if all it shows verifies; cheap checks first.
    pub(crate) fn accept(&mut self, reply: &RecordReply, now: Instant) -> Result<(), ReplyError> {
        let author = reply.author;
        if author == self.name || self.committee.stake(&author) == 0 {
            return Err(ReplyError::NotAPeer(author));
        }
        if self.answered.contains(&author) {
            return Err(ReplyError::Again(author));
        }
        if let Some(act) = &reply.act {
            act.verify(&self.name).map_err(ReplyError::Act)?;
        }
        reply
            .high_qc
            .verify(&self.committee)
            .map_err(ReplyError::Certificate)?;
        if let Some(tc) = &reply.high_tc {
            tc.verify(&self.committee)
                .map_err(ReplyError::Certificate)?;
        }
        self.answered.insert(author);
        self.stake += self.committee.stake(&author);
        if self.quorum_at.is_none() && self.stake >= self.committee.quorum_threshold() {
            self.quorum_at = Some(now);
        }
        if let Some(round) = reply.act.as_ref().map(|act| act.round()) {
            if self.signed.is_none_or(|(highest, _)| round > highest) {
                self.signed = Some((round, author));
            }
        }
        if reply.high_qc.round > self.high_qc.round {
            self.high_qc = reply.high_qc.clone();
        }
        if let Some(tc) = &reply.high_tc {
            if self
                .high_tc
                .as_ref()
                .is_none_or(|high| tc.round > high.round)
            {
                self.high_tc = Some(tc.clone());
            }
        }
        Ok(())
    }

    pub(crate) fn decide(&self, now: Instant) -> Decision {
        if let (Some((round, peer)), MissingRecord::Refuse) = (self.signed, self.policy) {
            return Decision::Refuse { round, peer };
        }
        let Some(quorum_at) = self.quorum_at else {
            return Decision::Wait;
        };
        if !self.missing().is_empty() && now < quorum_at + self.grace {
            return Decision::Wait;
        }
        Decision::Start {
            floor: self.floor(),
            signed: self.signed.map(|(round, _)| round),
        }
    }

    /// The round at or below which we must not sign (see the module's doc).
    pub(crate) fn floor(&self) -> Round {
        let certified = self.certified();
        match self.signed {
            None if certified == 0 => 0,
            signed => signed.map_or(0, |(round, _)| round).max(certified + 1),
        }
    }

    /// The highest round a member showed a certificate of.
    pub(crate) fn certified(&self) -> Round {
        let tc = self.high_tc.as_ref().map_or(0, |tc| tc.round);
        self.high_qc.round.max(tc)
    }

    /// The highest QC and TC the members showed (verified).
    pub(crate) fn certificates(&self) -> (QC, Option<TC>) {
        (self.high_qc.clone(), self.high_tc.clone())
    }

    /// The other members that have not answered.
    pub(crate) fn missing(&self) -> Vec<PublicKey> {
        self.committee
            .authorities
            .keys()
            .filter(|name| **name != self.name && !self.answered.contains(name))
            .copied()
            .collect()
    }

    /// The stake that answered, ours included, and the quorum it must reach.
    pub(crate) fn stake(&self) -> (Stake, Stake) {
        (self.stake, self.committee.quorum_threshold())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::record::Act;
    use crate::messages::tests::{committee, keys, qc, tc, timeout, vote};
    use crypto::{Digest, KeyPair};

    const GRACE: Duration = Duration::from_secs(1);

    /// Member `keys[0]` without its record, in a committee of `keys`.
    fn recall(keys: &[KeyPair], policy: MissingRecord, now: Instant) -> Recall {
        Recall::new(keys[0].name, committee(keys), policy, GRACE, now)
    }

    fn reply(author: &KeyPair, act: Option<Act>, high_qc: QC, high_tc: Option<TC>) -> RecordReply {
        RecordReply {
            author: author.name,
            act,
            high_qc,
            high_tc,
        }
    }

    /// An answer that shows nothing: genesis, no signature of ours (a fresh committee, or a
    /// member lying low).
    fn nothing(author: &KeyPair) -> RecordReply {
        reply(author, None, QC::genesis(), None)
    }

    /// `signer`'s vote of `round`, as a member holds it.
    fn voted(round: Round, signer: &KeyPair) -> Act {
        let vote = vote(Digest::of(&round.to_le_bytes()), round, signer);
        Act::Vote {
            hash: vote.hash,
            round,
            signature: vote.signature,
        }
    }

    /// A QC of `round` signed by a quorum of `keys`.
    fn certified(round: Round, keys: &[KeyPair]) -> QC {
        let quorum = 2 * keys.len() / 3 + 1;
        qc(Digest::of(&round.to_le_bytes()), round, &keys[..quorum])
    }

    #[test]
    fn a_fresh_committee_starts_at_genesis_once_a_quorum_and_then_everyone_answered() {
        let keys = keys(4);
        let t0 = Instant::now();
        let mut recall = recall(&keys, MissingRecord::Refuse, t0);
        assert_eq!(recall.decide(t0), Decision::Wait);
        recall.accept(&nothing(&keys[1]), t0).expect("valid");
        // Ours and one: 2 of the 3 a quorum needs.
        assert_eq!(recall.decide(t0), Decision::Wait);
        recall.accept(&nothing(&keys[2]), t0).expect("valid");
        // A quorum; the last member may still answer within the grace.
        assert_eq!(recall.decide(t0 + GRACE / 2), Decision::Wait);
        assert_eq!(recall.missing(), vec![keys[3].name]);
        let start = Decision::Start {
            floor: 0,
            signed: None,
        };
        assert_eq!(recall.decide(t0 + GRACE), start);
        // Or at once when everyone answered.
        recall.accept(&nothing(&keys[3]), t0).expect("valid");
        assert_eq!(recall.decide(t0), start);
    }

    #[test]
    fn a_member_showing_our_signature_stops_a_node_that_did_not_accept_the_risk() {
        let keys = keys(4);
        let t0 = Instant::now();
        let mut recall = recall(&keys, MissingRecord::Refuse, t0);
        let shown = reply(
            &keys[2],
            Some(voted(7, &keys[0])),
            certified(6, &keys),
            None,
        );
        recall.accept(&shown, t0).expect("our own vote");
        // No need to wait for a quorum: the signature is proof enough.
        assert_eq!(
            recall.decide(t0),
            Decision::Refuse {
                round: 7,
                peer: keys[2].name
            }
        );
        // A timeout of ours is proof too.
        let mut recall = self::recall(&keys, MissingRecord::Refuse, t0);
        let t = timeout(4, QC::genesis(), &keys[0]);
        let act = Act::Timeout {
            round: 4,
            high_qc_round: 0,
            signature: t.signature,
        };
        recall
            .accept(&reply(&keys[1], Some(act), QC::genesis(), None), t0)
            .expect("our own timeout");
        assert!(matches!(
            recall.decide(t0),
            Decision::Refuse { round: 4, .. }
        ));
    }

    #[test]
    fn with_the_risk_accepted_the_floor_is_the_highest_round_any_member_shows() {
        let keys = keys(4);
        let t0 = Instant::now();
        for byzantine_first in [true, false] {
            let mut recall = recall(&keys, MissingRecord::RiskEquivocation, t0);
            // Member 3 lies low: it shows nothing. Member 1 shows our vote of round 7.
            let honest = reply(
                &keys[1],
                Some(voted(7, &keys[0])),
                certified(5, &keys),
                None,
            );
            let liar = nothing(&keys[3]);
            let order = if byzantine_first {
                [&liar, &honest]
            } else {
                [&honest, &liar]
            };
            for answer in order {
                recall.accept(answer, t0).expect("valid");
            }
            assert_eq!(
                recall.decide(t0 + GRACE),
                Decision::Start {
                    floor: 7,
                    signed: Some(7)
                }
            );
        }
    }

    #[test]
    fn lying_low_alone_cannot_lower_the_floor_in_a_larger_committee() {
        // f = 2 of 7: the two liars answer first, with less than they hold.
        let keys = keys(7);
        let t0 = Instant::now();
        let mut recall = recall(&keys, MissingRecord::RiskEquivocation, t0);
        recall.accept(&nothing(&keys[5]), t0).expect("valid");
        let old = reply(
            &keys[6],
            Some(voted(2, &keys[0])),
            certified(1, &keys),
            None,
        );
        recall.accept(&old, t0).expect("valid");
        let low = certified(3, &keys);
        recall
            .accept(&reply(&keys[1], None, low.clone(), None), t0)
            .expect("valid");
        let high = reply(&keys[2], Some(voted(9, &keys[0])), low, None);
        recall.accept(&high, t0).expect("valid");
        // Ours and four: a quorum of 5.
        assert_eq!(
            recall.decide(t0 + GRACE).clone(),
            Decision::Start {
                floor: 9,
                signed: Some(9)
            }
        );
    }

    #[test]
    fn the_floor_is_one_above_the_highest_certificate_shown() {
        let keys = keys(4);
        let t0 = Instant::now();
        let mut recall = recall(&keys, MissingRecord::Refuse, t0);
        let high_qc = certified(10, &keys);
        let tc = tc(12, &high_qc, &keys[1..]);
        recall
            .accept(&reply(&keys[1], None, high_qc.clone(), Some(tc)), t0)
            .expect("valid");
        recall
            .accept(&reply(&keys[2], None, certified(11, &keys), None), t0)
            .expect("valid");
        // Nobody shows our signature: no refusal, but nothing at or below round 13.
        assert_eq!(
            recall.decide(t0 + GRACE),
            Decision::Start {
                floor: 13,
                signed: None
            }
        );
        let (qc, tc) = recall.certificates();
        assert_eq!((qc.round, tc.map(|tc| tc.round)), (11, Some(12)));
    }

    #[test]
    fn a_lie_high_does_not_verify_and_does_not_count() {
        let keys = keys(4);
        let t0 = Instant::now();
        let mut recall = recall(&keys, MissingRecord::RiskEquivocation, t0);
        // A vote of another member's key, passed off as ours.
        let not_ours = reply(&keys[1], Some(voted(100, &keys[1])), QC::genesis(), None);
        assert!(matches!(
            recall.accept(&not_ours, t0),
            Err(ReplyError::Act(_))
        ));
        // Our real vote of round 2, with its round raised.
        let Act::Vote {
            hash, signature, ..
        } = voted(2, &keys[0])
        else {
            unreachable!()
        };
        let raised = Act::Vote {
            hash,
            round: 100,
            signature,
        };
        assert!(recall
            .accept(&reply(&keys[1], Some(raised), QC::genesis(), None), t0)
            .is_err());
        // A QC of round 100 with two signers, and one with a forged signature.
        let short = qc(Digest::of(b"x"), 100, &keys[1..3]);
        let mut forged = certified(100, &keys);
        forged.votes[0].1 = forged.votes[1].1;
        for lie in [short, forged] {
            assert!(matches!(
                recall.accept(&reply(&keys[1], None, lie, None), t0),
                Err(ReplyError::Certificate(_))
            ));
        }
        // None of that counted: the liar may still answer, and the floor is the truth.
        assert_eq!(recall.stake().0, 1);
        recall.accept(&nothing(&keys[1]), t0).expect("valid");
        recall
            .accept(&reply(&keys[2], None, certified(4, &keys), None), t0)
            .expect("valid");
        assert_eq!(
            recall.decide(t0 + GRACE),
            Decision::Start {
                floor: 5,
                signed: None
            }
        );
    }

    #[test]
    fn only_other_members_answer_and_each_once() {
        let keys = keys(4);
        let t0 = Instant::now();
        let mut recall = recall(&keys, MissingRecord::Refuse, t0);
        let stranger = KeyPair::from_seed(99);
        assert_eq!(
            recall.accept(&nothing(&stranger), t0),
            Err(ReplyError::NotAPeer(stranger.name))
        );
        assert_eq!(
            recall.accept(&nothing(&keys[0]), t0),
            Err(ReplyError::NotAPeer(keys[0].name))
        );
        recall.accept(&nothing(&keys[1]), t0).expect("valid");
        assert_eq!(
            recall.accept(&nothing(&keys[1]), t0),
            Err(ReplyError::Again(keys[1].name))
        );
        assert_eq!(recall.stake(), (2, 3));
    }

    #[test]
    fn a_committee_of_one_needs_no_answer() {
        let keys = keys(1);
        let t0 = Instant::now();
        let recall = recall(&keys, MissingRecord::Refuse, t0);
        assert_eq!(
            recall.decide(t0),
            Decision::Start {
                floor: 0,
                signed: None
            }
        );
    }
}
