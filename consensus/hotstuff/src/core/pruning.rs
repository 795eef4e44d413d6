//! Pruning stored blocks: each block this core stores is tracked by round and deleted once it
//! leaves the GC window (see `GcWindow`), unless the application's latest checkpoint still needs
//! it.

use super::Core;
use crate::error::ConsensusError;
use crate::gc::GcWindow;
use crate::messages::Block;
use crate::wire;
use config::Round;
use crypto::{Digest, Hash};
use std::collections::{BTreeMap, VecDeque};
use store::{Store, StoreError};
use tokio::time::Instant;
use tracing::{debug, warn};

pub(super) struct BlockPruning {
    /// Digests of the blocks this core stored, by round, so they can be deleted once they leave
    /// the GC window (see `prune_floor`).
    pub(super) stored_blocks: BTreeMap<Round, Vec<Digest>>,
    /// (round, time) of recent commits, and the highest round committed longer ago than the
    /// GC window's time: what bounds block pruning by time.
    commit_times: VecDeque<(Round, Instant)>,
    aged_commit_round: Round,
    window: GcWindow,
}

impl BlockPruning {
    /// Tracks the blocks a durable store kept from before a restart like our own, so they are
    /// pruned once they leave the GC window instead of staying on disk for ever. Each block
    /// that decodes is also handed to `on_block` (the leader elector learns the chain from
    /// them: they were checked before they were stored).
    pub(super) fn scan(
        store: &Store,
        window: GcWindow,
        mut on_block: impl FnMut(&Block),
    ) -> Result<Self, StoreError> {
        let mut stored_blocks: BTreeMap<Round, Vec<Digest>> = BTreeMap::new();
        for (digest, bytes) in store.blocks().scan()? {
            match wire::decode_block(&bytes) {
                Ok(block) => {
                    on_block(&block);
                    stored_blocks.entry(block.round).or_default().push(digest);
                }
                Err(e) => {
                    // Tracked as of round 0, so the first pruning deletes it.
                    warn!("stored block {digest} does not decode ({e}); deleting it");
                    stored_blocks.entry(0).or_default().push(digest);
                }
            }
        }
        Ok(BlockPruning {
            stored_blocks,
            commit_times: VecDeque::new(),
            aged_commit_round: 0,
            window,
        })
    }

    /// Notes that the chain committed up to `round` now.
    pub(super) fn committed(&mut self, round: Round) {
        self.commit_times.push_back((round, Instant::now()));
    }

    /// Moves `aged_commit_round` up to the commits the window's time is over for.
    fn age(&mut self) {
        while let Some(&(round, at)) = self.commit_times.front() {
            if !self.window.aged(at, Instant::now()) {
                break;
            }
            self.aged_commit_round = round;
            self.commit_times.pop_front();
        }
    }

    /// Blocks below this round have left the window (see `GcWindow::has_left`), the chain
    /// having committed up to `last_committed`.
    fn window_floor(&self, last_committed: Round) -> Round {
        self.window
            .lowest_round_kept(last_committed)
            .min(self.aged_commit_round)
    }
}

impl Core {
    /// Blocks below this round are neither kept nor stored: they left the GC window, the one
    /// batches are kept for, and are more than the window's rounds below the application's
    /// latest checkpoint. A restart resumes from that checkpoint and needs the blocks of the
    /// round window below it too: which batches its committer delivers or skips depends on
    /// what those blocks committed (see `RecentlyCommitted::record`).
    pub(super) fn prune_floor(&self) -> Round {
        let floor = self.pruning.window_floor(self.committed.last_round);
        // Before the application's first checkpoint, a restart replays from genesis.
        match self.adoption.checkpoints.latest() {
            Some(checkpoint) => {
                floor.min(checkpoint.round.saturating_sub(self.parameters.gc_depth))
            }
            None => 0,
        }
    }

    pub(super) fn prune_blocks(&mut self) {
        self.pruning.age();
        let floor = self.prune_floor();
        self.pacemaker.elector.prune(floor);
        self.committed.direct.prune_below(floor);
        let keep = self.pruning.stored_blocks.split_off(&floor);
        for digests in std::mem::replace(&mut self.pruning.stored_blocks, keep).into_values() {
            self.store.blocks().remove_in_background(&digests);
        }
    }

    /// Writes `block` to the store, tracked for pruning like every block we keep.
    pub(super) async fn store_block(&mut self, block: &Block) -> Result<(), ConsensusError> {
        self.pacemaker.elector.record(block);
        let digest = block.digest();
        if !self.store.blocks().contains(&digest)? {
            self.pruning
                .stored_blocks
                .entry(block.round)
                .or_default()
                .push(digest);
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
        let round = self.committed.last_round;
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
