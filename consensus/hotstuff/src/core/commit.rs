//! The core's side of committing (`commit::committed` decides what a commit brings and refuses a
//! fork): handing the committed blocks on, in order, and what each commit lets go of.

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
        self.synchronizer.committed(last.round);
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
