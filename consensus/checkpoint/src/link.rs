//! The link that carries what the application hands back to consensus: its checkpoints, the
//! checkpoint consensus adopted for it, and how far behind it is.

use crate::checkpoint::{Checkpoint, CheckpointSlot};
use crate::progress::PipelineProgress;
use std::sync::mpsc;
use std::sync::Arc;
use store::Store;

/// How consensus and the application exchange checkpoints: the application publishes its own in
/// `checkpoints`; consensus sends one adopted from peers on `restore`, before it outputs any
/// batch of a block after it. The application must then replace its state with the
/// checkpoint's and ignore committed batches of rounds up to the checkpoint's (they may still be
/// on their way from before). The application also reports in `progress` every committed batch
/// it is done with, so consensus knows how far behind it is.
#[derive(Clone)]
pub struct StateSyncLink {
    pub checkpoints: CheckpointSlot,
    pub restore: mpsc::Sender<Arc<Checkpoint>>,
    pub progress: Arc<PipelineProgress>,
}

impl StateSyncLink {
    /// A link whose checkpoints are kept in `store`, and the application's end of the restore
    /// channel.
    pub fn new(store: &Store) -> (Self, mpsc::Receiver<Arc<Checkpoint>>) {
        let (restore, rx_restore) = mpsc::channel();
        let link = StateSyncLink {
            checkpoints: CheckpointSlot::kept_in(store),
            restore,
            progress: Arc::default(),
        };
        (link, rx_restore)
    }
}
