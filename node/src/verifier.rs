//! The verifier stage: decodes the transactions of each committed batch and checks every
//! signature on a pool of threads (ed25519 batch verification), then forwards the valid ones, in
//! commit order, to the executor stage.

use crate::stage::StageMetrics;
use consensus::metered::{MeteredReceiver, MeteredSender};
use consensus::CommittedBatch;
use crypto::ParallelVerifier;
use executor::Transaction;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;
use tracing::info;

/// The valid transactions of one committed batch.
pub struct VerifiedBatch {
    pub txs: Vec<Transaction>,
}

pub struct VerifierStage {
    rx: MeteredReceiver<CommittedBatch>,
    tx: MeteredSender<VerifiedBatch>,
    verifier: ParallelVerifier,
    metrics: Arc<StageMetrics>,
    malformed: AtomicU64,
    bad_signature: AtomicU64,
}

impl VerifierStage {
    pub fn spawn(
        rx: MeteredReceiver<CommittedBatch>,
        tx: MeteredSender<VerifiedBatch>,
        verifier: ParallelVerifier,
        metrics: Arc<StageMetrics>,
    ) -> std::io::Result<JoinHandle<()>> {
        let stage = VerifierStage {
            rx,
            tx,
            verifier,
            metrics,
            malformed: AtomicU64::new(0),
            bad_signature: AtomicU64::new(0),
        };
        std::thread::Builder::new()
            .name("verifier".into())
            .spawn(move || stage.run())
    }

    fn run(mut self) {
        while let Some(committed) = self.rx.blocking_recv() {
            let start = Instant::now();
            let txs = self.verify(&committed);
            self.metrics
                .record_batch(committed.batch.tx_count() as u64, start.elapsed());
            let batch = VerifiedBatch { txs };
            if self.tx.blocking_send(batch).is_err() {
                break;
            }
        }
        info!("verifier stage stopped");
    }

    /// The batch's valid transactions, in batch order.
    fn verify(&self, committed: &CommittedBatch) -> Vec<Transaction> {
        let mut decoded = Vec::with_capacity(committed.batch.tx_count() as usize);
        for bytes in committed.batch.transactions() {
            match Transaction::decode(&bytes) {
                Ok(tx) => {
                    let message = tx.signing_bytes();
                    decoded.push((tx, message));
                }
                Err(_) => {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let valid = self.verifier.verify(&decoded, |(tx, message)| {
            (message, &tx.signature, &tx.public_key)
        });
        let before = decoded.len();
        let txs: Vec<Transaction> = decoded
            .into_iter()
            .zip(valid)
            .filter_map(|((tx, _), ok)| ok.then_some(tx))
            .collect();
        self.bad_signature
            .fetch_add((before - txs.len()) as u64, Ordering::Relaxed);
        let malformed = self.malformed.load(Ordering::Relaxed);
        let bad_signature = self.bad_signature.load(Ordering::Relaxed);
        self.metrics
            .invalid
            .store(malformed + bad_signature, Ordering::Relaxed);
        self.metrics.set_extra(
            "invalid_by_reason",
            json!({ "malformed": malformed, "bad_signature": bad_signature }),
        );
        // Not "threads": busy_ms is wall-clock time of the stage, not a sum over its pool.
        self.metrics
            .set_extra("pool_threads", json!(self.verifier.threads()));
        txs
    }
}
