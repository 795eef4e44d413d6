//! The last stage's part in state sync: checkpoint the state after the blocks the policy picks,
//! and take over a checkpoint consensus adopted from peers (see the `checkpoint` crate); and its
//! report of each committed batch it is done with, which tells consensus how far behind the
//! node's execution is (`checkpoint::PipelineProgress`).

use batch::CommittedBatch;
use bytes::Bytes;
use checkpoint::{Checkpoint, CheckpointPolicy, CheckpointSlot, PipelineProgress, StateSyncLink};
use config::Round;
use crypto::Digest;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use tracing::warn;

/// Where a committed batch sits in the committed sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub round: Round,
    pub block: Digest,
    /// The last batch of its block: once it is applied, the state is the state after the block.
    pub last_of_block: bool,
    /// The committed batch's size, as consensus counted it when it handed the batch out.
    pub bytes: u64,
}

impl Position {
    pub fn of(committed: &CommittedBatch) -> Self {
        Position {
            round: committed.round,
            block: committed.block,
            last_of_block: committed.last_of_block,
            bytes: committed.batch.bytes().len() as u64,
        }
    }
}

pub struct Checkpointing {
    slot: CheckpointSlot,
    restores: Receiver<Arc<Checkpoint>>,
    policy: CheckpointPolicy,
    /// Batches of rounds up to this one are in a restored checkpoint already.
    floor: Round,
    /// Where the batches this stage is done with are counted.
    progress: Arc<PipelineProgress>,
}

impl Checkpointing {
    /// Publishes into `link`'s slot; `restores` is the application's end of its restore
    /// channel; a checkpoint every `every` rounds (`Parameters::checkpoint_rounds`).
    pub fn new(link: &StateSyncLink, restores: Receiver<Arc<Checkpoint>>, every: Round) -> Self {
        Checkpointing {
            slot: link.checkpoints.clone(),
            restores,
            policy: CheckpointPolicy::new(every),
            floor: 0,
            progress: link.progress.clone(),
        }
    }

    /// The checkpoint to restore before the batch at hand, if consensus adopted one (the latest,
    /// if several are waiting). Consensus sends it before any batch of a later block, so
    /// checking before every batch cannot miss it.
    pub fn pending_restore(&mut self) -> Option<Arc<Checkpoint>> {
        // Empty or disconnected alike: nothing (more) to restore.
        let checkpoint = self.restores.try_iter().last()?;
        self.floor = checkpoint.round;
        self.policy.restored(checkpoint.round);
        // Our own latest checkpoint is older than this one: serve this one.
        self.slot.publish((*checkpoint).clone());
        Some(checkpoint)
    }

    /// Whether a batch at `position` is already part of a restored checkpoint: it was committed
    /// before consensus adopted the checkpoint and was still on its way here. The stage is done
    /// with such a batch.
    pub fn skips(&self, position: &Position) -> bool {
        let skip = position.round <= self.floor;
        if skip {
            self.progress.applied(position.bytes);
        }
        skip
    }

    /// After a batch at `position` is applied: counts it as done, and if it completed a block
    /// the policy picks, publishes the state `snapshot` gives.
    pub fn applied<E: std::fmt::Display>(
        &mut self,
        position: &Position,
        snapshot: impl FnOnce() -> Result<Vec<u8>, E>,
    ) {
        self.progress.applied(position.bytes);
        if !position.last_of_block || !self.policy.due(position.round) {
            return;
        }
        match snapshot() {
            Ok(state) => self.slot.publish(Checkpoint::new(
                position.block,
                position.round,
                Bytes::from(state),
            )),
            Err(e) => warn!("no checkpoint at round {}: {e}", position.round),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(round: Round, last_of_block: bool) -> Position {
        Position {
            round,
            block: Digest::of(&round.to_le_bytes()),
            last_of_block,
            bytes: 100,
        }
    }

    #[test]
    fn checkpoints_after_the_last_batch_of_a_picked_block() {
        let (link, rx) = StateSyncLink::new(&store::Store::new());
        let mut checkpointing = Checkpointing::new(&link, rx, 10);
        let state = |s: &'static str| move || Ok::<_, String>(s.as_bytes().to_vec());
        checkpointing.applied(&position(10, false), state("middle of 10"));
        assert!(link.checkpoints.latest().is_none());
        checkpointing.applied(&position(10, true), state("after 10"));
        checkpointing.applied(&position(12, true), state("after 12"));
        let latest = link.checkpoints.latest().expect("a checkpoint");
        assert_eq!(
            (latest.round, latest.state.as_ref()),
            (10, &b"after 10"[..])
        );
        // Every batch applied counts against what consensus handed out.
        link.progress.delivered(400);
        assert_eq!(link.progress.behind(), 100);
        assert_eq!(latest.digest, Digest::of(b"after 10"));
    }

    #[test]
    fn a_restore_skips_older_batches_and_is_served_from_then_on() {
        let (link, rx) = StateSyncLink::new(&store::Store::new());
        let mut checkpointing = Checkpointing::new(&link, rx, 10);
        assert!(checkpointing.pending_restore().is_none());
        let adopted = Checkpoint::new(Digest::of(b"b"), 37, Bytes::from_static(b"peers' state"));
        link.restore.send(Arc::new(adopted.clone())).expect("send");
        assert_eq!(checkpointing.pending_restore().as_deref(), Some(&adopted));
        link.progress.delivered(200);
        assert!(checkpointing.skips(&position(37, true)));
        assert!(!checkpointing.skips(&position(38, false)));
        // A skipped batch is done with; one still to apply is not.
        assert_eq!(link.progress.behind(), 100);
        assert_eq!(link.checkpoints.latest().as_deref(), Some(&adopted));
        // The next checkpoint is the makers' next: round 40 onwards.
        let state = || Ok::<_, String>(b"mine".to_vec());
        checkpointing.applied(&position(39, true), state);
        assert_eq!(link.checkpoints.latest().map(|c| c.round), Some(37));
        checkpointing.applied(&position(41, true), state);
        assert_eq!(link.checkpoints.latest().map(|c| c.round), Some(41));
    }
}
