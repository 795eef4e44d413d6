//! One emulated committee link: its one-way latencies, whether it is cut, and the delay queue
//! frames wait in before they may cross it.
//!
//! The model is a pipe of fixed latency: a frame enters the link when it is sent, or at the heal
//! if the link is cut then, and leaves it `delay` later. A frame still in the pipe when the link
//! is cut enters it again at the heal (a real network loses it and TCP retransmits it once the
//! path is back). While the link is cut nothing leaves it. Frames leave in the order they were
//! sent: the entry time never decreases along a queue, so neither does the time they are due.

use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Whether a link is cut, and since when (the last cut or heal; the link's creation at first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkState {
    pub cut: bool,
    pub since: Instant,
}

impl LinkState {
    /// When a frame sent at `sent` that takes `delay` across the link may leave it; `None`
    /// while the link is cut.
    pub fn due(&self, sent: Instant, delay: Duration) -> Option<Instant> {
        if self.cut {
            return None;
        }
        Some(sent.max(self.since) + delay)
    }
}

/// The emulated conditions between this node and one peer. Senders apply `outgoing` to the
/// frames they write to the peer and `incoming` to the replies (acks) they read from it; every
/// endpoint holds frames while the link is cut.
#[derive(Debug)]
pub struct Link {
    /// One-way latency from this node to the peer.
    pub outgoing: Duration,
    /// One-way latency from the peer to this node.
    pub incoming: Duration,
    state: watch::Sender<LinkState>,
}

impl Link {
    /// An open link.
    pub fn new(outgoing: Duration, incoming: Duration) -> Self {
        let (state, _) = watch::channel(LinkState {
            cut: false,
            since: Instant::now(),
        });
        Link {
            outgoing,
            incoming,
            state,
        }
    }

    pub fn state(&self) -> LinkState {
        *self.state.borrow()
    }

    /// Wakes the holder whenever the link is cut or healed.
    pub fn watch(&self) -> watch::Receiver<LinkState> {
        self.state.subscribe()
    }

    /// Cuts (`true`) or heals (`false`) the link; setting the state it already has changes
    /// nothing (its `since` stays).
    pub fn set_cut(&self, cut: bool) {
        self.state.send_if_modified(|state| {
            if state.cut == cut {
                return false;
            }
            *state = LinkState {
                cut,
                since: Instant::now(),
            };
            true
        });
    }

    /// Returns once the link is open (at once if it is).
    pub async fn wait_open(&self) {
        let mut state = self.watch();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = state.wait_for(|state| !state.cut).await;
    }
}

/// Frames waiting to cross a link, in the order they were sent.
#[derive(Debug)]
pub struct DelayLine<T> {
    delay: Duration,
    queue: VecDeque<(Instant, T)>,
}

impl<T> DelayLine<T> {
    pub fn new(delay: Duration) -> Self {
        DelayLine {
            delay,
            queue: VecDeque::new(),
        }
    }

    /// Queues `item`, sent at `sent` (no earlier than the items already queued).
    pub fn push(&mut self, sent: Instant, item: T) {
        self.queue.push_back((sent, item));
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// When the oldest item may leave under `state`; `None` if there is none or the link is cut.
    pub fn next_due(&self, state: &LinkState) -> Option<Instant> {
        let (sent, _) = self.queue.front()?;
        state.due(*sent, self.delay)
    }

    /// Moves into `out`, in order, at most `limit` items that may leave at `now`.
    pub fn pop_due(&mut self, state: &LinkState, now: Instant, limit: usize, out: &mut Vec<T>) {
        let mut taken = 0;
        while taken < limit && self.next_due(state).is_some_and(|due| due <= now) {
            if let Some((_, item)) = self.queue.pop_front() {
                out.push(item);
                taken += 1;
            }
        }
    }
}

/// Sleeps until `due`, or forever when there is nothing due (a `select!` branch that waits for
/// the head of a delay line).
pub async fn sleep_until_due(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn drain(line: &mut DelayLine<u32>, link: &Link) -> Vec<u32> {
        let mut out = Vec::new();
        line.pop_due(&link.state(), Instant::now(), usize::MAX, &mut out);
        out
    }

    #[tokio::test(start_paused = true)]
    async fn items_leave_a_delay_after_they_were_sent_in_order() {
        let link = Link::new(50 * MS, Duration::ZERO);
        let mut line = DelayLine::new(link.outgoing);
        let start = Instant::now();
        line.push(start, 1);
        tokio::time::advance(10 * MS).await;
        line.push(Instant::now(), 2);
        assert_eq!(line.next_due(&link.state()), Some(start + 50 * MS));
        tokio::time::advance(39 * MS).await;
        assert!(drain(&mut line, &link).is_empty(), "nothing before 50 ms");
        tokio::time::advance(MS).await;
        assert_eq!(drain(&mut line, &link), vec![1]);
        assert_eq!(line.next_due(&link.state()), Some(start + 60 * MS));
        tokio::time::advance(10 * MS).await;
        assert_eq!(drain(&mut line, &link), vec![2]);
        assert!(line.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_leaves_together_within_the_limit() {
        let link = Link::new(5 * MS, Duration::ZERO);
        let mut line = DelayLine::new(link.outgoing);
        for i in 0..10 {
            line.push(Instant::now(), i);
        }
        tokio::time::advance(5 * MS).await;
        let mut out = Vec::new();
        line.pop_due(&link.state(), Instant::now(), 4, &mut out);
        assert_eq!(out, vec![0, 1, 2, 3]);
        out.clear();
        line.pop_due(&link.state(), Instant::now(), usize::MAX, &mut out);
        assert_eq!(out, (4..10).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_crosses_a_cut_and_what_waited_enters_again_at_the_heal() {
        let link = Link::new(20 * MS, Duration::ZERO);
        let mut line = DelayLine::new(link.outgoing);
        // In the pipe when the cut comes: lost, and sent again at the heal.
        line.push(Instant::now(), 1);
        tokio::time::advance(10 * MS).await;
        link.set_cut(true);
        // Sent during the cut.
        line.push(Instant::now(), 2);
        tokio::time::advance(1_000 * MS).await;
        assert_eq!(line.next_due(&link.state()), None);
        assert!(drain(&mut line, &link).is_empty(), "nothing while cut");
        link.set_cut(false);
        let healed = Instant::now();
        assert_eq!(line.next_due(&link.state()), Some(healed + 20 * MS));
        tokio::time::advance(19 * MS).await;
        assert!(
            drain(&mut line, &link).is_empty(),
            "the pipe's latency after the heal"
        );
        tokio::time::advance(MS).await;
        assert_eq!(drain(&mut line, &link), vec![1, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn setting_the_same_state_keeps_its_start() {
        let link = Link::new(Duration::ZERO, Duration::ZERO);
        let created = link.state().since;
        tokio::time::advance(5 * MS).await;
        link.set_cut(false);
        assert_eq!(link.state().since, created);
        link.set_cut(true);
        assert_eq!(link.state().since, created + 5 * MS);
        assert!(link.state().cut);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_open_returns_at_the_heal() {
        let link = std::sync::Arc::new(Link::new(Duration::ZERO, Duration::ZERO));
        link.wait_open().await; // open: at once
        link.set_cut(true);
        let waiter = tokio::spawn({
            let link = link.clone();
            async move {
                link.wait_open().await;
                Instant::now()
            }
        });
        tokio::time::sleep(100 * MS).await;
        assert!(!waiter.is_finished());
        link.set_cut(false);
        let opened = waiter.await.expect("join");
        assert_eq!(opened, link.state().since);
    }
}
