//! The verifier stage: decodes the transactions of each committed batch and checks every
//! signature on a pool of threads (ed25519 batch verification), then hands the valid ones, in
//! commit order, to the executor stage. In standalone `movevm` it runs with signature checks
//! off, as the decoder in front of the same executor stage.

use crate::checkpointing::Position;
use crate::metrics::{now_ms, SampleEvent, SampleLog, Value};
use crate::stage::{Counted, Stage, StageMetrics};
use batch::CommittedBatch;
use crypto::ParallelVerifier;
use executor::Transaction;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The valid transactions of one committed batch, and where the batch sits in the committed
/// sequence.
pub struct VerifiedBatch {
    pub txs: Vec<Transaction>,
    pub position: Position,
}

impl Counted for VerifiedBatch {
    fn items(&self) -> u64 {
        self.txs.len() as u64
    }
}

impl Counted for CommittedBatch {
    fn items(&self) -> u64 {
        u64::from(self.batch.tx_count())
    }
}

/// Whether the stage checks signatures.
pub enum Signatures {
    Check(ParallelVerifier),
    /// Decode only (standalone `movevm`, whose transactions are unsigned).
    Skip,
}

pub struct VerifierStage {
    signatures: Signatures,
    malformed: u64,
    bad_signature: u64,
    /// Where the `commit` and `verify` hops of sample transactions go (none in `movevm`).
    samples: Option<Arc<SampleLog>>,
}

impl VerifierStage {
    pub fn new(signatures: Signatures, samples: Option<Arc<SampleLog>>) -> Self {
        VerifierStage {
            signatures,
            malformed: 0,
            bad_signature: 0,
            samples,
        }
    }

    /// Reports a hop of every sample among `txs` (decoding is done here anyway, so finding
    /// samples costs a comparison per transaction).
    fn report(&self, txs: &[Transaction], event: &'static str, t_ms: u64) {
        if let Some(samples) = &self.samples {
            for tx in txs.iter().filter(|tx| tx.is_sample()) {
                samples.push(SampleEvent {
                    id: tx.sample_id(),
                    event,
                    t_ms,
                });
            }
        }
    }
}

impl Stage for VerifierStage {
    type Input = CommittedBatch;
    type Output = VerifiedBatch;

    fn process(
        &mut self,
        committed: CommittedBatch,
        metrics: &StageMetrics,
    ) -> Option<VerifiedBatch> {
        let mut decoded = Vec::with_capacity(committed.batch.tx_count() as usize);
        for bytes in committed.batch.transactions() {
            match Transaction::decode(&bytes) {
                Ok(tx) => decoded.push(tx),
                Err(_) => self.malformed += 1,
            }
        }
        // The block was committed before this stage got it: the commit hop is consensus's time.
        self.report(&decoded, "commit", committed.committed_at_ms);
        let txs = match &self.signatures {
            Signatures::Skip => decoded,
            Signatures::Check(verifier) => {
                let signed: Vec<(Transaction, Vec<u8>)> = decoded
                    .into_iter()
                    .map(|tx| {
                        let message = tx.signing_bytes();
                        (tx, message)
                    })
                    .collect();
                let valid = verifier.verify(&signed, |(tx, message)| {
                    (message, &tx.signature, &tx.public_key)
                });
                let before = signed.len();
                let txs: Vec<Transaction> = signed
                    .into_iter()
                    .zip(valid)
                    .filter_map(|((tx, _), ok)| ok.then_some(tx))
                    .collect();
                self.bad_signature += (before - txs.len()) as u64;
                txs
            }
        };
        self.report(&txs, "verify", now_ms());
        metrics
            .invalid
            .store(self.malformed + self.bad_signature, Ordering::Relaxed);
        metrics.set(
            "invalid_by_reason",
            Value::Counts {
                label: "reason",
                counts: vec![
                    ("malformed".into(), self.malformed as f64),
                    ("bad_signature".into(), self.bad_signature as f64),
                ],
            },
        );
        if let Signatures::Check(verifier) = &self.signatures {
            // Not "threads": busy_ms is wall-clock time of the stage, not a sum over its pool.
            metrics.set("pool_threads", Value::Gauge(verifier.threads() as f64));
        }
        Some(VerifiedBatch {
            txs,
            position: Position::of(&committed),
        })
    }
}
