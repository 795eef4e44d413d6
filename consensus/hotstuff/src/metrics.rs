//! Counters the node reads once per interval for its METRICS line.

use crypto::PublicKey;
use serde::Serialize;
use std::collections::BTreeMap;
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
    /// Blocks this node proposed without batches because its application was more than
    /// `max_unexecuted_bytes` behind.
    pub withheld_proposals: AtomicU64,
    /// Checkpoints adopted from peers (state sync), and the round of the last one.
    pub checkpoints_adopted: AtomicU64,
    pub checkpoint_round: AtomicU64,
    /// Batch digests this node put in its proposals (kept out of the METRICS line; tests watch
    /// it to cut a node off right after it proposed).
    pub proposed_batches: AtomicU64,
    /// Seal-to-commit latency (ms) of batches committed since the last drain.
    batch_latencies_ms: Mutex<Vec<f64>>,
    /// Wall time (ms since the epoch) of the first commit since the last drain; 0: none. When
    /// commits resumed after a stall, to the ms, though lines come once a second.
    first_commit_ms: AtomicU64,
    /// The leader of the current round as this node sees it (short name), if it can tell.
    leader: Mutex<Option<String>>,
    /// This node's timeouts, by the leader of the round that timed out (short name; `?` when
    /// it could not tell who led).
    timed_out_leaders: Mutex<BTreeMap<String, u64>>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ConsensusSnapshot {
    pub round: u64,
    pub committed_blocks: u64,
    pub committed_batches: u64,
    pub committed_txs: u64,
    pub committed_bytes: u64,
    pub timeouts: u64,
    pub withheld_proposals: u64,
    pub checkpoints_adopted: u64,
    pub checkpoint_round: u64,
    pub leader: Option<String>,
    pub timed_out_leaders: BTreeMap<String, u64>,
}

impl ConsensusMetrics {
    pub fn record_batch_latency(&self, ms: f64) {
        if let Ok(mut latencies) = self.batch_latencies_ms.lock() {
            latencies.push(ms);
        }
    }

    /// A block committed at `now_ms`.
    pub fn record_commit(&self, now_ms: u64) {
        let _ =
            self.first_commit_ms
                .compare_exchange(0, now_ms, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The time of the first commit since the last call, if any.
    pub fn take_first_commit(&self) -> Option<u64> {
        Some(self.first_commit_ms.swap(0, Ordering::Relaxed)).filter(|t| *t > 0)
    }

    pub fn drain_batch_latencies(&self) -> Vec<f64> {
        self.batch_latencies_ms
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }

    pub fn set_leader(&self, leader: Option<PublicKey>) {
        if let Ok(mut current) = self.leader.lock() {
            *current = leader.map(|name| name.to_string());
        }
    }

    pub fn record_timeout(&self, leader: Option<PublicKey>) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
        let name = leader.map_or_else(|| "?".to_string(), |name| name.to_string());
        if let Ok(mut counts) = self.timed_out_leaders.lock() {
            *counts.entry(name).or_default() += 1;
        }
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
            withheld_proposals: load(&self.withheld_proposals),
            checkpoints_adopted: load(&self.checkpoints_adopted),
            checkpoint_round: load(&self.checkpoint_round),
            leader: self.leader.lock().map(|l| l.clone()).unwrap_or_default(),
            timed_out_leaders: self
                .timed_out_leaders
                .lock()
                .map(|c| c.clone())
                .unwrap_or_default(),
        }
    }
}
