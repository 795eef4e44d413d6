//! Bounded channels that record how full they get and how long senders wait.
//!
//! Every channel between pipeline stages is one of these, so a run can say which stage holds the
//! others back: a channel that is often full (and a sender often blocked on it) sits in front of
//! the bottleneck.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc;
pub use tokio::sync::mpsc::error::SendError;

#[derive(Debug)]
pub struct ChannelMetrics {
    capacity: u64,
    sent: AtomicU64,
    full: AtomicU64,
    blocked_ns: AtomicU64,
    // Queue length sampled at every send: cumulative, so any number of readers can difference
    // them (a scrape as well as the METRICS line).
    len_sum: AtomicU64,
    len_samples: AtomicU64,
    // The largest length since the last interval was taken, and where that interval began.
    len_max: AtomicU64,
    interval_start: Mutex<(u64, u64)>,
}

/// The cumulative counters of a channel.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChannelSnapshot {
    pub capacity: u64,
    pub sent: u64,
    pub full: u64,
    pub blocked_ms: f64,
    /// Sum of the queue lengths seen by each send, and how many sends saw one: their rates give
    /// the mean queue length over any window.
    pub len_sum: u64,
    pub len_samples: u64,
}

/// The queue length over one interval, as the METRICS line reports it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChannelInterval {
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
            interval_start: Mutex::new((0, 0)),
        }
    }

    fn record_len(&self, len: u64) {
        self.len_sum.fetch_add(len, Ordering::Relaxed);
        self.len_samples.fetch_add(1, Ordering::Relaxed);
        self.len_max.fetch_max(len, Ordering::Relaxed);
    }

    /// Cumulative counters; reading them changes nothing.
    pub fn snapshot(&self) -> ChannelSnapshot {
        ChannelSnapshot {
            capacity: self.capacity,
            sent: self.sent.load(Ordering::Relaxed),
            full: self.full.load(Ordering::Relaxed),
            blocked_ms: self.blocked_ns.load(Ordering::Relaxed) as f64 / 1e6,
            len_sum: self.len_sum.load(Ordering::Relaxed),
            len_samples: self.len_samples.load(Ordering::Relaxed),
        }
    }

    /// Mean and maximum queue length since the previous call, which starts the next interval.
    /// One reader (the METRICS line) owns the intervals.
    pub fn take_interval(&self) -> ChannelInterval {
        let sum = self.len_sum.load(Ordering::Relaxed);
        let samples = self.len_samples.load(Ordering::Relaxed);
        let max_len = self.len_max.swap(0, Ordering::Relaxed);
        let (start_sum, start_samples) = match self.interval_start.lock() {
            Ok(mut start) => std::mem::replace(&mut *start, (sum, samples)),
            Err(_) => (sum, samples),
        };
        let samples = samples.saturating_sub(start_samples);
        ChannelInterval {
            mean_len: if samples == 0 {
                0.0
            } else {
                sum.saturating_sub(start_sum) as f64 / samples as f64
            },
            max_len,
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
        // Lengths 0, 1, 2 seen by the three sends.
        assert_eq!((snapshot.len_sum, snapshot.len_samples), (3, 3));
        // Reading the counters takes nothing from the interval.
        assert_eq!(metrics.snapshot(), snapshot);
        let interval = metrics.take_interval();
        assert_eq!(interval.max_len, 2);
        assert!((interval.mean_len - 1.0).abs() < 1e-9, "{interval:?}");
        // The next interval starts empty; cumulative counters stay.
        let next = metrics.take_interval();
        assert_eq!((next.max_len, next.mean_len), (0, 0.0));
        assert_eq!(rx.recv().await, Some(2));
        tx.send(4).await.expect("send");
        let after = metrics.take_interval();
        assert_eq!(after.max_len, 1);
        assert!((after.mean_len - 1.0).abs() < 1e-9, "{after:?}");
        assert_eq!(metrics.snapshot().sent, 4);
    }
}
