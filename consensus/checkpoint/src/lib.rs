//! What crosses back from execution to ordering: the checkpoints the application publishes and
//! consensus serves to peers or adopts from them ([`Checkpoint`]), the rule on the committed
//! sequence that picks which blocks are checkpointed ([`CheckpointPolicy`]), where the latest one
//! is kept ([`CheckpointSlot`]), how far the application is behind consensus
//! ([`PipelineProgress`]), and the link that carries all of them ([`StateSyncLink`]). Its
//! counterpart in the forward direction is `batch` (the committed batch).
//!
//! Both sides name these types: `hotstuff` adopts, serves and paces by them, the stages behind
//! consensus (and standalone `movevm`) make checkpoints and report progress. Living below both,
//! they let the stages be built without HotStuff. A separate crate from `batch` because a slot
//! persists its latest checkpoint in the store, and the batch must not know storage.
//!
//! It must not know how checkpoints are agreed on or travel (the f+1 rule and the messages are
//! `hotstuff`'s) nor what the application's state holds: it is bytes and their digest.

mod checkpoint;
mod link;
mod progress;

pub use checkpoint::{Checkpoint, CheckpointPolicy, CheckpointSlot};
pub use link::StateSyncLink;
pub use progress::PipelineProgress;
