//! Turns committed blocks into committed batches: the crate's one output.

use crate::error::FatalError;
use crate::messages::Block;
use crate::metrics::ConsensusMetrics;
use crate::payload::gc::{GcWindow, RecentlyCommitted, Recorded};
use batch::{Batch, CommittedBatch};
use bytes::Bytes;
use checkpoint::CheckpointSlot;
use checkpoint::PipelineProgress;
use config::Round;
use crypto::Digest;
use crypto::Hash;
use mempool::ConsensusMempoolMessage;
use plumbing::clock;
use plumbing::metered::MeteredSender;
use plumbing::now_ms;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use store::{BatchStore, Store};
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

/// What the core hands the committer, in commit order.
#[derive(Debug)]
pub enum ToCommitter {
    /// A block that committed: its batches go to the application.
    Commit(Block),
    /// A block that committed at or below a checkpoint the core took as its root (adopted from
    /// peers, or our own after a restart): the application has its effects in the checkpoint's
    /// state. Its batches are recorded as committed and collected like delivered ones, never
    /// delivered; otherwise they would stay in the store for good.
    Skipped(Block),
}

pub struct Committer {
    store: BatchStore,
    rx_commit: mpsc::Receiver<ToCommitter>,
    tx_output: MeteredSender<CommittedBatch>,
    metrics: Arc<ConsensusMetrics>,
    /// Batches delivered and not yet garbage-collected.
    delivered: RecentlyCommitted,
    /// The round up to which every peer holds the committed chain (see `PeerRounds`).
    held_by_all: watch::Receiver<Round>,
    /// Counts the bytes handed out, against what the application applied.
    progress: Arc<PipelineProgress>,
    /// The application's latest checkpoint: batches after it are kept (see `hold_above`).
    /// `None`: an application that never checkpoints (tests of the committer alone).
    checkpoints: Option<CheckpointSlot>,
    /// Where a batch the committer cannot read stops the node (see `FatalError::LostBatch`).
    tx_fatal: watch::Sender<Option<FatalError>>,
    /// Where a batch missing from the store is asked for (see `fetch`).
    tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    /// How long a missing batch is waited for before the node stops.
    patience: Duration,
}

/// What the committer needs besides its channels.
pub struct CommitterLinks {
    pub held_by_all: watch::Receiver<Round>,
    pub progress: Arc<PipelineProgress>,
    pub checkpoints: Option<CheckpointSlot>,
    pub tx_fatal: watch::Sender<Option<FatalError>>,
    /// The mempool, which fetches a batch of a committed block missing here from peers.
    pub tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    /// How long such a batch is waited for before the node stops (`FatalError::LostBatch`).
    pub patience: Duration,
}

impl Committer {
    pub fn spawn(
        store: Store,
        window: GcWindow,
        rx_commit: mpsc::Receiver<ToCommitter>,
        tx_output: MeteredSender<CommittedBatch>,
        metrics: Arc<ConsensusMetrics>,
        links: CommitterLinks,
    ) {
        let committer = Committer {
            store: store.batches(),
            rx_commit,
            tx_output,
            metrics,
            delivered: RecentlyCommitted::new(window),
            held_by_all: links.held_by_all,
            progress: links.progress,
            checkpoints: links.checkpoints,
            tx_fatal: links.tx_fatal,
            tx_mempool: links.tx_mempool,
            patience: links.patience,
        };
        tokio::spawn(committer.run());
    }

    async fn run(mut self) {
        while let Some(input) = self.rx_commit.recv().await {
            let block = match input {
                ToCommitter::Commit(block) => block,
                ToCommitter::Skipped(block) => {
                    self.skip(&block);
                    continue;
                }
            };
            let digest = block.digest();
            // Each batch leaves once the next one is ready, so the last can carry `last_of_block`.
            let mut ready: Option<CommittedBatch> = None;
            // Bytes of the batches delivered for this block, for the window's budget.
            let mut block_bytes = 0;
            for batch in &block.payload {
                // Delivered once within the round window: by an earlier block, or earlier in
                // this one. The core rejects such proposals; this guards blocks it accepted
                // before it knew (a node that catches up checks against what it has committed
                // so far). Past the window, a batch proposed again is delivered again, by every
                // node alike (see `RecentlyCommitted::record`): transactions replayed so are
                // the application's to refuse (a nonce used already).
                if self.delivered.record(*batch, digest, block.round) == Recorded::Repeat {
                    warn!(
                        "batch {batch} of {:?} was already committed; skipped",
                        block
                    );
                    continue;
                }
                // The core stores a block only once its batches are stored, and committed
                // batches are deleted only after they were delivered and the application
                // checkpointed past them. A batch missing here was lost (a machine crash loses
                // batch records not yet written back) or drained by the mempool while its block
                // was on its way to commit (see `fetch`): it is fetched from peers. Skipping it
                // would make this node's state differ from its peers' for good, and waiting
                // without end would hang: if no peer sends it in time, the node stops, saying
                // why.
                let lost = |reason: String| FatalError::LostBatch {
                    batch: *batch,
                    block: digest,
                    round: block.round,
                    reason,
                };
                let bytes = match self.store.read(batch) {
                    Ok(Some(bytes)) => Ok(bytes),
                    Ok(None) => self.fetch(batch, &block).await,
                    Err(e) => Err(format!("it cannot be read: {e}")),
                };
                let read = bytes.map_err(&lost).and_then(|bytes| {
                    Batch::stored(bytes, *batch)
                        .map_err(|e| lost(format!("its stored copy is malformed: {e}")))
                });
                let batch = match read {
                    Ok(batch) => batch,
                    Err(fatal) => {
                        error!("{fatal}");
                        let _ = self.tx_fatal.send(Some(fatal));
                        return;
                    }
                };
                let now = now_ms();
                block_bytes += batch.bytes().len() as u64;
                self.progress.delivered(batch.bytes().len() as u64);
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
                    block: digest,
                    last_of_block: false,
                    batch,
                    committed_at_ms: now,
                };
                if let Some(previous) = ready.replace(committed) {
                    if self.tx_output.send(previous).await.is_err() {
                        info!("committed-batch consumer is gone; committer stops");
                        return;
                    }
                }
            }
            let last = match ready {
                Some(mut last) => {
                    last.last_of_block = true;
                    last
                }
                None => CommittedBatch::empty_block(block.round, digest, now_ms()),
            };
            if self.tx_output.send(last).await.is_err() {
                info!("committed-batch consumer is gone; committer stops");
                return;
            }
            self.delivered.close_block(digest, block.round, block_bytes);
            self.garbage_collect(block.round);
        }
    }

    /// A batch of committed `block` that is not in the store, asked of peers (the block's author
    /// first) through the mempool and awaited for `patience`. The peers that voted for the
    /// block stored it before voting, and keep it for the GC window. Two ways it goes missing
    /// here: a machine crash lost its record, or the mempool drained it as a batch no stored
    /// block named (`mempool::AuthorQuota`) just as the core stored this block, the two being
    /// separate tasks.
    async fn fetch(&self, batch: &Digest, block: &Block) -> Result<Bytes, String> {
        warn!(
            "batch {batch} of committed {:?} is not in the store; asking peers",
            block
        );
        let request = ConsensusMempoolMessage::Synchronize(vec![*batch], block.author, block.round);
        if self.tx_mempool.send(request).await.is_err() {
            return Err("it is not in the store, and no mempool runs to fetch it".into());
        }
        match clock::timeout(self.patience, self.store.notify_read(*batch)).await {
            Ok(Ok(bytes)) => {
                info!("batch {batch} arrived from a peer");
                Ok(bytes)
            }
            Ok(Err(e)) => Err(format!("it cannot be read: {e}")),
            Err(_) => Err(format!(
                "it is not in the store, and no peer sent it within {} ms",
                self.patience.as_millis()
            )),
        }
    }

    /// Records the batches of a block the application got through a checkpoint, for collection.
    fn skip(&mut self, block: &Block) {
        let digest = block.digest();
        for batch in &block.payload {
            self.delivered.record(*batch, digest, block.round);
        }
        // Their bytes are not counted: they were never delivered, and reading them to count
        // would cost a read of each from disk.
        self.delivered.close_block(digest, block.round, 0);
        self.garbage_collect(block.round);
    }

    /// Drops batches committed outside the GC window, or outside its round window once every
    /// peer holds them: every stage behind consensus got them already, and lagging peers had
    /// the window to fetch them.
    fn garbage_collect(&mut self, round: Round) {
        if let Some(checkpoints) = &self.checkpoints {
            let floor = checkpoints.latest().map_or(0, |c| c.round);
            self.delivered.hold_above(floor);
        }
        let mut expired = self.delivered.expire(round);
        let held_by_all = *self.held_by_all.borrow();
        expired.extend(self.delivered.free(round, held_by_all));
        if expired.is_empty() {
            return;
        }
        self.store.remove_in_background(&expired);
    }
}

#[cfg(test)]
mod tests;
