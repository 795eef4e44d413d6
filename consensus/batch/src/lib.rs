//! The batch: transactions in the layout the mempool seals, sends, stores and hashes, and the
//! committed batch consensus hands the application in commit order ([`CommittedBatch`]). What
//! crosses from ordering to execution lives here, so the stages behind consensus (and the
//! standalone `movevm` mode, which builds its own batches) need neither the mempool nor HotStuff.
//!
//! It must not know how batches travel, are stored or are ordered: no network, store or protocol.

mod batch;
mod committed;
mod frames;
mod samples;

pub use batch::{Batch, BatchBuilder, BatchError, Transactions, HEADER_LEN};
pub use committed::CommittedBatch;
pub use frames::{take_frames, OversizedFrame, TxFrames, TxSlices, TX_PREFIX_LEN};
pub use samples::SampleIndex;
