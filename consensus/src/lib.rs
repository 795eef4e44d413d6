//! HotStuff consensus, the mempool that feeds it, and the network both use.
//!
//! The crate's one output is the stream of committed batches, in commit order, through one
//! bounded channel (see [`Consensus::spawn`]). The mempool ([`mempool::Mempool::spawn`]) and the
//! consensus core are started side by side by the node, joined by a [`MempoolLink`].

mod bounded;
pub mod column_writer;
pub mod config;
pub mod disk;
pub mod durable_cell;
pub mod hotstuff;
pub mod mempool;
pub mod metered;
pub mod network;
pub mod segment_log;
pub mod store;
#[cfg(test)]
mod test_alloc;

pub use config::{Committee, Parameters, Round, Stake};
pub use hotstuff::{
    Checkpoint, CheckpointPolicy, CheckpointSlot, CommittedBatch, Consensus, ConsensusHandle,
    ConsensusMetrics, FatalError, MempoolLink, PipelineProgress, StateSyncLink,
};
pub use mempool::batch::Batch;
pub use store::Store;
