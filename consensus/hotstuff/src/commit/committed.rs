//! What committed so far, and the rule every new commit keeps: it extends that chain. A commit
//! that would not is a fork, which two-chain safety rules out with f or fewer Byzantine members;
//! it stops the node before anything of the conflicting chain is output.

use crate::error::{ConsensusError, FatalError};
use crate::messages::{Block, QC};
use crate::sync::direct_commits::DirectCommits;
use config::Round;
use crypto::{Digest, Hash};
use std::collections::VecDeque;

/// What committed so far: the chain every later commit must extend, and the certificates that
/// made its blocks commit (from which the helper proves our checkpoint's block committed).
pub(crate) struct Committed {
    last_round: Round,
    last: Digest,
    direct: DirectCommits,
}

impl Committed {
    /// Nothing but genesis.
    pub(crate) fn new(direct: DirectCommits) -> Self {
        let last = Block::genesis().qc.hash;
        Committed {
            last_round: 0,
            last,
            direct,
        }
    }
}

impl Committed {
    /// The round of the last committed block.
    pub(crate) fn last_round(&self) -> Round {
        self.last_round
    }

    /// The block `b0` of `round` committed directly: `child_qc` certifies its child (what the
    /// helper proves our checkpoint's block committed with).
    pub(crate) fn record_direct(&self, round: Round, child_qc: &QC) {
        self.direct.record(round, child_qc);
    }

    /// Forgets the direct commits below `round` (their blocks are being pruned).
    pub(crate) fn prune_below(&self, round: Round) {
        self.direct.prune_below(round);
    }

    #[cfg(test)]
    pub(crate) fn direct(&self) -> &DirectCommits {
        &self.direct
    }

    /// The blocks committing `block` commits, oldest first: it and its ancestors above the last
    /// committed round, each parent read with `stored`. Refuses a chain that does not extend
    /// what committed (`FatalError::Fork`) and one whose ancestor is not stored.
    pub(crate) fn chain_to(
        &self,
        block: Block,
        stored: impl Fn(&Digest) -> Result<Option<Block>, ConsensusError>,
    ) -> Result<VecDeque<Block>, ConsensusError> {
        let mut chain = VecDeque::from([block]);
        loop {
            let oldest = &chain[0];
            let parent = *oldest.parent();
            let ancestor = stored(&parent)?.ok_or(ConsensusError::MissingAncestor(parent))?;
            if ancestor.round <= self.last_round {
                if parent != self.last {
                    // Checked before anything of `chain` is output, so the conflicting blocks
                    // never are.
                    return Err(FatalError::Fork {
                        block: chain[0].digest(),
                        round: chain[0].round,
                        last_committed: self.last,
                        last_committed_round: self.last_round,
                    }
                    .into());
                }
                return Ok(chain);
            }
            chain.push_front(ancestor);
        }
    }

    /// Notes that the chain committed up to `last`.
    pub(crate) fn advance(&mut self, last: &Block) {
        self.last_round = last.round;
        self.last = last.digest();
    }

    /// Takes `root`, the block of a checkpoint proven committed, as the last commit, without
    /// the chain between: returns the blocks that committed with it that `stored` reads (its
    /// ancestors above the last commit, oldest first, then `root`), and the round up to which
    /// the chain below them is unknown here (0 if they reach the last commit).
    pub(crate) fn adopt(
        &mut self,
        root: &Block,
        stored: impl Fn(&Digest) -> Result<Option<Block>, ConsensusError>,
    ) -> Result<(Vec<Block>, Round), ConsensusError> {
        let mut chain = VecDeque::new();
        let mut parent = *root.parent();
        let mut parent_round = root.qc.round;
        let mut unknown_up_to = 0;
        while parent != self.last && parent_round > self.last_round {
            let Some(block) = stored(&parent)? else {
                unknown_up_to = parent_round;
                break;
            };
            parent = *block.parent();
            parent_round = block.qc.round;
            chain.push_front(block);
        }
        chain.push_back(root.clone());
        self.advance(root);
        Ok((chain.into(), unknown_up_to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::keys;
    use crypto::SignatureService;
    use std::collections::HashMap;

    async fn child(parent: &Block, round: Round) -> Block {
        let keys = keys(1);
        // A block of round 1 extends genesis through the genesis QC, as the chain does.
        let qc = if parent.round == 0 {
            QC::genesis()
        } else {
            QC {
                hash: parent.digest(),
                round: parent.round,
                votes: Vec::new(),
            }
        };
        let service = SignatureService::new(keys[0].secret.clone());
        Block::new(qc, None, keys[0].name, round, Vec::new(), &service).await
    }

    fn stored(blocks: &[&Block]) -> HashMap<Digest, Block> {
        let mut map: HashMap<Digest, Block> =
            blocks.iter().map(|b| (b.digest(), (*b).clone())).collect();
        let genesis = Block::genesis();
        map.insert(*genesis.parent(), genesis);
        map
    }

    #[tokio::test]
    async fn a_commit_brings_its_uncommitted_ancestors_oldest_first() {
        let committed = Committed::new(DirectCommits::default());
        let genesis = Block::genesis();
        let b1 = child(&genesis, 1).await;
        let b2 = child(&b1, 2).await;
        let b3 = child(&b2, 3).await;
        let map = stored(&[&b1, &b2, &b3]);
        let chain = committed
            .chain_to(b3.clone(), |d| Ok(map.get(d).cloned()))
            .expect("extends genesis");
        let rounds: Vec<Round> = chain.iter().map(|b| b.round).collect();
        assert_eq!(rounds, [1, 2, 3]);
    }

    #[tokio::test]
    async fn a_chain_that_skips_the_last_commit_is_a_fork() {
        let mut committed = Committed::new(DirectCommits::default());
        let genesis = Block::genesis();
        let b1 = child(&genesis, 1).await;
        let b2 = child(&b1, 2).await;
        committed.advance(&b2);
        // A conflicting branch from b1: its round-3 block's parent is at or below round 2 but
        // is not b2.
        let other = child(&b1, 3).await;
        let map = stored(&[&b1, &b2, &other]);
        let refused = committed.chain_to(other, |d| Ok(map.get(d).cloned()));
        assert!(matches!(
            refused,
            Err(ConsensusError::Fatal(FatalError::Fork { round: 3, .. }))
        ));
        let b3 = child(&b2, 3).await;
        let chain = committed
            .chain_to(b3, |d| Ok(map.get(d).cloned()))
            .expect("extends b2");
        assert_eq!(chain.len(), 1);
    }

    #[tokio::test]
    async fn a_missing_ancestor_is_named() {
        let committed = Committed::new(DirectCommits::default());
        let genesis = Block::genesis();
        let b1 = child(&genesis, 1).await;
        let b2 = child(&b1, 2).await;
        let missing = b1.digest();
        let map = stored(&[&b2]);
        assert!(matches!(
            committed.chain_to(b2, |d| Ok(map.get(d).cloned())),
            Err(ConsensusError::MissingAncestor(d)) if d == missing
        ));
    }
}
