//! The blocks a member stored, tracked by round so they are deleted once they leave the GC
//! window (see `GcWindow`): the window's rounds below the last commit, and its time since.

use crate::messages::Block;
use crate::payload::gc::GcWindow;
use crate::wire;
use config::Round;
use crypto::Digest;
use plumbing::clock::Instant;
use std::collections::{BTreeMap, VecDeque};
use store::{Store, StoreError};
use tracing::warn;

pub(crate) struct BlockPruning {
    /// Digests of the blocks this core stored, by round, so they can be deleted once they leave
    /// the GC window (see `prune_floor`).
    stored_blocks: BTreeMap<Round, Vec<Digest>>,
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
    pub(crate) fn scan(
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
    pub(crate) fn committed(&mut self, round: Round) {
        self.commit_times.push_back((round, Instant::now()));
    }

    /// Moves `aged_commit_round` up to the commits the window's time is over for.
    pub(crate) fn age(&mut self) {
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
    pub(crate) fn window_floor(&self, last_committed: Round) -> Round {
        self.window
            .lowest_round_kept(last_committed)
            .min(self.aged_commit_round)
    }
}

impl BlockPruning {
    /// Notes a block stored at `round`.
    pub(crate) fn track(&mut self, round: Round, digest: Digest) {
        self.stored_blocks.entry(round).or_default().push(digest);
    }

    /// The tracked blocks below `floor`, which leave the tracking: the caller deletes them.
    pub(crate) fn take_below(&mut self, floor: Round) -> Vec<Digest> {
        let keep = self.stored_blocks.split_off(&floor);
        std::mem::replace(&mut self.stored_blocks, keep)
            .into_values()
            .flatten()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::Parameters;

    fn pruning() -> BlockPruning {
        let parameters = Parameters {
            gc_depth: 10,
            gc_retention_ms: 0,
            ..Parameters::default()
        };
        BlockPruning::scan(&Store::new(), GcWindow::new(&parameters), |_| {}).expect("empty")
    }

    #[tokio::test]
    async fn blocks_leave_once_below_the_window_of_rounds_and_of_time() {
        let mut pruning = pruning();
        for round in 1..=30 {
            pruning.track(round, Digest([round as u8; 32]));
        }
        // Nothing committed long enough ago yet: the time half of the window holds everything.
        pruning.age();
        assert_eq!(pruning.window_floor(30), 0);
        pruning.committed(30);
        pruning.age();
        // With no retention time, the commit of round 30 is aged at once: the floor is the
        // window's rounds below it.
        let floor = pruning.window_floor(30);
        assert_eq!(floor, 20);
        let taken = pruning.take_below(floor);
        assert_eq!(taken.len(), 19);
        assert!(pruning.take_below(floor).is_empty(), "taken once");
        assert_eq!(pruning.stored_blocks.len(), 11);
    }
}
