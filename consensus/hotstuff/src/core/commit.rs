//! The commit rule's outcome: committing a block and its uncommitted ancestors, in order, and
//! refusing a commit that would fork the chain.

use super::Core;
use crate::commit_proof::DirectCommits;
use crate::committer::ToCommitter;
use crate::error::{ConsensusError, FatalError};
use crate::messages::Block;
use config::Round;
use crypto::{Digest, Hash};
use mempool::ConsensusMempoolMessage;
use plumbing::now_ms;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use tracing::info;

/// What committed so far: the chain every later commit must extend, and the certificates that
/// made its blocks commit (from which the helper proves our checkpoint's block committed).
pub(super) struct Committed {
    pub(super) last_round: Round,
    pub(super) last: Digest,
    pub(super) direct: DirectCommits,
}

impl Committed {
    /// Nothing but genesis.
    pub(super) fn new(direct: DirectCommits) -> Self {
        let last = Block::genesis().qc.hash;
        Committed {
            last_round: 0,
            last,
            direct,
        }
    }
}

impl Core {
    /// Commits `block` and every uncommitted ancestor, oldest first.
    pub(super) async fn commit(&mut self, block: Block) -> Result<(), ConsensusError> {
        let mut chain = VecDeque::from([block]);
        loop {
            let oldest = &chain[0];
            let parent = *oldest.parent();
            let ancestor = self
                .synchronizer
                .stored_block(&parent)?
                .ok_or(ConsensusError::MissingAncestor(parent))?;
            if ancestor.round <= self.committed.last_round {
                if parent != self.committed.last {
                    // Two-chain safety says this cannot happen with f or fewer faults. Checked
                    // before anything of `chain` is output, so the conflicting blocks never are.
                    return Err(FatalError::Fork {
                        block: chain[0].digest(),
                        round: chain[0].round,
                        last_committed: self.committed.last,
                        last_committed_round: self.committed.last_round,
                    }
                    .into());
                }
                break;
            }
            chain.push_front(ancestor);
        }
        let Some(last) = chain.back() else {
            return Ok(());
        };
        self.committed.last_round = last.round;
        self.synchronizer.committed(last.round);
        self.committed.last = last.digest();
        self.pruning.committed(last.round);
        for block in chain {
            self.proposals.settle(&block, &self.name);
            self.payload.committed(&block);
            self.quota.committed(&block.payload, block.round);
            info!("committed {:?}", block);
            // Our own leave our mempool's backlog. Best effort: a mempool that is gone has
            // no backlog.
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Committed(block.payload.clone()))
                .await;
            self.metrics
                .committed_blocks
                .fetch_add(1, Ordering::Relaxed);
            self.metrics.record_commit(now_ms());
            self.tx_commit
                .send(ToCommitter::Commit(block))
                .await
                .map_err(|_| ConsensusError::ChannelClosed)?;
        }
        self.proposals
            .buffer
            .finalize_up_to(self.committed.last_round);
        self.payload.cleanup(self.committed.last_round);
        self.prune_blocks();
        let _ = self
            .tx_mempool
            .send(ConsensusMempoolMessage::Cleanup(self.committed.last_round))
            .await;
        self.drain_uncommitted_batches().await;
        Ok(())
    }
}
