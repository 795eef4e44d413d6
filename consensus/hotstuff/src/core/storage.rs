//! Storing and pruning (`payload::pruning` tracks the stored blocks): where the floor is, given
//! the application's latest checkpoint, and storing and deleting blocks and batches.

use super::Core;
use crate::error::ConsensusError;
use crate::messages::Block;
use crate::wire;
use config::Round;
use crypto::Hash;
use tracing::{debug, warn};

impl Core {
    /// Blocks below this round are neither kept nor stored: they left the GC window, the one
    /// batches are kept for, and are more than the window's rounds below the application's
    /// latest checkpoint. A restart resumes from that checkpoint and needs the blocks of the
    /// round window below it too: which batches its committer delivers or skips depends on
    /// what those blocks committed (see `RecentlyCommitted::record`).
    pub(super) fn prune_floor(&self) -> Round {
        let floor = self.pruning.window_floor(self.committed.last_round());
        // Before the application's first checkpoint, a restart replays from genesis.
        match self.adoption.checkpoints().latest() {
            Some(checkpoint) => {
                floor.min(checkpoint.round.saturating_sub(self.parameters.gc_depth))
            }
            None => 0,
        }
    }

    pub(super) fn prune_blocks(&mut self) {
        self.pruning.age();
        let floor = self.prune_floor();
        self.pacemaker.prune_below(floor);
        self.committed.prune_below(floor);
        let left = self.pruning.take_below(floor);
        self.store.blocks().remove_in_background(&left);
    }

    /// Writes `block` to the store, tracked for pruning like every block we keep.
    pub(super) async fn store_block(&mut self, block: &Block) -> Result<(), ConsensusError> {
        self.pacemaker.record_block(block);
        let digest = block.digest();
        if !self.store.blocks().contains(&digest)? {
            self.pruning.track(block.round, digest);
        }
        self.store
            .blocks()
            .write(digest, wire::encode_block(block)?)
            .await?;
        Ok(())
    }

    /// Deletes other members' batches that waited out their quota's rounds without committing
    /// and that no block we stored may still commit (see `mempool::AuthorQuota`): batches that
    /// committed in a stretch we skipped and were resent, batches nobody proposes. Decided here,
    /// in the task that checks blocks' batches, and awaited: a batch deleted by this is missing
    /// to every later check, and one a stored block names is never deleted.
    pub(super) async fn drain_uncommitted_batches(&mut self) {
        let round = self.committed.last_round();
        self.payload.settled_up_to(round);
        let payload = &self.payload;
        let drained = self.quota.cleanup(round, |batch| payload.needs(batch));
        if drained.is_empty() {
            return;
        }
        debug!("deleting {} batches that never committed", drained.len());
        if let Err(e) = self.store.batches().remove(&drained).await {
            warn!("cannot delete batches that never committed: {e}");
        }
    }
}
