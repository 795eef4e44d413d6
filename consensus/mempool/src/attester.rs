//! Checks the batches this node attests (its own as it seals them, the peers' it is named for
//! as they arrive), signs what it found and sends the statement to every other member.
//!
//! Batches wait in a channel bounded in bytes; the peers' connections wait for room, and the
//! batch maker takes no client transactions while the [`CheckQueue`] says this attester is
//! behind, so a node whose checks fall behind slows its clients and the authors that send it
//! batches, rather than stating late (which would only make every node check the batch).

use crate::attest::{Attestation, Attesting, CheckQueue, Conduct, Finding};
use crate::message::MempoolMessage;
use crate::metrics::MempoolMetrics;
use batch::Batch;
use crypto::{Digest, PublicKey, SecretKey};
use network::SimpleSender;
use plumbing::budgeted::BudgetedReceiver;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tracing::warn;

/// A batch to check, its author (the first of its attesters) and its number in the author's
/// sequence (which names the others).
pub struct AttesterInput {
    pub batch: Batch,
    pub author: PublicKey,
    pub seq: u64,
    /// This node sealed the batch from transactions its ingress check passed: it holds no
    /// invalid one, and is stated clean without a second check (see `checked.rs` for why this
    /// node may take its own check's word).
    pub checked: bool,
}

pub struct Attester {
    name: PublicKey,
    secret: SecretKey,
    attesting: Attesting,
    /// Every other member's mempool address.
    peers: Vec<SocketAddr>,
    network: SimpleSender,
    rx_batches: BudgetedReceiver<AttesterInput>,
    queue: CheckQueue,
    metrics: Arc<MempoolMetrics>,
}

impl Attester {
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        name: PublicKey,
        secret: SecretKey,
        attesting: Attesting,
        peers: Vec<SocketAddr>,
        network: SimpleSender,
        rx_batches: BudgetedReceiver<AttesterInput>,
        queue: CheckQueue,
        metrics: Arc<MempoolMetrics>,
    ) -> JoinHandle<()> {
        let attester = Attester {
            name,
            secret,
            attesting,
            peers,
            network,
            rx_batches,
            queue,
            metrics,
        };
        tokio::spawn(attester.run())
    }

    async fn run(mut self) {
        let flooding = (self.attesting.conduct == Conduct::Flooding).then(|| {
            tokio::spawn(flood(
                self.name,
                self.secret.clone(),
                self.attesting.table.limits().max_batch_txs,
                self.peers.clone(),
                self.network.clone(),
            ))
        });
        while let Some(input) = self.rx_batches.recv().await {
            let size = input.batch.bytes().len() as u64;
            self.attest(input).await;
            self.queue.done(size);
        }
        // The flood never ends on its own: it stops with the attester.
        if let Some(flood) = flooding {
            flood.abort();
        }
    }

    async fn attest(&mut self, input: AttesterInput) {
        let AttesterInput {
            batch,
            author,
            seq,
            checked,
        } = input;
        let conduct = self.attesting.conduct;
        if matches!(conduct, Conduct::Silent | Conduct::Flooding) {
            return;
        }
        let digest = batch.digest();
        let tx_count = batch.tx_count();
        let invalid = if checked {
            Vec::new()
        } else {
            let check = self.attesting.check.clone();
            // The check runs the verifier pool, which blocks its caller until it is done.
            match tokio::task::spawn_blocking(move || check(&batch)).await {
                Ok(invalid) => invalid,
                Err(e) => {
                    warn!("checking batch {digest} failed: {e}");
                    return;
                }
            }
        };
        MempoolMetrics::add(&self.metrics.attested_batches, 1);
        MempoolMetrics::add(&self.metrics.attested_invalid, invalid.len() as u64);
        let finding = Finding { tx_count, invalid };
        let own = Attestation::new(
            digest,
            author,
            seq,
            finding.clone(),
            self.name,
            &self.secret,
        );
        let stated = match conduct {
            Conduct::Lying => {
                Attestation::new(digest, author, seq, lie(finding), self.name, &self.secret)
            }
            Conduct::Honest | Conduct::Silent | Conduct::Flooding => own.clone(),
        };
        self.attesting.table.insert_own(own);
        let frame = MempoolMessage::encode_attestation(&stated);
        self.network.broadcast(self.peers.clone(), frame).await;
    }
}

/// A flooding member's statements name at most this many positions (4 MiB of them).
const FLOOD_POSITIONS_AT_MOST: u32 = 1 << 20;

/// `Conduct::Flooding`: statements for made-up batches (numbered 0, 1, ... in a sequence of this
/// member's own) naming it author and every position of the largest batch invalid, the largest
/// statement a peer keeps, to every peer without end. The sender drops what its queues cannot
/// hold, so the flood goes as fast as the connections take it; the yield lets this node's other
/// tasks run between statements.
async fn flood(
    name: PublicKey,
    secret: SecretKey,
    max_batch_txs: u32,
    peers: Vec<SocketAddr>,
    mut network: SimpleSender,
) {
    // Within the frame limit whatever the limits say (a table without a batch size takes any
    // count).
    let positions = max_batch_txs.min(FLOOD_POSITIONS_AT_MOST);
    let finding = Finding {
        tx_count: positions,
        invalid: (0..positions).collect(),
    };
    for seq in 0u64.. {
        let batch = Digest::of(&seq.to_le_bytes());
        let statement = Attestation::new(batch, name, seq, finding.clone(), name, &secret);
        let frame = MempoolMessage::encode_attestation(&statement);
        network.broadcast(peers.clone(), frame).await;
        tokio::task::yield_now().await;
    }
}

/// A finding that is never the true one: a clean batch gets its first transaction called
/// invalid, any other is called clean.
fn lie(finding: Finding) -> Finding {
    let invalid = if finding.invalid.is_empty() && finding.tx_count > 0 {
        vec![0]
    } else {
        Vec::new()
    };
    Finding {
        tx_count: finding.tx_count,
        invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lie_differs_from_the_truth_and_names_only_positions_of_the_batch() {
        for truth in [
            Finding {
                tx_count: 5,
                invalid: vec![],
            },
            Finding {
                tx_count: 5,
                invalid: vec![1, 3],
            },
        ] {
            let lie = lie(truth.clone());
            assert_ne!(lie, truth);
            assert!(lie.invalid.iter().all(|p| *p < lie.tx_count));
        }
    }
}
