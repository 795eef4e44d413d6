//! Counters the mempool keeps for the node's METRICS lines. All cumulative since start.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct MempoolMetrics {
    /// Transactions read from clients, counted as each chunk of them is handed to the batch
    /// maker: received minus sealed is what the mempool holds (the audit counts on it when a
    /// node falls behind).
    pub received_txs: AtomicU64,
    /// Transactions that were in a client connection when the node stopped (the frame it held
    /// while waiting for room in the queue, its read buffer, what the client had written and
    /// the node read to the end of the stream) and were never handed to the batch maker. Zero
    /// until the node stops; then what clients sent beyond received and unread never reached
    /// this node.
    pub unread_txs: AtomicU64,
    /// Of `received_txs`, those the ingress check found invalid (malformed or badly signed)
    /// and dropped before they were sealed.
    pub ingress_invalid_txs: AtomicU64,
    /// Batches this node sealed.
    pub sealed_batches: AtomicU64,
    /// Transactions in the batches this node sealed.
    pub sealed_txs: AtomicU64,
    /// Transaction bytes in the batches this node sealed (without the batch framing).
    pub sealed_bytes: AtomicU64,
    /// Valid batches received from peers (including answers to our requests).
    pub received_batches: AtomicU64,
    /// Malformed batches and undecodable messages on the mempool port.
    pub rejected_frames: AtomicU64,
    /// Batches refused because their sender already had `max_uncommitted_batches_per_author`
    /// uncommitted batches stored here.
    pub refused_batches: AtomicU64,
    /// Times the batch maker stopped taking transactions because this node's sealed,
    /// uncommitted batches reached `max_uncommitted_bytes`, and the ms it spent stopped: the
    /// back-pressure its clients felt.
    pub backpressure_pauses: AtomicU64,
    pub backpressure_ms: AtomicU64,
    /// Gauge: bytes of this node's sealed, uncommitted batches (see `Backlog`).
    pub uncommitted_bytes: AtomicU64,
    /// `--verify=attested`: batches this node checked and stated the result of, and the
    /// invalid transactions it found in them.
    pub attested_batches: AtomicU64,
    pub attested_invalid: AtomicU64,
    /// Peers' statements kept, and refused (bad signature, not an attester of the batch).
    pub attestations_received: AtomicU64,
    pub attestations_refused: AtomicU64,
    /// This node's batches handed to consensus without f+1 matching statements (an attester
    /// was silent or disagreed past the wait): every node checks those itself.
    pub released_unattested: AtomicU64,
    /// Peers' batches this node would attest but did not: their author's uncommitted batches
    /// attested here reached its attesting bytes (see `AuthorQuota::charge_attesting`).
    pub attesting_refused: AtomicU64,
    /// Of `backpressure_pauses`, the times the batch maker stopped because this node's attester
    /// was behind (see `attest::CheckQueue`).
    pub attest_pauses: AtomicU64,
    /// Gauge: how long this node's batches wait for their statements now, in ms (adapted to the
    /// committee's statement delays, see `attest::StatementDelays`).
    pub attest_wait_ms: AtomicU64,
}

impl MempoolMetrics {
    /// Relaxed: the counters are independent totals read for reporting, never to synchronize.
    pub(crate) fn add(counter: &AtomicU64, value: u64) {
        counter.fetch_add(value, Ordering::Relaxed);
    }
}
