//! The end of the pipeline in `hotstuff` mode: transactions are opaque, so committed batches are
//! only scanned for sample transactions (format in `executor::opaque`).

use crate::metrics::{now_ms, SampleEvent, SampleLog};
use consensus::metered::MeteredReceiver;
use consensus::CommittedBatch;
use executor::opaque_sample_id;
use std::sync::Arc;

pub async fn run_commit_sink(mut rx: MeteredReceiver<CommittedBatch>, samples: Arc<SampleLog>) {
    while let Some(committed) = rx.recv().await {
        let t_ms = now_ms();
        for tx in committed.batch.transactions() {
            if let Some(id) = opaque_sample_id(&tx) {
                samples.push(SampleEvent {
                    id: id.to_string(),
                    event: "commit",
                    t_ms,
                });
            }
        }
    }
}
