//! This node's own batches that are sealed and not yet committed, in bytes: what the mempool's
//! admission back-pressure reads.
//!
//! Without a bound, a node offered more than the committee can order keeps sealing batches that
//! wait, in its own store and in every peer's, for a block that names them. Memory grows by the
//! excess rate, fresh memory costs the kernel page faults and zeroing, rounds slow down, blocks
//! grow, and a node that fell behind spends more CPU per transaction than one that kept up: it
//! never catches up. With the bound, the batch maker stops taking client transactions once this
//! node's uncommitted batches reach `limit` bytes; its queue from the clients' port fills, the
//! port stops reading, and the clients' writes block (each client counts the bursts it could not
//! send in time). What waits is then bounded by the limit, and latency by the limit over the
//! committee's throughput.
//!
//! A batch leaves the backlog when a block that names it commits, or when it is given up (it
//! could not reach a quorum). Shared by the batch maker (which seals and waits for room), the
//! quorum waiter and the synchronizer (which hears of commits).

use super::metrics::MempoolMetrics;
use crypto::Digest;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

#[derive(Clone)]
pub struct Backlog {
    inner: Arc<Inner>,
}

struct Inner {
    limit: u64,
    state: Mutex<State>,
    /// Woken whenever bytes leave the backlog.
    room: Notify,
    /// Where the backlog's size is published (`uncommitted_bytes`).
    metrics: Arc<MempoolMetrics>,
}

#[derive(Default)]
struct State {
    bytes: u64,
    batches: HashMap<Digest, u64>,
}

impl Backlog {
    /// A backlog that is full at `limit` bytes.
    pub fn new(limit: u64, metrics: Arc<MempoolMetrics>) -> Self {
        Backlog {
            inner: Arc::new(Inner {
                limit,
                state: Mutex::default(),
                room: Notify::new(),
                metrics,
            }),
        }
    }

    fn publish(&self, bytes: u64) {
        self.inner
            .metrics
            .uncommitted_bytes
            .store(bytes, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A batch of `bytes` was sealed; it counts until it commits or is given up.
    pub fn sealed(&self, digest: Digest, bytes: u64) {
        let mut state = self.lock();
        if state.batches.insert(digest, bytes).is_none() {
            state.bytes += bytes;
            self.publish(state.bytes);
        }
    }

    /// These batches committed or were given up (digests not counted here are ignored: other
    /// authors' batches, or ours committed twice).
    pub fn settled(&self, digests: &[Digest]) {
        let mut state = self.lock();
        let before = state.bytes;
        for digest in digests {
            if let Some(bytes) = state.batches.remove(digest) {
                state.bytes -= bytes;
            }
        }
        let (freed, now) = (state.bytes < before, state.bytes);
        drop(state);
        if freed {
            self.publish(now);
            self.inner.room.notify_waiters();
        }
    }

    /// Bytes of this node's sealed, uncommitted batches.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    pub fn is_full(&self) -> bool {
        self.bytes() >= self.inner.limit
    }

    /// Resolves once the backlog is below its limit.
    pub async fn room(&self) {
        loop {
            // Registered before the check, so a settlement between the two is not missed.
            let notified = self.inner.room.notified();
            if !self.is_full() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn d(i: u8) -> Digest {
        Digest([i; 32])
    }

    #[tokio::test]
    async fn full_at_the_limit_and_room_once_a_batch_settles() {
        let metrics = Arc::new(MempoolMetrics::default());
        let backlog = Backlog::new(1_000, metrics.clone());
        backlog.sealed(d(1), 600);
        assert!(!backlog.is_full());
        backlog.sealed(d(2), 400);
        // Sealing the same batch twice counts it once.
        backlog.sealed(d(2), 400);
        assert_eq!(backlog.bytes(), 1_000);
        assert!(backlog.is_full());

        let waiter = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        // Unknown digests (other authors' batches) change nothing.
        backlog.settled(&[d(9)]);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        backlog.settled(&[d(1)]);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("room once a batch settles")
            .expect("waiter");
        assert_eq!(backlog.bytes(), 400);
        assert_eq!(metrics.uncommitted_bytes.load(Ordering::Relaxed), 400);
        // Settling again is harmless.
        backlog.settled(&[d(1), d(2)]);
        assert_eq!(backlog.bytes(), 0);
    }
}
