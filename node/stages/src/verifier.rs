//! The verifier stage: decodes the transactions of each committed batch and checks every
//! signature on a pool of threads (ed25519 batch verification), then hands the valid ones, in
//! commit order, to the executor stage. In standalone `movevm` it runs with signature checks
//! off, as the decoder in front of the same executor stage.
//!
//! In a node it first asks what is known of the batch ([`KnownBatches`]): if this node sealed it
//! from transactions its ingress check passed, or (`--verify=attested`) checked it itself as an
//! attester, or members holding f+1 stake agree on which transactions are invalid, those are
//! dropped and no signature is checked here; otherwise the batch is checked in full. Either way
//! the same transactions go on.

use crate::checkpointing::Position;
use crate::metrics::{now_ms, SampleEvent, SampleLog, Value};
use crate::stage::{Counted, Stage, StageMetrics};
use batch::{Batch, CommittedBatch};
use crypto::{Digest, ParallelVerifier};
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
    /// Every batch.
    Check(Arc<ParallelVerifier>),
    /// The batches whose invalid transactions this node does not know already (a node: its own
    /// batches, sealed from checked transactions; under `--verify=attested`, the attested ones).
    CheckUnknown(Arc<ParallelVerifier>, Arc<dyn KnownBatches>),
    /// Decode only (standalone `movevm`, whose transactions are unsigned).
    Skip,
}

/// What this node knows of a committed batch's invalid transactions without checking it here.
pub trait KnownBatches: Send + Sync {
    /// The positions of the batch's invalid transactions, if this node sealed the batch from
    /// checked transactions (none, then), checked the batch itself, or members holding f+1
    /// stake state them alike; `None`: check it.
    fn known_invalid(&self, batch: &Digest) -> Option<Vec<u32>>;
    /// The batch is through this stage: what was held on it can go.
    fn forget(&self, batch: &Digest);
}

/// The transactions of a batch sorted by the checks: the valid ones in batch order, and the
/// positions of those that do not decode or whose signature is wrong.
pub struct Checked {
    pub valid: Vec<Transaction>,
    pub malformed: Vec<u32>,
    pub bad_signature: Vec<u32>,
}

impl Checked {
    /// Every invalid position, ascending.
    pub fn invalid(&self) -> Vec<u32> {
        let mut invalid = [self.malformed.as_slice(), self.bad_signature.as_slice()].concat();
        invalid.sort_unstable();
        invalid
    }
}

/// Decodes every transaction of `batch` and checks its signature on `verifier`'s pool.
pub fn check_batch(verifier: &ParallelVerifier, batch: &Batch) -> Checked {
    check_transactions(verifier, batch.tx_slices(), batch.tx_count() as usize)
}

/// Decodes each of `txs` (about `count` of them) and checks its signature on `verifier`'s
/// pool; positions count from 0 in the order of `txs`.
pub fn check_transactions<'a>(
    verifier: &ParallelVerifier,
    txs: impl Iterator<Item = &'a [u8]>,
    count: usize,
) -> Checked {
    let mut malformed = Vec::new();
    let mut signed = Vec::with_capacity(count);
    for (position, bytes) in txs.enumerate() {
        match Transaction::decode(bytes) {
            Ok(tx) => {
                let message = tx.signing_bytes();
                signed.push((position as u32, tx, message));
            }
            Err(_) => malformed.push(position as u32),
        }
    }
    let valid = verifier.verify(&signed, |(_, tx, message)| {
        (message, &tx.signature, &tx.public_key)
    });
    let mut bad_signature = Vec::new();
    let valid = signed
        .into_iter()
        .zip(valid)
        .filter_map(|((position, tx, _), ok)| {
            if !ok {
                bad_signature.push(position);
            }
            ok.then_some(tx)
        })
        .collect();
    Checked {
        valid,
        malformed,
        bad_signature,
    }
}

pub struct VerifierStage {
    signatures: Signatures,
    malformed: u64,
    bad_signature: u64,
    /// Transactions dropped on the committee's statements, not checked here.
    attested_invalid: u64,
    /// Batches taken on what this node knew of them (its own check, the committee's
    /// statements), and batches checked here.
    known_batches: u64,
    checked_batches: u64,
    /// Where the `commit` and `verify` hops of sample transactions go (none in `movevm`).
    samples: Option<Arc<SampleLog>>,
}

impl VerifierStage {
    pub fn new(signatures: Signatures, samples: Option<Arc<SampleLog>>) -> Self {
        VerifierStage {
            signatures,
            malformed: 0,
            bad_signature: 0,
            attested_invalid: 0,
            known_batches: 0,
            checked_batches: 0,
            samples,
        }
    }

    /// The batch's valid transactions: decoded only (`Skip`), taken on what this node already
    /// knows of the batch (`CheckUnknown` with a verdict), or checked here.
    fn valid_transactions(&mut self, batch: &Batch) -> Vec<Transaction> {
        let (verifier, known) = match &self.signatures {
            Signatures::Skip => return self.decode(batch, &[]),
            Signatures::Check(verifier) => (verifier.clone(), None),
            Signatures::CheckUnknown(verifier, known) => {
                let invalid = known.known_invalid(&batch.digest());
                known.forget(&batch.digest());
                (verifier.clone(), invalid)
            }
        };
        if let Some(invalid) = known {
            self.known_batches += 1;
            self.attested_invalid += invalid.len() as u64;
            return self.decode(batch, &invalid);
        }
        self.checked_batches += 1;
        let checked = check_batch(&verifier, batch);
        self.malformed += checked.malformed.len() as u64;
        self.bad_signature += checked.bad_signature.len() as u64;
        checked.valid
    }

    /// Decodes the batch's transactions but those at the `skip` positions (ascending), without
    /// checking a signature.
    fn decode(&mut self, batch: &Batch, skip: &[u32]) -> Vec<Transaction> {
        let mut skip = skip.iter().peekable();
        let mut txs = Vec::with_capacity(batch.tx_count() as usize);
        for (position, bytes) in batch.transactions().enumerate() {
            if skip.next_if_eq(&&(position as u32)).is_some() {
                continue;
            }
            match Transaction::decode(&bytes) {
                Ok(tx) => txs.push(tx),
                Err(_) => self.malformed += 1,
            }
        }
        txs
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
        let batch = &committed.batch;
        // An idle block's empty batch has nothing to decode or check.
        let txs = if batch.tx_count() == 0 {
            Vec::new()
        } else {
            self.valid_transactions(batch)
        };
        // The block was committed before this stage got it: the commit hop is consensus's time.
        self.report(&txs, "commit", committed.committed_at_ms);
        self.report(&txs, "verify", now_ms());
        metrics.invalid.store(
            self.malformed + self.bad_signature + self.attested_invalid,
            Ordering::Relaxed,
        );
        metrics.set(
            "invalid_by_reason",
            Value::Counts {
                label: "reason",
                counts: vec![
                    ("malformed".into(), self.malformed as f64),
                    ("bad_signature".into(), self.bad_signature as f64),
                    ("attested".into(), self.attested_invalid as f64),
                ],
            },
        );
        match &self.signatures {
            Signatures::Skip => {}
            Signatures::Check(verifier) => {
                // Not "threads": busy_ms is wall-clock time of the stage, not a sum over its pool.
                metrics.set("pool_threads", Value::Gauge(verifier.threads() as f64));
            }
            Signatures::CheckUnknown(verifier, _) => {
                metrics.set("pool_threads", Value::Gauge(verifier.threads() as f64));
                metrics.set(
                    "batches_by_check",
                    Value::Counts {
                        label: "check",
                        counts: vec![
                            ("known".into(), self.known_batches as f64),
                            ("checked".into(), self.checked_batches as f64),
                        ],
                    },
                );
            }
        }
        Some(VerifiedBatch {
            txs,
            position: Position::of(&committed),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use batch::BatchBuilder;
    use crypto::{KeyPair, PublicKey};
    use executor::{Address, Payload};
    use std::sync::Mutex;

    /// A batch of `n` transfers from distinct senders, the ones at `forged` with a signature
    /// of another sender's transaction.
    fn batch(n: u32, forged: &[u32]) -> CommittedBatch {
        let mut builder = BatchBuilder::with_capacity(4096);
        for i in 0..n {
            let keys = KeyPair::from_seed(u64::from(i));
            let payload = Payload::Native {
                destination: Address::from_public_key(&KeyPair::from_seed(99).name),
                amount: 1,
            };
            let mut tx = Transaction::sign(&keys, 0, payload);
            if forged.contains(&i) {
                let other = KeyPair::from_seed(1_000);
                tx.signature = Transaction::sign(&other, 0, tx.payload.clone()).signature;
            }
            builder.push(&tx.encode());
        }
        CommittedBatch {
            round: 1,
            block: Digest::of(b"block"),
            last_of_block: true,
            batch: builder.seal(0, 0),
            committed_at_ms: 0,
        }
    }

    /// What the committee stated, as the stage sees it; records what the stage forgot.
    struct Stated {
        invalid: Option<Vec<u32>>,
        forgotten: Mutex<Vec<Digest>>,
    }

    impl KnownBatches for Stated {
        fn known_invalid(&self, _: &Digest) -> Option<Vec<u32>> {
            self.invalid.clone()
        }

        fn forget(&self, batch: &Digest) {
            self.forgotten.lock().expect("lock").push(*batch);
        }
    }

    fn run(
        invalid: Option<Vec<u32>>,
        committed: CommittedBatch,
    ) -> (Vec<Transaction>, Arc<Stated>) {
        let stated = Arc::new(Stated {
            invalid,
            forgotten: Mutex::new(Vec::new()),
        });
        let verifier = Arc::new(ParallelVerifier::new(1).expect("pool"));
        let mut stage =
            VerifierStage::new(Signatures::CheckUnknown(verifier, stated.clone()), None);
        let metrics = StageMetrics::new("verifier");
        let out = stage.process(committed, &metrics).expect("a batch");
        (out.txs, stated)
    }

    fn senders(txs: &[Transaction]) -> Vec<PublicKey> {
        txs.iter().map(|tx| tx.public_key).collect()
    }

    fn keys(seeds: &[u32]) -> Vec<PublicKey> {
        seeds
            .iter()
            .map(|s| KeyPair::from_seed(u64::from(*s)).name)
            .collect()
    }

    #[test]
    fn an_unattested_batch_is_checked_here_and_its_forgeries_dropped() {
        let committed = batch(6, &[1, 4]);
        let digest = committed.batch.digest();
        let (txs, stated) = run(None, committed);
        assert_eq!(senders(&txs), keys(&[0, 2, 3, 5]));
        assert_eq!(*stated.forgotten.lock().expect("lock"), vec![digest]);
    }

    #[test]
    fn an_attested_batch_drops_the_stated_positions_without_checking() {
        // The statement names 1 and 4: those go, and since nothing is checked here, so would a
        // valid transaction a certificate named (which f+1 stake of statements never do).
        let (txs, _) = run(Some(vec![1, 4]), batch(6, &[1, 4]));
        assert_eq!(senders(&txs), keys(&[0, 2, 3, 5]));
        let (txs, _) = run(Some(vec![2]), batch(4, &[]));
        assert_eq!(senders(&txs), keys(&[0, 1, 3]));
    }

    #[test]
    fn check_batch_names_malformed_and_badly_signed_positions_in_order() {
        let committed = batch(5, &[3]);
        let mut builder = BatchBuilder::with_capacity(4096);
        for (i, tx) in committed.batch.transactions().enumerate() {
            builder.push(if i == 1 { b"garbage" } else { &tx[..] });
        }
        let verifier = ParallelVerifier::new(1).expect("pool");
        let checked = check_batch(&verifier, &builder.seal(0, 0));
        assert_eq!(checked.malformed, vec![1]);
        assert_eq!(checked.bad_signature, vec![3]);
        assert_eq!(checked.invalid(), vec![1, 3]);
        assert_eq!(checked.valid.len(), 3);
    }
}
