//! Bounded channels that record how full they get and how long senders wait.
//!
//! Every channel between pipeline stages is one of these, so a run can say which stage holds the
//! others back: a channel that is often full (and a sender often blocked on it) sits in front of
//! the bottleneck.

use crate::clock::Instant;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
pub use tokio::sync::mpsc::error::{SendError, TryRecvError};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The largest budget in bytes a channel can have (here and in [`crate::budgeted`]): a
/// semaphore counts at most `u32::MAX` permits at once per acquisition.
pub const MAX_BUDGET: usize = u32::MAX as usize;

#[derive(Debug)]
pub struct ChannelMetrics {
    capacity: u64,
    /// The channel's bound in bytes; 0 if it has none (see [`crate::budgeted`]).
    budget_bytes: u64,
    sent: AtomicU64,
    full: AtomicU64,
    blocked_ns: AtomicU64,
    // Queue length sampled at every send: cumulative, so any number of readers can difference
    // them (a scrape as well as the METRICS line).
    len_sum: AtomicU64,
    len_samples: AtomicU64,
    // Bytes queued, sampled at the same sends (budgeted channels only).
    bytes_sum: AtomicU64,
    // The largest length and byte count since the last interval was taken, and where that
    // interval began.
    len_max: AtomicU64,
    bytes_max: AtomicU64,
    interval_start: Mutex<IntervalStart>,
}

#[derive(Debug, Default, Clone, Copy)]
struct IntervalStart {
    len_sum: u64,
    len_samples: u64,
    bytes_sum: u64,
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
    /// The bound in bytes (0: none) and the sum of the bytes queued seen by each send.
    pub budget_bytes: u64,
    pub bytes_sum: u64,
}

/// The queue length over one interval, as the METRICS line reports it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChannelInterval {
    pub mean_len: f64,
    pub max_len: u64,
    /// The same for the bytes queued (0 on a channel without a byte budget).
    pub mean_bytes: f64,
    pub max_bytes: u64,
}

impl ChannelMetrics {
    pub(crate) fn new(capacity: usize, budget_bytes: usize) -> Self {
        ChannelMetrics {
            capacity: capacity as u64,
            budget_bytes: budget_bytes as u64,
            sent: AtomicU64::new(0),
            full: AtomicU64::new(0),
            blocked_ns: AtomicU64::new(0),
            len_sum: AtomicU64::new(0),
            len_samples: AtomicU64::new(0),
            bytes_sum: AtomicU64::new(0),
            len_max: AtomicU64::new(0),
            bytes_max: AtomicU64::new(0),
            interval_start: Mutex::new(IntervalStart::default()),
        }
    }

    /// What one send saw queued: `len` messages of `bytes` bytes in all.
    pub(crate) fn record_queued(&self, len: u64, bytes: u64) {
        self.len_sum.fetch_add(len, Ordering::Relaxed);
        self.len_samples.fetch_add(1, Ordering::Relaxed);
        self.len_max.fetch_max(len, Ordering::Relaxed);
        if bytes > 0 {
            self.bytes_sum.fetch_add(bytes, Ordering::Relaxed);
            self.bytes_max.fetch_max(bytes, Ordering::Relaxed);
        }
    }

    pub(crate) fn count_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_full(&self) {
        self.full.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_blocked(&self, since: Instant) {
        self.blocked_ns
            .fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// How many sends found the channel full so far (in messages or, if it has one, in bytes).
    pub fn full(&self) -> u64 {
        self.full.load(Ordering::Relaxed)
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
            budget_bytes: self.budget_bytes,
            bytes_sum: self.bytes_sum.load(Ordering::Relaxed),
        }
    }

    /// Mean and maximum queue length (and bytes) since the previous call, which starts the next
    /// interval. One reader (the METRICS line) owns the intervals.
    pub fn take_interval(&self) -> ChannelInterval {
        let now = IntervalStart {
            len_sum: self.len_sum.load(Ordering::Relaxed),
            len_samples: self.len_samples.load(Ordering::Relaxed),
            bytes_sum: self.bytes_sum.load(Ordering::Relaxed),
        };
        let max_len = self.len_max.swap(0, Ordering::Relaxed);
        let max_bytes = self.bytes_max.swap(0, Ordering::Relaxed);
        let start = match self.interval_start.lock() {
            Ok(mut start) => std::mem::replace(&mut *start, now),
            Err(_) => now,
        };
        let samples = now.len_samples.saturating_sub(start.len_samples);
        let mean = |sum: u64, start: u64| {
            if samples == 0 {
                0.0
            } else {
                sum.saturating_sub(start) as f64 / samples as f64
            }
        };
        ChannelInterval {
            mean_len: mean(now.len_sum, start.len_sum),
            max_len,
            mean_bytes: mean(now.bytes_sum, start.bytes_sum),
            max_bytes,
        }
    }
}

/// A channel's metrics under the name its process reports them by.
#[derive(Debug, Clone)]
pub struct NamedChannel {
    pub name: &'static str,
    pub metrics: Arc<ChannelMetrics>,
}

impl NamedChannel {
    pub fn new(name: &'static str, metrics: Arc<ChannelMetrics>) -> Self {
        NamedChannel { name, metrics }
    }
}

/// The sending side. A channel made by [`channel_within`] is bounded in bytes as well: each
/// message takes room for its size before it is queued, and gives it back once received.
pub struct MeteredSender<T> {
    inner: mpsc::Sender<Entry<T>>,
    metrics: Arc<ChannelMetrics>,
    budget: Option<Arc<Budget<T>>>,
}

/// A channel's bound in bytes, and how a message's size is read.
struct Budget<T> {
    room: Arc<Semaphore>,
    bytes: usize,
    weigh: fn(&T) -> usize,
}

/// A queued message, with the room it takes in a channel bounded in bytes.
struct Entry<T> {
    item: T,
    _room: Option<OwnedSemaphorePermit>,
}

impl<T> Clone for MeteredSender<T> {
    fn clone(&self) -> Self {
        MeteredSender {
            inner: self.inner.clone(),
            metrics: self.metrics.clone(),
            budget: self.budget.clone(),
        }
    }
}

/// The receiving side: `tokio::sync::mpsc::Receiver`'s methods that the stages use. Receiving
/// a message gives its room back.
pub struct MeteredReceiver<T> {
    inner: mpsc::Receiver<Entry<T>>,
}

impl<T> MeteredReceiver<T> {
    pub async fn recv(&mut self) -> Option<T> {
        self.inner.recv().await.map(|entry| entry.item)
    }

    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.inner.try_recv().map(|entry| entry.item)
    }

    /// For stages that run on their own OS thread rather than in the runtime.
    pub fn blocking_recv(&mut self) -> Option<T> {
        self.inner.blocking_recv().map(|entry| entry.item)
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

/// A channel of at most `capacity` messages.
pub fn channel<T>(capacity: usize) -> (MeteredSender<T>, MeteredReceiver<T>, Arc<ChannelMetrics>) {
    let (tx, rx) = mpsc::channel(capacity);
    let metrics = Arc::new(ChannelMetrics::new(capacity, 0));
    (
        MeteredSender {
            inner: tx,
            metrics: metrics.clone(),
            budget: None,
        },
        MeteredReceiver { inner: rx },
        metrics,
    )
}

/// A channel of at most `capacity` messages and `budget` bytes (at most
/// [`MAX_BUDGET`]), a message weighing `weigh(message)` bytes: for messages
/// whose size varies, such as batches, where a bound in messages alone bounds memory only by
/// the count times the largest. A message larger than the whole budget takes all of it (it
/// waits for an empty queue) rather than being refused: the stages' batches must go through.
pub fn channel_within<T>(
    capacity: usize,
    budget: usize,
    weigh: fn(&T) -> usize,
) -> (MeteredSender<T>, MeteredReceiver<T>, Arc<ChannelMetrics>) {
    let bytes = budget.clamp(1, MAX_BUDGET);
    let (mut tx, rx, _) = channel(capacity);
    let metrics = Arc::new(ChannelMetrics::new(capacity, bytes));
    tx.metrics = metrics.clone();
    tx.budget = Some(Arc::new(Budget {
        room: Arc::new(Semaphore::new(bytes)),
        bytes,
        weigh,
    }));
    (tx, rx, metrics)
}

impl<T> MeteredSender<T> {
    fn len(&self) -> u64 {
        (self.inner.max_capacity() - self.inner.capacity()) as u64
    }

    fn queued_bytes(&self) -> u64 {
        self.budget.as_ref().map_or(0, |budget| {
            budget.bytes.saturating_sub(budget.room.available_permits()) as u64
        })
    }

    /// The room `item` takes, if this channel is bounded in bytes.
    fn need(&self, item: &T) -> Option<(Arc<Semaphore>, u32)> {
        let budget = self.budget.as_ref()?;
        let bytes = (budget.weigh)(item).min(budget.bytes);
        Some((
            budget.room.clone(),
            u32::try_from(bytes).unwrap_or(u32::MAX),
        ))
    }

    /// The non-blocking part shared by both send paths: records the queue length and tries to
    /// take room and send. `Ok(None)`: sent. `Ok(Some(..))`: the channel was full in messages
    /// or in bytes (counted); the caller waits with its own kind of blocking, for room first,
    /// and reports the wait to `finish_blocked`.
    fn try_fast(&self, item: T) -> Result<Option<Blocked<T>>, SendError<T>> {
        self.metrics.record_queued(self.len(), self.queued_bytes());
        let room = match self.need(&item) {
            None => None,
            Some((room, need)) => match room.clone().try_acquire_many_owned(need) {
                Ok(permit) => Some(permit),
                Err(_) => {
                    self.metrics.count_full();
                    return Ok(Some(Blocked::NoRoom(item, room, need)));
                }
            },
        };
        match self.inner.try_send(Entry { item, _room: room }) {
            Ok(()) => {
                self.metrics.count_sent();
                Ok(None)
            }
            Err(mpsc::error::TrySendError::Closed(entry)) => Err(SendError(entry.item)),
            Err(mpsc::error::TrySendError::Full(entry)) => {
                self.metrics.count_full();
                Ok(Some(Blocked::Full(entry)))
            }
        }
    }

    fn finish_blocked(
        &self,
        start: Instant,
        result: Result<(), mpsc::error::SendError<Entry<T>>>,
    ) -> Result<(), SendError<T>> {
        self.metrics.add_blocked(start);
        match result {
            Ok(()) => {
                self.metrics.count_sent();
                Ok(())
            }
            Err(e) => Err(SendError(e.0.item)),
        }
    }

    /// Sends, waiting while the channel is full; the wait is what `blocked_ms` adds up.
    pub async fn send(&self, item: T) -> Result<(), SendError<T>> {
        let Some(blocked) = self.try_fast(item)? else {
            return Ok(());
        };
        let start = Instant::now();
        let entry = match blocked {
            Blocked::Full(entry) => entry,
            Blocked::NoRoom(item, room, need) => match room.acquire_many_owned(need).await {
                Ok(permit) => Entry {
                    item,
                    _room: Some(permit),
                },
                // The semaphore is never closed.
                Err(_) => return Err(SendError(item)),
            },
        };
        let result = self.inner.send(entry).await;
        self.finish_blocked(start, result)
    }

    /// The same, for stages that run on their own OS thread rather than in the runtime.
    pub fn blocking_send(&self, item: T) -> Result<(), SendError<T>> {
        let Some(blocked) = self.try_fast(item)? else {
            return Ok(());
        };
        let start = Instant::now();
        let entry = match blocked {
            Blocked::Full(entry) => entry,
            Blocked::NoRoom(item, room, need) => {
                match futures::executor::block_on(room.acquire_many_owned(need)) {
                    Ok(permit) => Entry {
                        item,
                        _room: Some(permit),
                    },
                    Err(_) => return Err(SendError(item)),
                }
            }
        };
        let result = self.inner.blocking_send(entry);
        self.finish_blocked(start, result)
    }

    pub fn metrics(&self) -> &Arc<ChannelMetrics> {
        &self.metrics
    }
}

/// Why a fast send did not go through: the queue was full in messages (the entry, with its
/// room, waits for a place), or there was no room in bytes (the item waits for room first).
enum Blocked<T> {
    Full(Entry<T>),
    NoRoom(T, Arc<Semaphore>, u32),
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

    /// A channel of batches bounded in messages alone holds up to its capacity times the
    /// largest batch. Bounded in bytes too, a sender waits once the bytes queued reach the
    /// budget, however few messages that is, and a message larger than the budget still goes
    /// through once the queue is empty.
    #[tokio::test]
    async fn a_channel_within_a_budget_waits_for_room_in_bytes() {
        let (tx, mut rx, metrics) = channel_within::<Vec<u8>>(100, 1_000, Vec::len);
        tx.send(vec![0; 600]).await.expect("send");
        tx.send(vec![0; 400]).await.expect("send");
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(vec![0; 10]).await }
        });
        tokio::time::timeout(Duration::from_secs(5), async {
            while metrics.full() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the third send found no room");
        assert!(!blocked.is_finished());
        assert_eq!(rx.recv().await.map(|b| b.len()), Some(600));
        blocked.await.expect("task").expect("send");
        assert_eq!(rx.recv().await.map(|b| b.len()), Some(400));
        assert_eq!(rx.recv().await.map(|b| b.len()), Some(10));
        // Larger than the whole budget: it waits for an empty queue, then goes.
        tx.send(vec![0; 5_000]).await.expect("send");
        assert_eq!(rx.try_recv().map(|b| b.len()), Ok(5_000));
        // From a thread of its own, as the stages send.
        let sender = std::thread::spawn(move || {
            tx.blocking_send(vec![0; 900]).expect("send");
            tx.blocking_send(vec![0; 900]).expect("send");
        });
        assert_eq!(rx.recv().await.map(|b| b.len()), Some(900));
        assert_eq!(rx.recv().await.map(|b| b.len()), Some(900));
        sender.join().expect("sender");
        assert_eq!(metrics.snapshot().budget_bytes, 1_000);
    }
}
