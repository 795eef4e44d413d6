//! What adopting a checkpoint from peers keeps: the peers' reports (`state_sync`), where an
//! adopted checkpoint goes, the application's latest checkpoint, and what a root taken below the
//! chain leaves for the mempool and the committer to hear of. The core's handlers are in
//! `core/adoption.rs`.

use crate::messages::Block;
use crate::sync::state_sync::StateSync;
use checkpoint::{Checkpoint, CheckpointSlot};
use config::{Committee, Parameters};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct Adoption {
    /// Collects peers' checkpoint reports (see `sync/state_sync.rs`).
    pub(crate) state_sync: StateSync,
    /// Where an adopted checkpoint goes to the application (see `StateSyncLink`).
    pub(crate) tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
    /// The application's latest checkpoint: its block is never pruned (peers may ask for it, and
    /// a restart on a durable store resumes from it).
    pub(crate) checkpoints: CheckpointSlot,
    /// Blocks that committed without passing through `commit` (below a checkpoint taken as our
    /// root), whose batches the mempool and the committer have yet to hear of (see
    /// `settle_skipped`): the core is built outside the runtime, so a root taken there is
    /// announced once it runs.
    pub(crate) skipped: Vec<Block>,
    /// Our batches of blocks below a root we took whose fate we cannot tell (`take_root`):
    /// never proposed again, so our mempool must stop counting them as waiting for a commit
    /// (its backlog would stay full, and its batch maker paused, for good). Announced with
    /// `skipped`.
    pub(crate) abandoned: Vec<crypto::Digest>,
}

impl Adoption {
    pub(crate) fn new(
        committee: &Committee,
        parameters: &Parameters,
        tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
        checkpoints: CheckpointSlot,
    ) -> Self {
        Adoption {
            // Asked again each timeout: by then peers are at their next checkpoint, or the first
            // request's replies were lost.
            state_sync: StateSync::new(
                committee.clone(),
                Duration::from_millis(parameters.timeout_delay),
            ),
            tx_restore,
            checkpoints,
            skipped: Vec::new(),
            abandoned: Vec::new(),
        }
    }
}
