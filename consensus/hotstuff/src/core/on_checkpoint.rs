//! A checkpoint reply, and the rest of the core's side of state sync (`sync::adoption` decides):
//! asking peers for a checkpoint when we are too far behind to replay the chain, adopting one
//! that f+1 members report, and resuming from our own after a restart.

use super::Core;
use crate::commit::committer::ToCommitter;
use crate::error::ConsensusError;
use crate::messages::Block;
use crate::sync::adoption::Adopted;
use crate::sync::state_sync::Agreed;
use crate::wire::{CheckpointReply, ConsensusMessage};
use checkpoint::{Checkpoint, CheckpointSlot};
use crypto::Hash;
use mempool::ConsensusMempoolMessage;
use std::sync::atomic::Ordering;
use tracing::{debug, info, warn};

impl Core {
    /// Asks peers for a checkpoint when `block` certifies a round more than `gc_depth` rounds
    /// past our last commit (see `Adoption::should_ask`): peers may have deleted the batches
    /// (and, after `gc_retention_ms`, the blocks) between, so replaying the chain may never end.
    /// Having the blocks is not enough (a node restarted on its `--store` has them, but its own
    /// GC deleted batches that its peers then freed too). Replay goes on meanwhile; whichever
    /// gets there first wins.
    pub(super) async fn sync_state_if_far_behind(
        &mut self,
        block: &Block,
    ) -> Result<(), ConsensusError> {
        let last_committed = self.committed.last_round();
        let high_qc = self.voting.high_qc().round;
        if !self
            .adoption
            .should_ask(block.qc.round, high_qc, last_committed)
        {
            return Ok(());
        }
        info!(
            "round {} is certified and we committed only up to round {last_committed}: asking \
             peers for a checkpoint",
            block.qc.round
        );
        self.broadcast(&ConsensusMessage::CheckpointRequest(self.name))
            .await
    }

    /// Counts a member's checkpoint report, cheapest checks first: a block not past our last
    /// commit is of no use, a reply we did not ask for (or a member's second to one request) is
    /// not looked at, and the proof that the block committed is checked before the state is
    /// hashed (see `sync/state_sync.rs`).
    pub(super) async fn handle_checkpoint(
        &mut self,
        reply: CheckpointReply,
    ) -> Result<(), ConsensusError> {
        if reply.block.round <= self.committed.last_round() {
            return Ok(());
        }
        if !self.adoption.admit(&reply.author) {
            debug!("{:?} was not asked for; ignored", reply);
            return Ok(());
        }
        reply.verify(&self.committee)?;
        match self.adoption.add(reply) {
            Some(agreed) => self.adopt_checkpoint(agreed).await,
            None => Ok(()),
        }
    }

    /// Makes the checkpoint f+1 members reported our root (see `Adoption::take_root`).
    pub(super) async fn adopt_checkpoint(&mut self, agreed: Agreed) -> Result<(), ConsensusError> {
        let Agreed {
            block,
            state,
            digest,
        } = agreed;
        let block_digest = block.digest();
        info!(
            "adopting the checkpoint of round {} (block {block_digest}, state {digest}, {} \
             bytes) that f+1 members reported; last committed round was {}",
            block.round,
            state.len(),
            self.committed.last_round()
        );
        let checkpoint = Checkpoint {
            block: block_digest,
            round: block.round,
            state,
            digest,
        };
        self.store_block(&block).await?;
        let adopted = self.take_root(&block, checkpoint)?;
        self.settle_adopted(adopted).await?;
        self.metrics
            .checkpoints_adopted
            .fetch_add(1, Ordering::Relaxed);
        self.clean_up_after_commit().await;
        Ok(())
    }

    /// Makes `block`, already stored, the root of our chain and our last commit, and hands its
    /// state to the application (see `Committed::adopt`, `Adoption::take_root`); what committed
    /// with it is to be settled (`settle_adopted`).
    fn take_root(
        &mut self,
        block: &Block,
        checkpoint: Checkpoint,
    ) -> Result<Adopted, ConsensusError> {
        let synchronizer = &self.synchronizer;
        let (skipped, unknown_up_to) = self.committed.adopt(block, |digest| {
            synchronizer
                .stored_block(digest)
                .map_err(ConsensusError::from)
        })?;
        let adopted = self.adoption.take_root(
            checkpoint,
            skipped,
            unknown_up_to,
            &mut self.proposals.buffer,
        );
        self.synchronizer.set_root(block);
        self.metrics
            .checkpoint_round
            .store(block.round, Ordering::Relaxed);
        Ok(adopted)
    }

    /// Tells the mempool of our batches whose fate we cannot tell, then settles the blocks that
    /// committed with a root we took, as any commit (the committer collects their batches
    /// without delivering them: the application has their effects in the checkpoint's state).
    pub(super) async fn settle_adopted(&mut self, adopted: Adopted) -> Result<(), ConsensusError> {
        let Adopted { skipped, abandoned } = adopted;
        if !abandoned.is_empty() {
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Abandoned(abandoned))
                .await;
        }
        self.settle(skipped, ToCommitter::Skipped).await
    }

    /// A restart on a durable store: resume from our own last checkpoint, if its block is still
    /// stored (peers may have deleted what we would need to replay the chain, and when the whole
    /// committee restarts nobody else has a checkpoint to give). The core is built outside the
    /// runtime: what the root leaves to settle waits for `start`.
    pub(super) fn resume_from_own_checkpoint(&mut self) -> Result<(), ConsensusError> {
        let Some(checkpoint) = CheckpointSlot::stored(&self.store)? else {
            return Ok(());
        };
        match self.synchronizer.stored_block(&checkpoint.block)? {
            Some(block) => {
                info!(
                    "resuming from our own checkpoint of round {} ({} bytes)",
                    checkpoint.round,
                    checkpoint.state.len()
                );
                self.adoption.checkpoints().publish(checkpoint.clone());
                self.resumed_root = Some(self.take_root(&block, checkpoint)?);
            }
            None => warn!(
                "our stored checkpoint of round {} has lost its block; not resuming from it",
                checkpoint.round
            ),
        }
        Ok(())
    }
}
