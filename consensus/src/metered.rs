//! Bounded channels that record how full they get and how long senders wait.
//!
//! Every channel between pipeline stages is one of these, so a run can say which stage holds the
//! others back: a channel that is often full (and a sender often blocked on it) sits in front of
//! the bottleneck.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
pub use tokio::sync::mpsc::error::SendError;

#[derive(Debug)]
pub struct ChannelMetrics {
    capacity: u64,
    sent: AtomicU64,
    full: AtomicU64,
    blocked_ns: AtomicU64,
    // Queue length sampled at every send, reset by each snapshot.
    len_sum: AtomicU64,
    len_samples: AtomicU64,
    len_max: AtomicU64,
}

/// One interval's view of a channel, as reported in the METRICS lines.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChannelSnapshot {
    pub capacity: u64,
    pub sent: u64,
    pub full: u64,
    pub blocked_ms: f64,
    pub mean_len: f64,
    pub max_len: u64,
}

impl ChannelMetrics {
    fn new(capacity: usize) -> Self {
        ChannelMetrics {
            capacity: capacity as u64,
            sent: AtomicU64::new(0),
            full: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            len_sum: AtomicU64::new(0),
            len_samples: AtomicU64::new(0),
            len_max: AtomicU64::new(0),
        }
    }

    fn record_len(&self, len: u64) {
        self.len_sum.fetch_add(len, Ordering::Relaxed);
        self.len_samples.fetch_add(1, Ordering::Relaxed);
        self.len_max.fetch_max(len, Ordering::Relaxed);
    }

    /// Cumulative counters plus the mean and max queue length since the previous snapshot.
    pub fn snapshot(&self) -> ChannelSnapshot {
        let sum = self.len_sum.swap(0, Ordering::Relaxed);
        let samples = self.len_samples.swap(0, Ordering::Relaxed);
        let max = self.len_max.swap(0, Ordering::Relaxed);
        ChannelSnapshot {
            capacity: self.capacity,
            sent: self.sent.load(Ordering::Relaxed),
            full: self.full.load(Ordering::Relaxed),
            blocked_ms: self.blocked_ns.load(Ordering::Relaxed) as f64 / 1e6,
            mean_len: if samples == 0 {
                0.0
            } else {
                sum as f64 / samples as f64
            },
            max_len: max,
        }
    }
}

pub struct MeteredSender<T> {
    inner: mpsc::Sender<T>,
    metrics: Arc<ChannelMetrics>,
}

impl<T> Clone for MeteredSender<T> {
    fn clone(&self) -> Self {
        MeteredSender {
            inner: self.inner.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

pub type MeteredReceiver<T> = mpsc::Receiver<T>;

pub fn channel<T>(capacity: usize) -> (MeteredSender<T>, MeteredReceiver<T>, Arc<ChannelMetrics>) {
    let (tx, rx) = mpsc::channel(capacity);
    let metrics = Arc::new(ChannelMetrics::new(capacity));
    (
        MeteredSender {
            inner: tx,
            metrics: metrics.clone(),
        },
        rx,
        metrics,
    )
}

impl<T> MeteredSender<T> {
    fn len(&self) -> u64 {
        (self.inner.max_capacity() - self.inner.capacity()) as u64
    }

    /// The non-blocking part shared by both send paths: records the queue length and tries to
    /// send. `Ok(None)`: sent. `Ok(Some(item))`: the channel was full (counted); the caller
    /// waits with its own kind of blocking and reports the wait to `finish_blocked`.
    fn try_fast(&self, item: T) -> Result<Option<T>, SendError<T>> {
        self.metrics.record_len(self.len());
        match self.inner.try_send(item) {
            Ok(()) => {
                self.metrics.sent.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            }
            Err(mpsc::error::TrySendError::Closed(item)) => Err(SendError(item)),
            Err(mpsc::error::TrySendError::Full(item)) => {
                self.metrics.full.fetch_add(1, Ordering::Relaxed);
                Ok(Some(item))
            }
        }
    }

    fn finish_blocked(
        &self,
        start: Instant,
        result: Result<(), SendError<T>>,
    ) -> Result<(), SendError<T>> {
        self.metrics
            .blocked_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if result.is_ok() {
            self.metrics.sent.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Sends, waiting while the channel is full; the wait is what `blocked_ms` adds up.
    pub async fn send(&self, item: T) -> Result<(), SendError<T>> {
        let Some(item) = self.try_fast(item)? else {
            return Ok(());
        };
        let start = Instant::now();
        let result = self.inner.send(item).await;
        self.finish_blocked(start, result)
    }

    /// The same, for stages that run on their own OS thread rather than in the runtime.
    pub fn blocking_send(&self, item: T) -> Result<(), SendError<T>> {
        let Some(item) = self.try_fast(item)? else {
            return Ok(());
        };
        let start = Instant::now();
        let result = self.inner.blocking_send(item);
        self.finish_blocked(start, result)
    }

    pub fn metrics(&self) -> &Arc<ChannelMetrics> {
        &self.metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn counts_sends_fullness_and_blocking() {
        let (tx, mut rx, metrics) = channel::<u32>(2);
        tx.send(1).await.expect("send");
        tx.send(2).await.expect("send");
        // The third send finds the channel full and waits until the receiver takes one.
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(3).await }
        });
        tokio::time::timeout(Duration::from_secs(5), async {
            while metrics.full.load(Ordering::Relaxed) == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("sender saw a full channel");
        assert_eq!(rx.recv().await, Some(1));
        blocked.await.expect("task").expect("send");
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.sent, 3);
        assert_eq!(snapshot.full, 1);
        assert_eq!(snapshot.capacity, 2);
        assert_eq!(snapshot.max_len, 2);
        assert!((snapshot.mean_len - 1.0).abs() < 1e-9, "{snapshot:?}");
        // Interval fields reset, cumulative ones do not.
        let next = metrics.snapshot();
        assert_eq!(next.max_len, 0);
        assert_eq!(next.sent, 3);
    }
}
