//! Proof that a block committed, as a checkpoint reply carries it (state sync).
//!
//! A node adopts a checkpoint's block as its root and never looks below it again, so it must not
//! take a block the chain never committed, whoever reports it. The two-chain rule says when a
//! block committed: a block `b0` commits once a child `b1` of the very next round is certified,
//! and with it every ancestor of `b0`. A proof is therefore the blocks from the checkpoint's block
//! up to such a `b1`, each extending the one before, and a QC of `b1`. It costs the verifier two
//! certificates and some hashing; a replier builds it from blocks it stores anyway (peers keep
//! every block from their checkpoint up, see the core's `prune_floor`) and from the QCs of the
//! direct commits it saw (`sync::direct_commits`).

use crate::messages::{Block, MessageError, QC};
use config::Committee;
use crypto::Hash;
use serde::{Deserialize, Serialize};

/// The most blocks a proof may carry. Usually one (the checkpoint's block committed directly);
/// more when timeouts left it to be committed as an ancestor. A longer one is refused, and its
/// replier serves none until its next checkpoint.
pub const MAX_PROOF_BLOCKS: usize = 32;

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommitProof {
    /// The blocks after the committed one, each extending the one before; the last (`b1`) is in
    /// the round right after the one before it (`b0`, or the committed block itself).
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    pub descendants: Vec<Block>,
    /// A QC of the last of `descendants`.
    pub qc: QC,
}

impl std::fmt::Debug for CommitProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CommitProof({} blocks, {:?})",
            self.descendants.len(),
            self.qc
        )
    }
}

impl CommitProof {
    /// Checks that `block` committed: the descendants extend it block by block, the last two
    /// are in consecutive rounds, and both are certified (`b1` by `qc`, `b0` by `b1`'s QC).
    /// Only hashing until the two certificates, which are checked last.
    pub fn verify(&self, block: &Block, committee: &Committee) -> Result<(), MessageError> {
        let malformed = |why: String| Err(MessageError::Malformed(why));
        if self.descendants.is_empty() || self.descendants.len() > MAX_PROOF_BLOCKS {
            return malformed(format!(
                "a commit proof of {} blocks (1 to {MAX_PROOF_BLOCKS})",
                self.descendants.len()
            ));
        }
        let mut parent = (block.digest(), block.round);
        let mut b0_round = block.round;
        for descendant in &self.descendants {
            descendant.check_structure(committee)?;
            if (descendant.qc.hash, descendant.qc.round) != parent {
                return malformed(format!(
                    "block of round {} in a commit proof does not extend the one before",
                    descendant.round
                ));
            }
            b0_round = parent.1;
            parent = (descendant.digest(), descendant.round);
        }
        let (b1_digest, b1_round) = parent;
        if b1_round != b0_round + 1 {
            return malformed(format!(
                "a commit proof ends in rounds {b0_round} and {b1_round}, not consecutive"
            ));
        }
        if (self.qc.hash, self.qc.round) != (b1_digest, b1_round) {
            return malformed("a commit proof's QC certifies another block".into());
        }
        self.qc.verify(committee)?;
        match self.descendants.last() {
            Some(b1) => b1.qc.verify(committee),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys, qc, signed_block, tc};
    use config::Round;
    use crypto::{Digest, KeyPair};

    /// Blocks of `rounds`, each extending the one before (the first extends genesis), signed by
    /// the first key, certified by the first three; after a gap a block carries the TC of the
    /// round before it.
    pub(crate) fn chain(keys: &[KeyPair], rounds: &[Round]) -> Vec<Block> {
        let mut blocks: Vec<Block> = Vec::new();
        for &round in rounds {
            let parent_qc = blocks
                .last()
                .map_or(QC::genesis(), |p| qc(p.digest(), p.round, &keys[..3]));
            let timed_out =
                (parent_qc.round + 1 < round).then(|| tc(round - 1, &parent_qc, &keys[..3]));
            blocks.push(signed_block(parent_qc, timed_out, round, vec![], &keys[0]));
        }
        blocks
    }

    pub(crate) fn certify(block: &Block, keys: &[KeyPair]) -> QC {
        qc(block.digest(), block.round, &keys[..3])
    }

    #[test]
    fn a_direct_commit_and_an_ancestor_of_one_prove_with_the_blocks_up_to_the_child() {
        let keys = keys(4);
        let committee = committee(&keys);
        // Rounds 3, 5, 6: round 3 commits as an ancestor of round 5, which commits directly.
        let blocks = chain(&keys, &[3, 5, 6]);
        let proof = CommitProof {
            descendants: blocks[1..].to_vec(),
            qc: certify(&blocks[2], &keys),
        };
        assert_eq!(proof.verify(&blocks[0], &committee), Ok(()));
        let direct = CommitProof {
            descendants: blocks[2..].to_vec(),
            qc: certify(&blocks[2], &keys),
        };
        assert_eq!(direct.verify(&blocks[1], &committee), Ok(()));
    }

    #[test]
    fn byzantine_commit_proofs_of_uncommitted_blocks_are_refused() {
        let keys = keys(4);
        let committee = committee(&keys);
        let blocks = chain(&keys, &[3, 5, 7]);
        let refused = |proof: CommitProof, block: &Block| proof.verify(block, &committee).is_err();
        // Rounds 5 and 7 are not consecutive: round 5 is certified, not committed.
        assert!(refused(
            CommitProof {
                descendants: blocks[2..].to_vec(),
                qc: certify(&blocks[2], &keys),
            },
            &blocks[1]
        ));
        // A certified child alone, without a certificate of it.
        assert!(refused(
            CommitProof {
                descendants: blocks[1..2].to_vec(),
                qc: QC::genesis(),
            },
            &blocks[0]
        ));
        // A QC with too few signers.
        let consecutive = chain(&keys, &[3, 4]);
        assert!(refused(
            CommitProof {
                descendants: consecutive[1..].to_vec(),
                qc: qc(consecutive[1].digest(), 4, &keys[..2]),
            },
            &consecutive[0]
        ));
        // Descendants of another block.
        let other = signed_block(QC::genesis(), None, 3, vec![Digest::of(b"x")], &keys[0]);
        assert!(refused(
            CommitProof {
                descendants: consecutive[1..].to_vec(),
                qc: certify(&consecutive[1], &keys),
            },
            &other
        ));
        // The child's own QC (of the committed block) must verify too.
        let mut forged = consecutive[1].clone();
        forged.qc.votes.truncate(1);
        assert!(refused(
            CommitProof {
                descendants: vec![forged.clone()],
                qc: certify(&forged, &keys),
            },
            &consecutive[0]
        ));
        // Sound, as a control.
        assert!(!refused(
            CommitProof {
                descendants: consecutive[1..].to_vec(),
                qc: certify(&consecutive[1], &keys),
            },
            &consecutive[0]
        ));
    }
}
