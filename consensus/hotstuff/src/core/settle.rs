//! What follows blocks committing (`commit::committed` decides what a commit brings and refuses a
//! fork), one way whether they committed by our commit rule or below a checkpoint we took as our
//! root: handing them on in order, and what each lets go of.

use super::Core;
use crate::commit::committer::ToCommitter;
use crate::error::ConsensusError;
use crate::messages::Block;
use mempool::ConsensusMempoolMessage;
use plumbing::now_ms;
use std::sync::atomic::Ordering;
use tracing::info;

impl Core {
    /// Commits `block` and every uncommitted ancestor, oldest first.
    pub(super) async fn commit(&mut self, block: Block) -> Result<(), ConsensusError> {
        let synchronizer = &self.synchronizer;
        let chain = self.committed.chain_to(block, |digest| {
            synchronizer
                .stored_block(digest)
                .map_err(ConsensusError::from)
        })?;
        let Some(last) = chain.back() else {
            return Ok(());
        };
        self.committed.advance(last);
        for block in &chain {
            info!("committed {:?}", block);
            self.metrics
                .committed_blocks
                .fetch_add(1, Ordering::Relaxed);
            self.metrics.record_commit(now_ms());
        }
        self.settle(chain, ToCommitter::Commit).await?;
        self.prune_blocks();
        self.clean_up_after_commit().await;
        Ok(())
    }

    /// Everything that follows `blocks` committing, oldest first, up to the round of the last
    /// (already our last commit): the synchronizer and the pruning hear of it; each block's
    /// batches are done in our proposals' buffer and our payload checks, leave their authors'
    /// quotas and our mempool's backlog (best effort: a mempool that is gone has no backlog),
    /// and the block goes to the committer as `to_committer` makes it (delivered, or collected
    /// only: see `ToCommitter`); then our blocks at or below the round that did not commit are
    /// proposed again, and the payload checks forget what they waited for below it.
    pub(super) async fn settle(
        &mut self,
        blocks: impl IntoIterator<Item = Block>,
        to_committer: fn(Block) -> ToCommitter,
    ) -> Result<(), ConsensusError> {
        let round = self.committed.last_round();
        self.synchronizer.committed(round);
        self.pruning.committed(round);
        for block in blocks {
            self.proposals.settle(&block, &self.name);
            self.payload.committed(&block);
            self.quota.committed(&block.payload, block.round);
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Committed(block.payload.clone()))
                .await;
            self.tx_commit
                .send(to_committer(block))
                .await
                .map_err(|_| ConsensusError::ChannelClosed)?;
        }
        self.proposals.buffer.finalize_up_to(round);
        self.payload.cleanup(round);
        Ok(())
    }

    /// Once a commit (or a root we took) settled: our mempool cleans up below it, and the
    /// batches that can no longer commit leave the store.
    pub(super) async fn clean_up_after_commit(&mut self) {
        let _ = self
            .tx_mempool
            .send(ConsensusMempoolMessage::Cleanup(
                self.committed.last_round(),
            ))
            .await;
        self.drain_uncommitted_batches().await;
    }
}
