//! The direct commits this node saw, from which its helper proves that a checkpoint's block
//! committed (the proof itself, `CommitProof`, travels in a checkpoint reply: see
//! `messages/commit_proof.rs`).

use crate::messages::commit_proof::{CommitProof, MAX_PROOF_BLOCKS};
use crate::messages::{Block, QC};
use config::Round;
use crypto::{Digest, Hash};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The direct commits this node saw: for each block `b0` committed by the two-chain rule, by its
/// round, the QC of its child `b1`. Written by the core, read by the helper that serves
/// checkpoints; pruned with the blocks.
#[derive(Clone, Default)]
pub struct DirectCommits {
    qcs: Arc<Mutex<BTreeMap<Round, QC>>>,
}

impl DirectCommits {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<Round, QC>> {
        self.qcs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The block of `round` committed directly: `child_qc` certifies its child.
    pub fn record(&self, round: Round, child_qc: &QC) {
        self.lock().insert(round, child_qc.clone());
    }

    /// Forgets the commits below `round` (their blocks are being pruned).
    pub fn prune_below(&self, round: Round) {
        let mut qcs = self.lock();
        let kept = qcs.split_off(&round);
        *qcs = kept;
    }

    /// The child QC of the first direct commit at or above `round`.
    pub fn first_at_or_above(&self, round: Round) -> Option<QC> {
        self.lock().range(round..).next().map(|(_, qc)| qc.clone())
    }

    /// The proof that `block` committed, from the direct commits here and the blocks `read`
    /// finds: the first direct commit at or above `block`'s round committed it (two committed
    /// blocks are on one chain), so the blocks from that commit's `b1` back to `block` are its
    /// descendants. `None` if no commit that high is known yet, or a block is missing.
    pub fn proof_of(
        &self,
        block: &Block,
        mut read: impl FnMut(&Digest) -> Option<Block>,
    ) -> Option<CommitProof> {
        let qc = self.first_at_or_above(block.round)?;
        let target = block.digest();
        let mut descendants = vec![read(&qc.hash)?];
        loop {
            let oldest = descendants.last()?;
            if oldest.qc.hash == target {
                break;
            }
            if oldest.qc.round <= block.round || descendants.len() >= MAX_PROOF_BLOCKS {
                return None;
            }
            let parent = read(&oldest.qc.hash)?;
            descendants.push(parent);
        }
        descendants.reverse();
        Some(CommitProof { descendants, qc })
    }

    /// Direct commits remembered.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::commit_proof::tests::chain;
    use crate::messages::tests::{committee, keys};
    use std::collections::HashMap;

    #[test]
    fn built_from_the_first_direct_commit_at_or_above_the_block() {
        let keys = keys(4);
        let committee = committee(&keys);
        let blocks = chain(&keys, &[3, 5, 6, 8, 9, 10]);
        let stored: HashMap<Digest, Block> =
            blocks.iter().map(|b| (b.digest(), b.clone())).collect();
        let read = |digest: &Digest| stored.get(digest).cloned();
        let commits = DirectCommits::default();
        assert!(commits.proof_of(&blocks[0], read).is_none());
        // Round 5 commits directly (6 is certified by 8's QC), then 8 (9 by 10's QC).
        commits.record(5, &blocks[3].qc);
        commits.record(8, &blocks[5].qc);
        for (i, block) in blocks[..4].iter().enumerate() {
            let proof = commits.proof_of(block, read).expect("a proof");
            assert_eq!(proof.verify(block, &committee), Ok(()), "block {i}");
        }
        let proof = commits.proof_of(&blocks[0], read).expect("a proof");
        assert_eq!(proof.descendants.len(), 2);
        // Nothing commits above round 8 yet.
        assert!(commits.proof_of(&blocks[4], read).is_none());
        commits.prune_below(8);
        assert_eq!(commits.held(), 1);
    }
}
