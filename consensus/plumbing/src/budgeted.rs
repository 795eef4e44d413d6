//! Bounded channels whose queue is bounded in bytes as well as in messages.
//!
//! A queue of decoded network messages bounded by their count alone holds as much memory as the
//! count times the largest message: a thousand proposals of 4 MB are 4 GB. Here every message
//! also takes room for its size from the channel's byte budget before it is queued (its sender
//! says how large it is: the length of the frame it came in, usually), and gives the room back
//! when the receiver takes it, or with [`Held`] once the receiver is done with it.
//!
//! A sender that finds the budget spent either waits for room ([`BudgetedSender::send`]: a
//! network reader then stops reading its connection, and back-pressure reaches the peer) or is
//! told at once ([`BudgetedSender::try_send`], for senders that drop rather than wait). A
//! message larger than the whole budget could never fit: it is refused
//! ([`SendError::TooLarge`]) rather than left waiting forever.
//!
//! The budget is a tokio [`Semaphore`] holding one permit per byte. It is fair: a large message
//! waiting for room is not overtaken by a stream of small ones. What the channel costs per
//! message is one uncontended atomic update of the semaphore each way, besides the channel's own.
//!
//! Channels are metered like [`crate::metered`] ones, bytes included: [`ChannelMetrics`].

use crate::clock::Instant;
use crate::metered::ChannelMetrics;
use std::sync::Arc;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore, TryAcquireError};

pub use crate::metered::MAX_BUDGET;

/// Why a message was not sent; the message comes back in every case.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError<T> {
    #[error("the receiver is gone")]
    Closed(T),
    #[error(
        "a message of {bytes} bytes is larger than the queue's whole budget of {budget} bytes"
    )]
    TooLarge {
        item: T,
        bytes: usize,
        budget: usize,
    },
}

/// Why [`BudgetedSender::try_send`] did not send.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TrySendError<T> {
    #[error("the queue is full")]
    Full(T),
    #[error(transparent)]
    Refused(#[from] SendError<T>),
}

impl<T> SendError<T> {
    pub fn into_inner(self) -> T {
        match self {
            SendError::Closed(item) | SendError::TooLarge { item, .. } => item,
        }
    }
}

/// A message in the queue with the room it takes.
struct Queued<T> {
    item: T,
    room: OwnedSemaphorePermit,
}

/// A message taken from the queue whose room is given back only when this is dropped: for a
/// receiver that keeps messages waiting in a queue of its own (a delay line), which then counts
/// against the same budget.
pub struct Held<T> {
    item: T,
    _room: OwnedSemaphorePermit,
}

impl<T> Held<T> {
    pub fn get(&self) -> &T {
        &self.item
    }

    /// The message; its room goes back now.
    pub fn into_inner(self) -> T {
        self.item
    }
}

pub struct BudgetedSender<T> {
    inner: mpsc::Sender<Queued<T>>,
    room: Arc<Semaphore>,
    budget: usize,
    metrics: Arc<ChannelMetrics>,
}

impl<T> Clone for BudgetedSender<T> {
    fn clone(&self) -> Self {
        BudgetedSender {
            inner: self.inner.clone(),
            room: self.room.clone(),
            budget: self.budget,
            metrics: self.metrics.clone(),
        }
    }
}

pub struct BudgetedReceiver<T> {
    inner: mpsc::Receiver<Queued<T>>,
    /// Reused by `recv_many`, so taking a burst allocates nothing once it has grown.
    scratch: Vec<Queued<T>>,
}

/// A channel of at most `capacity` messages and `budget` bytes (at most [`MAX_BUDGET`]).
pub fn channel<T>(
    capacity: usize,
    budget: usize,
) -> (BudgetedSender<T>, BudgetedReceiver<T>, Arc<ChannelMetrics>) {
    let budget = budget.min(MAX_BUDGET);
    let (tx, rx) = mpsc::channel(capacity);
    let metrics = Arc::new(ChannelMetrics::new(capacity, budget));
    let sender = BudgetedSender {
        inner: tx,
        room: Arc::new(Semaphore::new(budget)),
        budget,
        metrics: metrics.clone(),
    };
    let receiver = BudgetedReceiver {
        inner: rx,
        scratch: Vec::new(),
    };
    (sender, receiver, metrics)
}

impl<T> BudgetedSender<T> {
    /// Queues `item`, which counts as `bytes`, waiting while the channel is full in messages or
    /// in bytes; the wait is what the metrics' `blocked_ms` adds up.
    pub async fn send(&self, item: T, bytes: usize) -> Result<(), SendError<T>> {
        let Some(need) = self.fits(bytes) else {
            return Err(self.too_large(item, bytes));
        };
        self.record_queued();
        let mut blocked = None;
        let room = match self.room.clone().try_acquire_many_owned(need) {
            Ok(room) => room,
            Err(TryAcquireError::NoPermits) => {
                self.metrics.count_full();
                blocked = Some(Instant::now());
                match self.room.clone().acquire_many_owned(need).await {
                    Ok(room) => room,
                    // The semaphore is never closed.
                    Err(_) => return Err(SendError::Closed(item)),
                }
            }
            Err(TryAcquireError::Closed) => return Err(SendError::Closed(item)),
        };
        let result = match self.inner.try_send(Queued { item, room }) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(queued)) => Err(queued),
            Err(mpsc::error::TrySendError::Full(queued)) => {
                if blocked.is_none() {
                    self.metrics.count_full();
                    blocked = Some(Instant::now());
                }
                self.inner.send(queued).await.map_err(|e| e.0)
            }
        };
        if let Some(since) = blocked {
            self.metrics.add_blocked(since);
        }
        match result {
            Ok(()) => {
                self.metrics.count_sent();
                Ok(())
            }
            Err(queued) => Err(SendError::Closed(queued.item)),
        }
    }

    /// Queues `item`, which counts as `bytes`, if there is room for it now.
    pub fn try_send(&self, item: T, bytes: usize) -> Result<(), TrySendError<T>> {
        let Some(need) = self.fits(bytes) else {
            return Err(self.too_large(item, bytes).into());
        };
        self.record_queued();
        let room = match self.room.clone().try_acquire_many_owned(need) {
            Ok(room) => room,
            Err(TryAcquireError::NoPermits) => {
                self.metrics.count_full();
                return Err(TrySendError::Full(item));
            }
            Err(TryAcquireError::Closed) => return Err(SendError::Closed(item).into()),
        };
        match self.inner.try_send(Queued { item, room }) {
            Ok(()) => {
                self.metrics.count_sent();
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(queued)) => {
                self.metrics.count_full();
                Err(TrySendError::Full(queued.item))
            }
            Err(mpsc::error::TrySendError::Closed(queued)) => {
                Err(SendError::Closed(queued.item).into())
            }
        }
    }

    /// Bytes queued (or held) now.
    pub fn queued_bytes(&self) -> usize {
        self.budget.saturating_sub(self.room.available_permits())
    }

    /// Messages queued now (held ones are no longer counted).
    pub fn len(&self) -> usize {
        self.inner.max_capacity() - self.inner.capacity()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    pub fn metrics(&self) -> &Arc<ChannelMetrics> {
        &self.metrics
    }

    /// The permits `bytes` needs, if it can ever fit.
    fn fits(&self, bytes: usize) -> Option<u32> {
        if bytes > self.budget {
            return None;
        }
        u32::try_from(bytes).ok()
    }

    fn too_large(&self, item: T, bytes: usize) -> SendError<T> {
        SendError::TooLarge {
            item,
            bytes,
            budget: self.budget,
        }
    }

    fn record_queued(&self) {
        self.metrics
            .record_queued(self.len() as u64, self.queued_bytes() as u64);
    }
}

impl<T> BudgetedReceiver<T> {
    /// The next message; its room goes back now. `None` once every sender is gone and the queue
    /// is empty. Cancel-safe, as `mpsc::Receiver::recv` is.
    pub async fn recv(&mut self) -> Option<T> {
        self.inner.recv().await.map(|queued| queued.item)
    }

    /// The next message with its room, given back when the [`Held`] is dropped.
    pub async fn recv_held(&mut self) -> Option<Held<T>> {
        self.inner.recv().await.map(Held::from)
    }

    /// Appends up to `limit` messages to `out`, waiting for the first; their room goes back now.
    /// Returns how many, 0 once every sender is gone and the queue is empty.
    pub async fn recv_many(&mut self, out: &mut Vec<T>, limit: usize) -> usize {
        let taken = self.inner.recv_many(&mut self.scratch, limit).await;
        out.extend(self.scratch.drain(..).map(|queued| queued.item));
        taken
    }

    /// As [`BudgetedReceiver::recv_many`], each message keeping its room until dropped.
    pub async fn recv_many_held(&mut self, out: &mut Vec<Held<T>>, limit: usize) -> usize {
        let taken = self.inner.recv_many(&mut self.scratch, limit).await;
        out.extend(self.scratch.drain(..).map(Held::from));
        taken
    }

    /// The next message if one is queued; its room goes back now.
    pub fn try_recv(&mut self) -> Option<T> {
        self.inner.try_recv().ok().map(|queued| queued.item)
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

impl<T> From<Queued<T>> for Held<T> {
    fn from(queued: Queued<T>) -> Self {
        Held {
            item: queued.item,
            _room: queued.room,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const DEADLINE: Duration = Duration::from_secs(10);

    /// Waits until `metrics` counted `full` sends that found the channel full.
    async fn until_full(metrics: &ChannelMetrics, full: u64) {
        tokio::time::timeout(DEADLINE, async {
            while metrics.full() < full {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("a sender found the channel full");
    }

    #[tokio::test]
    async fn a_sender_waits_for_bytes_until_the_receiver_takes_a_message() {
        let (tx, mut rx, metrics) = channel::<&str>(100, 10);
        tx.send("a", 6).await.expect("send");
        tx.send("b", 4).await.expect("send");
        assert_eq!(tx.queued_bytes(), 10);
        // Two messages of 100 allowed, but no byte left: the third waits.
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send("c", 1).await }
        });
        until_full(&metrics, 1).await;
        assert!(!blocked.is_finished());
        assert_eq!(rx.len(), 2);
        // Taking a message gives its room back at once.
        assert_eq!(rx.recv().await, Some("a"));
        blocked.await.expect("task").expect("send");
        assert_eq!(tx.queued_bytes(), 5);
        assert_eq!(rx.recv().await, Some("b"));
        assert_eq!(rx.recv().await, Some("c"));
        assert_eq!(tx.queued_bytes(), 0);
        let snapshot = metrics.snapshot();
        assert_eq!((snapshot.sent, snapshot.full), (3, 1));
        assert_eq!(snapshot.budget_bytes, 10);
        // Bytes queued seen by the three sends: 0, 6 and 10.
        assert_eq!((snapshot.bytes_sum, snapshot.len_samples), (16, 3));
        let interval = metrics.take_interval();
        assert_eq!(interval.max_bytes, 10);
        assert!(
            (interval.mean_bytes - 16.0 / 3.0).abs() < 1e-9,
            "{interval:?}"
        );
        assert!(snapshot.blocked_ms > 0.0);
    }

    #[tokio::test]
    async fn the_message_count_still_bounds_small_messages() {
        let (tx, mut rx, metrics) = channel::<u32>(2, 1_000);
        tx.send(1, 1).await.expect("send");
        tx.send(2, 1).await.expect("send");
        assert_eq!(tx.try_send(3, 1), Err(TrySendError::Full(3)));
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(4, 1).await }
        });
        until_full(&metrics, 2).await;
        assert_eq!(rx.recv().await, Some(1));
        blocked.await.expect("task").expect("send");
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(4));
        // The count wait held its bytes only while it waited.
        assert_eq!(tx.queued_bytes(), 0);
    }

    #[tokio::test]
    async fn a_message_larger_than_the_budget_is_refused_not_left_waiting() {
        let (tx, mut rx, _) = channel::<&str>(10, 100);
        let refused = tokio::time::timeout(DEADLINE, tx.send("huge", 101))
            .await
            .expect("refused at once");
        assert_eq!(
            refused,
            Err(SendError::TooLarge {
                item: "huge",
                bytes: 101,
                budget: 100
            })
        );
        let message = refused.expect_err("refused").to_string();
        assert!(message.contains("101 bytes"), "{message}");
        assert!(message.contains("budget of 100 bytes"), "{message}");
        assert!(matches!(
            tx.try_send("huge", 101),
            Err(TrySendError::Refused(SendError::TooLarge { .. }))
        ));
        // Exactly the budget fits, and nothing else was taken.
        tx.send("whole", 100).await.expect("send");
        assert_eq!(rx.recv().await, Some("whole"));
    }

    #[tokio::test]
    async fn try_send_refuses_what_does_not_fit_now() {
        let (tx, mut rx, metrics) = channel::<u32>(10, 10);
        tx.try_send(1, 8).expect("fits");
        assert_eq!(tx.try_send(2, 3), Err(TrySendError::Full(2)));
        tx.try_send(3, 2).expect("fits");
        assert_eq!(metrics.full(), 1);
        assert_eq!(rx.recv().await, Some(1));
        tx.try_send(2, 3).expect("fits now");
        assert_eq!((rx.recv().await, rx.recv().await), (Some(3), Some(2)));
    }

    #[tokio::test]
    async fn held_messages_keep_their_room_until_dropped() {
        let (tx, mut rx, _) = channel::<u32>(10, 10);
        for i in 0..3 {
            tx.send(i, 3).await.expect("send");
        }
        let mut held = Vec::new();
        assert_eq!(rx.recv_many_held(&mut held, 2).await, 2);
        assert_eq!(held.iter().map(|h| *h.get()).collect::<Vec<_>>(), [0, 1]);
        // Out of the queue but still counted: only one byte is left.
        assert_eq!(rx.len(), 1);
        assert_eq!(tx.queued_bytes(), 9);
        assert!(matches!(tx.try_send(9, 2), Err(TrySendError::Full(9))));
        let first = held.remove(0);
        assert_eq!(first.into_inner(), 0);
        assert_eq!(tx.queued_bytes(), 6);
        let next = rx.recv_held().await.expect("queued");
        assert_eq!((*next.get(), tx.queued_bytes()), (2, 6));
        drop((held, next));
        assert_eq!(tx.queued_bytes(), 0);
    }

    #[tokio::test]
    async fn recv_many_gives_the_room_back_and_keeps_order() {
        let (tx, mut rx, _) = channel::<u32>(10, 10);
        for i in 0..5 {
            tx.send(i, 2).await.expect("send");
        }
        let mut out = Vec::new();
        assert_eq!(rx.recv_many(&mut out, 3).await, 3);
        assert_eq!(tx.queued_bytes(), 4);
        assert_eq!(rx.recv_many(&mut out, 10).await, 2);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        assert_eq!(tx.queued_bytes(), 0);
    }

    #[tokio::test]
    async fn a_closed_receiver_returns_the_message_and_its_room() {
        let (tx, rx, _) = channel::<&str>(10, 10);
        drop(rx);
        assert_eq!(tx.send("late", 5).await, Err(SendError::Closed("late")));
        assert!(matches!(
            tx.try_send("late", 5),
            Err(TrySendError::Refused(SendError::Closed("late")))
        ));
        assert_eq!(tx.queued_bytes(), 0);
        assert!(tx.is_closed());
        // The receiver's end: a sender gone leaves what was queued readable.
        let (tx, mut rx, _) = channel::<u32>(10, 10);
        tx.send(7, 1).await.expect("send");
        drop(tx);
        assert_eq!(rx.recv().await, Some(7));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_sender_given_up_takes_no_room() {
        let (tx, mut rx, metrics) = channel::<u32>(10, 4);
        tx.send(1, 4).await.expect("send");
        let waiting = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(2, 4).await }
        });
        until_full(&metrics, 1).await;
        waiting.abort();
        assert!(waiting.await.is_err_and(|e| e.is_cancelled()));
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(tx.queued_bytes(), 0);
        assert!(rx.try_recv().is_none());
    }

    #[test]
    fn budgets_are_capped_where_the_semaphore_can_count_them() {
        let (tx, _rx, metrics) = channel::<u8>(1, usize::MAX);
        assert_eq!(tx.budget(), MAX_BUDGET);
        assert_eq!(metrics.snapshot().budget_bytes, MAX_BUDGET as u64);
    }
}
