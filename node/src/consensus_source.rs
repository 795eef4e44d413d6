//! The METRICS source of a replica's ordering half: HotStuff's and the mempool's counters, the
//! committee traffic of the process, and the seal-to-commit latencies of the interval. It lives
//! with the replica, not with the stages, so that the stages (and the client that runs them
//! standalone) need neither crate.

use hotstuff::ConsensusMetrics;
use mempool::MempoolMetrics;
use serde_json::json;
use stages::metrics::{Snapshot, Source};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// HotStuff's and the mempool's counters, and the seal-to-commit latencies of the interval.
pub struct ConsensusSource {
    pub consensus: Arc<ConsensusMetrics>,
    pub mempool: Arc<MempoolMetrics>,
}

impl Source for ConsensusSource {
    fn collect(&self, snapshot: &mut Snapshot) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        let state = self.consensus.snapshot();
        let mempool = &self.mempool;
        snapshot
            .section("consensus")
            .gauge("round", state.round as f64)
            .counter("committed_blocks", state.committed_blocks as f64)
            .counter("committed_batches", state.committed_batches as f64)
            .counter("committed_txs", state.committed_txs as f64)
            .counter("committed_bytes", state.committed_bytes as f64)
            .counter("timeouts", state.timeouts as f64)
            .counter("withheld_proposals", state.withheld_proposals as f64)
            .counter("checkpoints_adopted", state.checkpoints_adopted as f64)
            .gauge("checkpoint_round", state.checkpoint_round as f64)
            .counter("received_txs", load(&mempool.received_txs))
            .counter("unread_txs", load(&mempool.unread_txs))
            .counter("ingress_invalid_txs", load(&mempool.ingress_invalid_txs))
            .counter("sealed_batches", load(&mempool.sealed_batches))
            .counter("sealed_txs", load(&mempool.sealed_txs))
            .counter("sealed_bytes", load(&mempool.sealed_bytes))
            .counter("received_batches", load(&mempool.received_batches))
            .counter("rejected_frames", load(&mempool.rejected_frames))
            .counter("refused_batches", load(&mempool.refused_batches))
            .counter("backpressure_pauses", load(&mempool.backpressure_pauses))
            .counter("backpressure_ms", load(&mempool.backpressure_ms))
            .gauge("uncommitted_bytes", load(&mempool.uncommitted_bytes))
            .counter("attested_batches", load(&mempool.attested_batches))
            .counter("attested_invalid", load(&mempool.attested_invalid))
            .counter(
                "attestations_received",
                load(&mempool.attestations_received),
            )
            .counter("attestations_refused", load(&mempool.attestations_refused))
            .counter("released_unattested", load(&mempool.released_unattested))
            .counter("attesting_refused", load(&mempool.attesting_refused))
            .counter("attest_pauses", load(&mempool.attest_pauses))
            .gauge("attest_wait_ms", load(&mempool.attest_wait_ms))
            .counter("signatures_checked", hotstuff::signatures_checked() as f64)
            .counts(
                "timed_out_leaders",
                "leader",
                state
                    .timed_out_leaders
                    .iter()
                    .map(|(leader, count)| (leader.clone(), *count as f64))
                    .collect(),
            );
        let traffic = network::traffic();
        snapshot
            .section("network")
            .counter("sent_frames", traffic.sent_frames as f64)
            .counter("sent_bytes", traffic.sent_bytes as f64)
            .counter("received_frames", traffic.received_frames as f64)
            .counter("received_bytes", traffic.received_bytes as f64);
        if let Some(leader) = &state.leader {
            snapshot.section("consensus").text("leader", leader.clone());
        }
        if snapshot.takes_interval() {
            snapshot.top().json(
                "batch_latencies_ms",
                json!(self.consensus.drain_batch_latencies()),
            );
            if let Some(t_ms) = self.consensus.take_first_commit() {
                snapshot
                    .section("consensus")
                    .json("first_commit_ms", json!(t_ms));
            }
        }
    }
}
