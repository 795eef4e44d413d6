//! Turns committed blocks into committed batches: the crate's one output.

use super::messages::Block;
use super::metrics::ConsensusMetrics;
use crate::config::Round;
use crate::mempool::batch::{now_ms, Batch};
use crate::metered::MeteredSender;
use crate::store::{BatchStore, Store};
use crypto::Digest;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::{info, warn};

/// A batch of a committed block, in commit order.
#[derive(Clone, Debug)]
pub struct CommittedBatch {
    pub round: Round,
    pub batch: Batch,
    pub committed_at_ms: u64,
}

pub struct Committer {
    store: BatchStore,
    gc_depth: Round,
    rx_commit: mpsc::Receiver<Block>,
    tx_output: MeteredSender<CommittedBatch>,
    metrics: Arc<ConsensusMetrics>,
    /// (round, batch digests) of committed blocks not yet garbage-collected.
    delivered: VecDeque<(Round, Vec<Digest>)>,
}

impl Committer {
    pub fn spawn(
        store: Store,
        gc_depth: Round,
        rx_commit: mpsc::Receiver<Block>,
        tx_output: MeteredSender<CommittedBatch>,
        metrics: Arc<ConsensusMetrics>,
    ) {
        let committer = Committer {
            store: store.batches(),
            gc_depth,
            rx_commit,
            tx_output,
            metrics,
            delivered: VecDeque::new(),
        };
        tokio::spawn(committer.run());
    }

    async fn run(mut self) {
        while let Some(block) = self.rx_commit.recv().await {
            for digest in &block.payload {
                // The core votes only for blocks whose batches are stored, so this resolves at
                // once; waiting instead of failing keeps the order even if that ever changes.
                let Ok(bytes) = self.store.notify_read(*digest).await else {
                    warn!("batch {digest} of committed block {:?} vanished", block);
                    continue;
                };
                let batch = match Batch::parse_with_digest(bytes, *digest) {
                    Ok(batch) => batch,
                    Err(e) => {
                        warn!("stored batch {digest} is malformed: {e}");
                        continue;
                    }
                };
                let now = now_ms();
                self.metrics
                    .record_batch_latency(now.saturating_sub(batch.sealed_at_ms()) as f64);
                self.metrics
                    .committed_batches
                    .fetch_add(1, Ordering::Relaxed);
                self.metrics
                    .committed_txs
                    .fetch_add(batch.tx_count() as u64, Ordering::Relaxed);
                self.metrics
                    .committed_bytes
                    .fetch_add(batch.bytes().len() as u64, Ordering::Relaxed);
                let committed = CommittedBatch {
                    round: block.round,
                    batch,
                    committed_at_ms: now,
                };
                if self.tx_output.send(committed).await.is_err() {
                    info!("committed-batch consumer is gone; committer stops");
                    return;
                }
            }
            self.delivered.push_back((block.round, block.payload));
            self.garbage_collect(block.round);
        }
    }

    /// Drops batches committed more than `gc_depth` rounds ago: every stage behind consensus
    /// got them already, and lagging peers had `gc_depth` rounds to fetch them.
    fn garbage_collect(&mut self, round: Round) {
        while let Some((r, _)) = self.delivered.front() {
            if r + self.gc_depth >= round {
                break;
            }
            if let Some((_, digests)) = self.delivered.pop_front() {
                if let Err(e) = self.store.remove(&digests) {
                    warn!("cannot collect {} batches: {e}", digests.len());
                }
            }
        }
    }
}
