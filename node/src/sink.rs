//! The end of the pipeline in `hotstuff` mode: transactions are opaque, so committed batches are
//! only scanned for sample transactions (first byte 0, then a big-endian u64 id).

use crate::metrics::{now_ms, SampleEvent, SampleLog};
use consensus::metered::MeteredReceiver;
use consensus::CommittedBatch;
use std::sync::Arc;

pub const SAMPLE_TAG: u8 = 0;

/// The id of a hotstuff-mode sample transaction, if `tx` is one.
pub fn sample_id(tx: &[u8]) -> Option<u64> {
    if tx.first() != Some(&SAMPLE_TAG) {
        return None;
    }
    let bytes: [u8; 8] = tx.get(1..9)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

pub async fn run_commit_sink(mut rx: MeteredReceiver<CommittedBatch>, samples: Arc<SampleLog>) {
    while let Some(committed) = rx.recv().await {
        let t_ms = now_ms();
        for tx in committed.batch.transactions() {
            if let Some(id) = sample_id(&tx) {
                samples.push(SampleEvent {
                    id: id.to_string(),
                    event: "commit",
                    t_ms,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_ids() {
        let mut tx = vec![SAMPLE_TAG];
        tx.extend_from_slice(&42u64.to_be_bytes());
        tx.extend_from_slice(&[0; 100]);
        assert_eq!(sample_id(&tx), Some(42));
        tx[0] = 1;
        assert_eq!(sample_id(&tx), None);
        assert_eq!(sample_id(&[SAMPLE_TAG, 1, 2]), None);
        assert_eq!(sample_id(&[]), None);
    }
}
