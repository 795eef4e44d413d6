//! Latency samples among client transactions: how the node tells the mempool to recognise and
//! report them, since only the application knows the transaction format.

use batch::{Batch, SampleIndex};
use std::sync::Arc;

/// Latency samples among client transactions. The transaction format belongs to the
/// application and the mempool never decodes a transaction, so the node hands it these two
/// functions: `detect` recognises a sample from fixed offsets of its bytes (called once per
/// transaction of each sealed batch, so it must only peek), `report` records one hop of a
/// sample (`receive`, `seal`, `quorum`) with its time in ms since the epoch. With `index`, the
/// samples of every batch this node stores (sealed here or received) are noted there by digest,
/// found while the batch is in cache, for whoever reports their commit (see `batch::SampleIndex`).
#[derive(Clone)]
pub struct SampleHooks {
    pub detect: Arc<DetectSample>,
    pub report: Arc<ReportHop>,
    pub index: Option<SampleIndex>,
}

impl SampleHooks {
    /// Notes the samples of a peer's batch in the index, if there is one (the batch maker notes
    /// its own batches' from the walk it makes anyway).
    pub(crate) fn note_received(&self, batch: &Batch) {
        if let Some(index) = &self.index {
            let found = batch
                .tx_slices()
                .filter_map(|tx| (self.detect)(tx))
                .collect();
            index.note(batch.digest(), found);
        }
    }
}

/// The id of a transaction if it is a latency sample.
pub type DetectSample = dyn Fn(&[u8]) -> Option<String> + Send + Sync;
/// One hop of a sample: its id, the hop, the time in ms since the epoch.
pub type ReportHop = dyn Fn(String, &'static str, u64) + Send + Sync;

impl std::fmt::Debug for SampleHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SampleHooks")
    }
}
