//! What this node holds of each member's signatures: for a member that lost its vote record and
//! asks its peers what it signed before (`recall.rs`).
//!
//! Per member, the signed act of the highest round this node verified: a vote (alone, or as an
//! entry of a QC) or a timeout (alone, or as an entry of a TC), each kept with what its signature
//! covers, so that the member can check that the signature is its own and of that round. Nobody
//! can answer with a round the member did not sign in: the answer is the member's own signature.
//! One entry per member, whatever the rounds; only members' verified signatures get in.

use crate::messages::record::Act;
use crate::messages::{Block, Timeout, Vote, QC, TC};
use crypto::PublicKey;
use std::collections::HashMap;

/// Each member's signed act of the highest round this node verified, and the highest TC.
#[derive(Default)]
pub(crate) struct Witness {
    acts: HashMap<PublicKey, Act>,
    high_tc: Option<TC>,
}

impl Witness {
    /// A verified vote.
    pub(crate) fn vote(&mut self, vote: &Vote) {
        self.keep(
            vote.author,
            Act::Vote {
                hash: vote.hash,
                round: vote.round,
                signature: vote.signature,
            },
        );
    }

    /// A timeout whose signature was verified.
    pub(crate) fn timeout(&mut self, timeout: &Timeout) {
        self.keep(
            timeout.author,
            Act::Timeout {
                round: timeout.round,
                high_qc_round: timeout.high_qc.round,
                signature: timeout.signature,
            },
        );
    }

    /// A verified QC: each of its votes.
    pub(crate) fn qc(&mut self, qc: &QC) {
        if qc.is_genesis() {
            return;
        }
        for (author, signature) in &qc.votes {
            self.keep(
                *author,
                Act::Vote {
                    hash: qc.hash,
                    round: qc.round,
                    signature: *signature,
                },
            );
        }
    }

    /// A verified TC: each of its timeouts, and the TC itself if it is the highest.
    pub(crate) fn tc(&mut self, tc: &TC) {
        for (author, signature, high_qc_round) in &tc.votes {
            self.keep(
                *author,
                Act::Timeout {
                    round: tc.round,
                    high_qc_round: *high_qc_round,
                    signature: *signature,
                },
            );
        }
        if self
            .high_tc
            .as_ref()
            .is_none_or(|high| tc.round > high.round)
        {
            self.high_tc = Some(tc.clone());
        }
    }

    /// A verified block (a stored one, read back at start): its certificates.
    pub(crate) fn block(&mut self, block: &Block) {
        self.qc(&block.qc);
        if let Some(tc) = &block.tc {
            self.tc(tc);
        }
    }

    /// `member`'s act of the highest round held here.
    pub(crate) fn act_of(&self, member: &PublicKey) -> Option<Act> {
        self.acts.get(member).cloned()
    }

    pub(crate) fn high_tc(&self) -> Option<&TC> {
        self.high_tc.as_ref()
    }

    fn keep(&mut self, author: PublicKey, act: Act) {
        match self.acts.get(&author) {
            Some(kept) if kept.round() >= act.round() => {}
            _ => {
                self.acts.insert(author, act);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{keys, qc, tc, timeout, vote};
    use crate::messages::MessageError;
    use crypto::Digest;

    #[test]
    fn keeps_each_members_highest_act_from_messages_and_certificates() {
        let keys = keys(4);
        let mut witness = Witness::default();
        witness.vote(&vote(Digest::of(b"b5"), 5, &keys[0]));
        witness.qc(&qc(Digest::of(b"b3"), 3, &keys[..3]));
        // A lower round never replaces a higher one.
        assert_eq!(witness.act_of(&keys[0].name).map(|a| a.round()), Some(5));
        assert_eq!(witness.act_of(&keys[1].name).map(|a| a.round()), Some(3));
        assert!(witness.act_of(&keys[3].name).is_none());
        let high = qc(Digest::of(b"b6"), 6, &keys[..3]);
        witness.tc(&tc(7, &high, &keys[1..]));
        witness.timeout(&timeout(8, high.clone(), &keys[2]));
        assert_eq!(witness.act_of(&keys[0].name).map(|a| a.round()), Some(5));
        assert_eq!(witness.act_of(&keys[1].name).map(|a| a.round()), Some(7));
        assert_eq!(witness.act_of(&keys[2].name).map(|a| a.round()), Some(8));
        assert_eq!(witness.act_of(&keys[3].name).map(|a| a.round()), Some(7));
        assert_eq!(witness.high_tc().map(|tc| tc.round), Some(7));
        witness.tc(&tc(4, &high, &keys[1..]));
        assert_eq!(witness.high_tc().map(|tc| tc.round), Some(7));
    }

    #[test]
    fn an_act_verifies_only_under_its_signers_key_and_its_own_round() {
        let keys = keys(4);
        let mut witness = Witness::default();
        witness.vote(&vote(Digest::of(b"b"), 5, &keys[0]));
        witness.timeout(&timeout(9, QC::genesis(), &keys[1]));
        for (i, member) in keys[..2].iter().enumerate() {
            let act = witness.act_of(&member.name).expect("kept");
            assert!(act.verify(&member.name).is_ok());
            assert!(
                act.verify(&keys[2].name).is_err(),
                "act {i} under another key"
            );
            // The round is covered by the signature: a raised one no longer verifies.
            let raised = match act {
                Act::Vote {
                    hash, signature, ..
                } => Act::Vote {
                    hash,
                    round: 500,
                    signature,
                },
                Act::Timeout {
                    high_qc_round,
                    signature,
                    ..
                } => Act::Timeout {
                    round: 500,
                    high_qc_round,
                    signature,
                },
            };
            assert_eq!(
                raised.verify(&member.name),
                Err(MessageError::InvalidSignature)
            );
        }
    }
}
