//! The core's side of state sync (`sync::adoption` keeps its state): asking peers for a
//! checkpoint when we are too far behind to replay the chain, adopting one that f+1 members
//! report, and resuming from our own after a restart.

use super::Core;
use crate::commit::committer::ToCommitter;
use crate::error::ConsensusError;
use crate::messages::Block;
use crate::sync::state_sync::Adopted;
use crate::wire::{CheckpointReply, ConsensusMessage};
use checkpoint::{Checkpoint, CheckpointSlot};
use config::Round;
use crypto::Hash;
use mempool::ConsensusMempoolMessage;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tracing::{debug, info, warn};

impl Core {
    /// Asks peers for a checkpoint when `block` certifies a round more than `gc_depth` rounds
    /// past our last commit: peers may have deleted the batches (and, after `gc_retention_ms`,
    /// the blocks) between, so replaying the chain may never end. Having the blocks is not
    /// enough (a node restarted on its `--store` has them, but its own GC deleted batches that
    /// its peers then freed too). Replay goes on meanwhile; whichever gets there first wins.
    ///
    /// A request ends when replay won: once no certified round we know of is more than
    /// `gc_depth` past our last commit, replies to it are no longer looked at (a request left
    /// open would let a member push one report per member long after we caught up).
    pub(super) async fn sync_state_if_far_behind(
        &mut self,
        block: &Block,
    ) -> Result<(), ConsensusError> {
        let reach = self
            .committed
            .last_round
            .saturating_add(self.parameters.gc_depth);
        if self.voting.high_qc.round.max(block.qc.round) <= reach {
            self.adoption.state_sync.caught_up();
        }
        if block.qc.round <= reach || !self.adoption.state_sync.should_request() {
            return Ok(());
        }
        info!(
            "round {} is certified and we committed only up to round {}: asking peers for a \
             checkpoint",
            block.qc.round, self.committed.last_round
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
        if reply.block.round <= self.committed.last_round {
            return Ok(());
        }
        if !self.adoption.state_sync.admit(&reply.author) {
            debug!("{:?} was not asked for; ignored", reply);
            return Ok(());
        }
        reply.verify(&self.committee)?;
        match self.adoption.state_sync.add(reply) {
            Some(adopted) => self.adopt_checkpoint(adopted).await,
            None => Ok(()),
        }
    }

    /// Makes the checkpoint f+1 members reported our root (see `take_root`).
    pub(super) async fn adopt_checkpoint(
        &mut self,
        adopted: Adopted,
    ) -> Result<(), ConsensusError> {
        let Adopted {
            block,
            state,
            digest,
        } = adopted;
        let block_digest = block.digest();
        info!(
            "adopting the checkpoint of round {} (block {block_digest}, state {digest}, {} \
             bytes) that f+1 members reported; last committed round was {}",
            block.round,
            state.len(),
            self.committed.last_round
        );
        let checkpoint = Checkpoint {
            block: block_digest,
            round: block.round,
            state,
            digest,
        };
        self.store_block(&block).await?;
        self.take_root(block, checkpoint)?;
        self.settle_skipped().await?;
        self.metrics
            .checkpoints_adopted
            .fetch_add(1, Ordering::Relaxed);
        let _ = self
            .tx_mempool
            .send(ConsensusMempoolMessage::Cleanup(self.committed.last_round))
            .await;
        self.drain_uncommitted_batches().await;
        Ok(())
    }

    /// Makes the checkpoint's block, already stored, our last committed block and the root of
    /// our chain, and hands its state to the application. The state goes first: the application
    /// must have it before any batch of a block after the root, and those can only come after
    /// this.
    ///
    /// The root and the blocks between our last commit and it committed without us: of those we
    /// hold, our own are done (not proposed again: peers would refuse them as committed for the
    /// GC window, then commit them a second time), and every one is queued for `settle_skipped`.
    /// Our blocks of the stretch we do not hold may or may not have committed: they are
    /// forgotten, not proposed again.
    pub(super) fn take_root(
        &mut self,
        block: Block,
        checkpoint: Checkpoint,
    ) -> Result<(), ConsensusError> {
        let round = block.round;
        if self.adoption.tx_restore.send(Arc::new(checkpoint)).is_err() {
            // An application without state (or gone) needs none; consensus goes on.
            debug!("no application takes checkpoints");
        }
        let (mut skipped, unknown_up_to) = self.stored_ancestors(&block)?;
        skipped.push(block.clone());
        let digest = block.digest();
        self.synchronizer.set_root(&block);
        self.synchronizer.committed(round);
        self.committed.last_round = round;
        self.committed.last = digest;
        self.pruning.committed(round);
        for skipped in &skipped {
            self.proposals.settle(skipped, &self.name);
            self.payload.committed(skipped);
        }
        let forgotten = self.proposals.buffer.forget_up_to(unknown_up_to);
        self.adoption.abandoned.extend(forgotten);
        self.proposals.buffer.finalize_up_to(round);
        self.payload.cleanup(round);
        self.adoption.skipped.extend(skipped);
        self.metrics
            .checkpoint_round
            .store(round, Ordering::Relaxed);
        Ok(())
    }

    /// The stored ancestors of `root` above our last commit, oldest first (they committed with
    /// it), and the round up to which the chain below them is unknown here (0 if they reach our
    /// last commit).
    pub(super) fn stored_ancestors(
        &self,
        root: &Block,
    ) -> Result<(Vec<Block>, Round), ConsensusError> {
        let mut chain = VecDeque::new();
        let mut parent = *root.parent();
        let mut parent_round = root.qc.round;
        while parent != self.committed.last && parent_round > self.committed.last_round {
            match self.synchronizer.stored_block(&parent)? {
                Some(block) => {
                    parent = *block.parent();
                    parent_round = block.qc.round;
                    chain.push_front(block);
                }
                None => return Ok((chain.into(), parent_round)),
            }
        }
        Ok((chain.into(), 0))
    }

    /// Tells the mempool (quotas, backlog) and the committer (which collects their batches) of
    /// the blocks that committed below a root we took, and the mempool of our batches whose
    /// fate we cannot tell (see `take_root`).
    pub(super) async fn settle_skipped(&mut self) -> Result<(), ConsensusError> {
        let abandoned = std::mem::take(&mut self.adoption.abandoned);
        if !abandoned.is_empty() {
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Abandoned(abandoned))
                .await;
        }
        for block in std::mem::take(&mut self.adoption.skipped) {
            self.quota.committed(&block.payload, block.round);
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Committed(block.payload.clone()))
                .await;
            self.tx_commit
                .send(ToCommitter::Skipped(block))
                .await
                .map_err(|_| ConsensusError::ChannelClosed)?;
        }
        Ok(())
    }
}

impl Core {
    /// A restart on a durable store: resume from our own last checkpoint, if its block is still
    /// stored (peers may have deleted what we would need to replay the chain, and when the whole
    /// committee restarts nobody else has a checkpoint to give).
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
                self.adoption.checkpoints.publish(checkpoint.clone());
                self.take_root(block, checkpoint)?;
            }
            None => warn!(
                "our stored checkpoint of round {} has lost its block; not resuming from it",
                checkpoint.round
            ),
        }
        Ok(())
    }
}
