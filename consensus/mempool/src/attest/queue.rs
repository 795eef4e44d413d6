//! How far this node's attester is behind: the bytes of batches waiting for it or being checked
//! (this node's own as it seals them, and the peers' it is named for).
//!
//! Attesting is a stage like the others and pushes back on the clients as they do: while the
//! attester holds more than `limit` bytes, the batch maker takes no client transactions (see
//! `batch_maker.rs`), exactly as when this node's uncommitted batches fill the backlog. Without
//! it, a node offered more than it can check kept sealing; its attester's queue grew to seconds
//! of work, statements came after the authors stopped waiting, the batches left uncertified and
//! every node checked them itself, on top of the attesters' work, which was then wasted: above
//! its capacity `attested` delivered less than `all`. The peers' batches wait in a channel
//! bounded in bytes as well, whose connections stop being read when it is full.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

#[derive(Clone)]
pub struct CheckQueue {
    inner: Arc<Inner>,
}

struct Inner {
    limit: u64,
    bytes: AtomicU64,
    /// Woken whenever bytes leave.
    drained: Notify,
}

impl CheckQueue {
    /// A queue that is behind at `limit` bytes.
    pub fn new(limit: u64) -> Self {
        CheckQueue {
            inner: Arc::new(Inner {
                limit,
                bytes: AtomicU64::new(0),
                drained: Notify::new(),
            }),
        }
    }

    /// A batch of `bytes` is handed to the attester.
    pub fn added(&self, bytes: u64) {
        self.inner.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    /// The attester is done with a batch of `bytes` (checked, or dropped).
    pub fn done(&self, bytes: u64) {
        let _ = self
            .inner
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(held.saturating_sub(bytes))
            });
        self.inner.drained.notify_waiters();
    }

    pub fn bytes(&self) -> u64 {
        self.inner.bytes.load(Ordering::Acquire)
    }

    pub fn is_behind(&self) -> bool {
        self.bytes() >= self.inner.limit
    }

    /// Returns once the attester is no longer behind.
    pub async fn caught_up(&self) {
        loop {
            let drained = self.inner.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if !self.is_behind() {
                return;
            }
            drained.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn behind_at_its_limit_and_caught_up_once_the_checks_drain_it() {
        let queue = CheckQueue::new(100);
        queue.added(60);
        assert!(!queue.is_behind());
        queue.added(60);
        assert!(queue.is_behind());
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move { queue.caught_up().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        queue.done(60);
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("caught up")
            .expect("the waiter ran");
        assert_eq!(queue.bytes(), 60);
        // More done than added (never by the attester) does not wrap around.
        queue.done(1_000);
        assert_eq!(queue.bytes(), 0);
    }
}
