//! Counters the node reads once per interval for its METRICS line.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default, Debug)]
pub struct ConsensusMetrics {
    pub round: AtomicU64,
    pub committed_blocks: AtomicU64,
    pub committed_batches: AtomicU64,
    pub committed_txs: AtomicU64,
    pub committed_bytes: AtomicU64,
    pub timeouts: AtomicU64,
    /// Checkpoints adopted from peers (state sync), and the round of the last one.
    pub checkpoints_adopted: AtomicU64,
    pub checkpoint_round: AtomicU64,
    /// Seal-to-commit latency (ms) of batches committed since the last drain.
    batch_latencies_ms: Mutex<Vec<f64>>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ConsensusSnapshot {
    pub round: u64,
    pub committed_blocks: u64,
    pub committed_batches: u64,
    pub committed_txs: u64,
    pub committed_bytes: u64,
    pub timeouts: u64,
    pub checkpoints_adopted: u64,
    pub checkpoint_round: u64,
}

impl ConsensusMetrics {
    pub fn record_batch_latency(&self, ms: f64) {
        if let Ok(mut latencies) = self.batch_latencies_ms.lock() {
            latencies.push(ms);
        }
    }

    pub fn drain_batch_latencies(&self) -> Vec<f64> {
        self.batch_latencies_ms
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    pub fn snapshot(&self) -> ConsensusSnapshot {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ConsensusSnapshot {
            round: load(&self.round),
            committed_blocks: load(&self.committed_blocks),
            committed_batches: load(&self.committed_batches),
            committed_txs: load(&self.committed_txs),
            committed_bytes: load(&self.committed_bytes),
            timeouts: load(&self.timeouts),
            checkpoints_adopted: load(&self.checkpoints_adopted),
            checkpoint_round: load(&self.checkpoint_round),
        }
    }
}
