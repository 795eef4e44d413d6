//! The voting rules of two-chain HotStuff, kept apart from the event loop so they can be read
//! and tested on their own.
//!
//! 1. Vote at most once per round, and never in a round you timed out of.
//! 2. Vote for a block only if it extends the QC of the round just before it, or if the previous
//!    round ended in a TC and the block extends a QC at least as high as the TC's highest QC.
//!
//! Why that is safe: if block B of round r commits, B and its child of round r+1 are certified,
//! so 2f+1 replicas hold a QC of round ≥ r (the one B's child carries). Any TC of a later round
//! has 2f+1 signers, so at least one honest signer among them reports a high QC of round ≥ r;
//! the TC's QC is the one of the highest reported round (`TC::verify` checks that), so its round
//! is ≥ r, and rule 2 then only lets a block after that TC extend a QC of round ≥ r — which, by
//! induction over rounds, extends B. No conflicting block can be certified, so none commits.
//!
//! Why it stays live: a Byzantine signer can push the TC's highest round up only to a round for
//! which it shows a real QC (the TC carries it and `TC::verify` checks it), and below the TC's
//! own round. The next leader adopts that QC as its high QC before proposing, so its block
//! satisfies rule 2 at every honest replica. Without the QC, one signer claiming an absurd round
//! would make every block after the TC unvotable.

use crate::messages::Block;
use config::Round;

#[derive(Debug, Default)]
pub struct SafetyRules {
    last_voted_round: Round,
}

impl SafetyRules {
    /// The rules of a replica that last voted (or timed out) in `last_voted_round`.
    pub fn resume(last_voted_round: Round) -> Self {
        SafetyRules { last_voted_round }
    }

    pub fn last_voted_round(&self) -> Round {
        self.last_voted_round
    }

    /// Rule 1, second half: after timing out of `round`, never vote in it.
    pub fn timed_out(&mut self, round: Round) {
        self.last_voted_round = self.last_voted_round.max(round);
    }

    /// Whether voting for `block` is safe; if so, records the vote.
    pub fn vote(&mut self, block: &Block) -> bool {
        let fresh_round = block.round > self.last_voted_round;
        let extends_previous_qc = block.qc.round + 1 == block.round;
        let justified_by_tc = block
            .tc
            .as_ref()
            .is_some_and(|tc| tc.round + 1 == block.round && block.qc.round >= tc.high_qc.round);
        if fresh_round && (extends_previous_qc || justified_by_tc) {
            self.last_voted_round = block.round;
            true
        } else {
            false
        }
    }
}

/// The two-chain commit rule: with b0 <- b1 <- block, where `block` certifies b1 and b1
/// certifies b0, b0 commits if b1 is in the very next round.
pub fn commits(b0: &Block, b1: &Block) -> bool {
    b0.round + 1 == b1.round
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{keys, qc, signed_block, timeout};
    use crate::messages::{QC, TC};
    use crypto::{Digest, Hash, KeyPair};

    fn block(qc_round: Round, round: Round, tc: Option<TC>, author: &KeyPair) -> Block {
        signed_block(qc_of_round(qc_round), tc, round, vec![], author)
    }

    fn qc_of_round(r: Round) -> QC {
        if r == 0 {
            QC::genesis()
        } else {
            qc(Digest::of(&r.to_le_bytes()), r, &keys(4)[..3])
        }
    }

    fn tc(round: Round, high_qc_rounds: &[Round]) -> TC {
        let keys = keys(4);
        let highest = high_qc_rounds.iter().copied().max().unwrap_or(0);
        TC {
            round,
            high_qc: qc_of_round(highest),
            votes: high_qc_rounds
                .iter()
                .zip(&keys)
                .map(|(&r, k)| (k.name, timeout(round, qc_of_round(r), k).signature, r))
                .collect(),
        }
    }

    #[test]
    fn votes_once_per_round() {
        let keys = keys(4);
        let mut rules = SafetyRules::default();
        assert!(rules.vote(&block(1, 2, None, &keys[0])));
        // An equivocating leader's second block of round 2 gets no second vote.
        let other = block(1, 2, None, &keys[1]);
        assert!(!rules.vote(&other));
        // Nor does any older round.
        assert!(!rules.vote(&block(0, 1, None, &keys[0])));
        assert!(rules.vote(&block(2, 3, None, &keys[0])));
    }

    #[test]
    fn never_votes_in_a_round_it_timed_out_of() {
        let keys = keys(4);
        let mut rules = SafetyRules::default();
        rules.timed_out(5);
        assert!(!rules.vote(&block(4, 5, None, &keys[0])));
        assert!(rules.vote(&block(5, 6, None, &keys[0])));
    }

    #[test]
    fn a_gap_needs_a_tc_for_the_previous_round() {
        let keys = keys(4);
        let mut rules = SafetyRules::default();
        // Round 4's block extends round 2's QC: round 3 is unaccounted for.
        assert!(!rules.vote(&block(2, 4, None, &keys[0])));
        // A TC of an older round does not account for it either.
        assert!(!rules.vote(&block(2, 4, Some(tc(2, &[2, 2, 1])), &keys[0])));
        // A TC for round 3 whose highest reported QC is round 2 does.
        assert!(rules.vote(&block(2, 4, Some(tc(3, &[2, 1, 0])), &keys[0])));
    }

    #[test]
    fn a_tc_locks_out_blocks_below_its_highest_qc() {
        let keys = keys(4);
        let mut rules = SafetyRules::default();
        // Someone in the TC saw a QC of round 3 (a block that may have committed): a leader
        // extending round 2 instead would fork it away.
        assert!(!rules.vote(&block(2, 5, Some(tc(4, &[3, 2, 2])), &keys[0])));
        assert!(rules.vote(&block(3, 5, Some(tc(4, &[3, 2, 2])), &keys[0])));
    }

    #[test]
    fn commit_needs_consecutive_rounds() {
        let keys = keys(4);
        let b0 = block(0, 1, None, &keys[0]);
        let b1 = signed_block(qc(b0.digest(), 1, &keys[..3]), None, 2, vec![], &keys[1]);
        assert!(commits(&b0, &b1));
        let late = signed_block(
            qc(b0.digest(), 1, &keys[..3]),
            Some(tc(2, &[1, 1, 1])),
            3,
            vec![],
            &keys[2],
        );
        assert!(!commits(&b0, &late));
    }
}
