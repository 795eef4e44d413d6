//! Checks the batches this node attests (its own as it seals them, the peers' it is named for
//! as they arrive), signs what it found and sends the statement to every other member.
//!
//! Batches wait in a channel bounded in bytes; the batch maker and the peers' connections wait
//! for room, so a node whose checks fall behind slows its clients and the authors that send it
//! batches, rather than skipping statements (which would only make every node check the batch).

use super::{Attestation, Attesting};
use crate::message::MempoolMessage;
use crate::metrics::MempoolMetrics;
use batch::Batch;
use crypto::{PublicKey, SecretKey};
use network::SimpleSender;
use plumbing::budgeted::BudgetedReceiver;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tracing::warn;

/// A batch to check, and its author (the first of its attesters).
pub struct AttesterInput {
    pub batch: Batch,
    pub author: PublicKey,
}

pub struct Attester {
    name: PublicKey,
    secret: SecretKey,
    attesting: Attesting,
    /// Every other member's mempool address.
    peers: Vec<SocketAddr>,
    network: SimpleSender,
    rx_batches: BudgetedReceiver<AttesterInput>,
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
        metrics: Arc<MempoolMetrics>,
    ) -> JoinHandle<()> {
        let attester = Attester {
            name,
            secret,
            attesting,
            peers,
            network,
            rx_batches,
            metrics,
        };
        tokio::spawn(attester.run())
    }

    async fn run(mut self) {
        while let Some(AttesterInput { batch, author }) = self.rx_batches.recv().await {
            let digest = batch.digest();
            let check = self.attesting.check.clone();
            // The check runs the verifier pool, which blocks its caller until it is done.
            let invalid = match tokio::task::spawn_blocking(move || check(&batch)).await {
                Ok(invalid) => invalid,
                Err(e) => {
                    warn!("checking batch {digest} failed: {e}");
                    continue;
                }
            };
            MempoolMetrics::add(&self.metrics.attested_batches, 1);
            MempoolMetrics::add(&self.metrics.attested_invalid, invalid.len() as u64);
            let statement = Attestation::new(digest, author, invalid, self.name, &self.secret);
            self.attesting
                .table
                .insert_own(digest, statement.invalid.clone());
            let frame = MempoolMessage::encode_attestation(&statement);
            self.network.broadcast(self.peers.clone(), frame).await;
        }
    }
}
