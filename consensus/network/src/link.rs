//! One emulated committee link: its one-way latencies, its rate, whether it is cut, and the
//! delay queue frames wait in before they may cross it.
//!
//! The model is a pipe of fixed latency: a frame enters the link when it is sent, or at the heal
//! if the link is cut then, and leaves it `delay` later. A frame still in the pipe when the link
//! is cut enters it again at the heal (a real network loses it and TCP retransmits it once the
//! path is back). While the link is cut nothing leaves it. Frames leave in the order they were
//! sent: the entry time never decreases along a queue, so neither does the time they are due.
//!
//! A link may also have a rate ([`Bandwidth`]): then a frame whose latency has passed leaves
//! only once the link's token bucket holds its bytes. The bucket is the link's, shared by every
//! sender of this node towards the peer, so the rate is that of one link per direction and pair.

use plumbing::clock::{self, Instant};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;

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

/// What a link lets through in one go when it has been idle: 64 KiB. A small message (a vote, a
/// timeout, a digest) on an idle link then leaves with its latency alone, as it would on a real
/// link where its serialization takes microseconds, instead of waiting for a tick of the 1 ms
/// timer; a block or batch of hundreds of KB still waits for nearly all of its serialization.
/// 64 KiB is also about what a TCP sender hands the NIC at once (a segmentation-offload
/// segment, an unscaled window).
pub const BURST_BYTES: usize = 64 * 1024;

/// A link's rate towards the peer, as a token bucket of [`BURST_BYTES`] filled at the rate: a
/// frame may leave once the bucket holds its bytes, and takes them. A frame larger than the
/// bucket leaves once the bucket has been full for as long as its surplus takes at the rate, so
/// it too pays its serialization (all but the burst of it). Bytes are the frames' payloads
/// (length prefixes and TCP/IP headers, a few percent, are not counted).
#[derive(Debug)]
pub struct Bandwidth {
    bits_per_second: u64,
    /// When the link will have serialized every byte taken so far; the bucket is full from
    /// then on. Kept as a time rather than a count of tokens so that frames are timed from when
    /// they were due, not from when a task got round to them: a late timer adds no drift.
    free_at: Mutex<Instant>,
}

impl Bandwidth {
    /// A rate of `bits_per_second` (at least 1), its bucket full.
    pub fn new(bits_per_second: u64) -> Self {
        Bandwidth {
            bits_per_second: bits_per_second.max(1),
            free_at: Mutex::new(Instant::now()),
        }
    }

    pub fn bits_per_second(&self) -> u64 {
        self.bits_per_second
    }

    /// How long `bytes` take to serialize at the rate.
    pub fn serialization(&self, bytes: usize) -> Duration {
        let nanos = bytes as u128 * 8 * 1_000_000_000 / u128::from(self.bits_per_second);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Takes `bytes` from the bucket for a frame that may cross from `ready` (its latency has
    /// passed); returns when it may leave. Frames are taken in the order they are ready, each
    /// queued behind the bytes taken before it.
    pub fn take(&self, ready: Instant, bytes: usize) -> Instant {
        let mut free_at = self.free_at.lock().unwrap_or_else(PoisonError::into_inner);
        let done = (*free_at).max(ready) + self.serialization(bytes);
        *free_at = done;
        // Leaves when all but a burst of it is serialized, and never before it is ready.
        let burst = self.serialization(BURST_BYTES);
        if done <= ready + burst {
            ready
        } else {
            done - burst
        }
    }
}

/// The emulated conditions between this node and one peer. Senders apply `outgoing` (and
/// `bandwidth`) to the frames they write to the peer and `incoming` to the replies (acks) they
/// read from it; every endpoint holds frames while the link is cut.
#[derive(Debug)]
pub struct Link {
    /// One-way latency from this node to the peer.
    pub outgoing: Duration,
    /// One-way latency from the peer to this node.
    pub incoming: Duration,
    /// The rate from this node to the peer; `None`: unlimited. The other direction is the
    /// peer's to emulate; replies read here (acks of a few bytes) are not paced.
    pub bandwidth: Option<Arc<Bandwidth>>,
    state: watch::Sender<LinkState>,
}

impl Link {
    /// An open link of unlimited rate.
    pub fn new(outgoing: Duration, incoming: Duration) -> Self {
        let (state, _) = watch::channel(LinkState {
            cut: false,
            since: Instant::now(),
        });
        Link {
            outgoing,
            incoming,
            bandwidth: None,
            state,
        }
    }

    /// The same link limited to `bits_per_second` towards the peer (`None`: unlimited).
    pub fn with_bandwidth(mut self, bits_per_second: Option<u64>) -> Self {
        self.bandwidth = bits_per_second.map(|rate| Arc::new(Bandwidth::new(rate)));
        self
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
    bandwidth: Option<Arc<Bandwidth>>,
    /// Each item with when it was sent and its bytes.
    queue: VecDeque<(Instant, usize, T)>,
    /// When the oldest item may leave by the bucket, once it has taken its bytes. Only the
    /// oldest takes them (when its latency has passed), so the items keep their order.
    head_leaves: Option<Instant>,
}

impl<T> DelayLine<T> {
    /// A line of `delay`, paced by `bandwidth` if given (that of the link it crosses).
    pub fn new(delay: Duration, bandwidth: Option<Arc<Bandwidth>>) -> Self {
        DelayLine {
            delay,
            bandwidth,
            queue: VecDeque::new(),
            head_leaves: None,
        }
    }

    /// Queues `item` of `bytes`, sent at `sent` (no earlier than the items already queued).
    pub fn push(&mut self, sent: Instant, bytes: usize, item: T) {
        self.queue.push_back((sent, bytes, item));
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// When the oldest item may leave under `state` (or take its bytes from the bucket);
    /// `None` if there is none or the link is cut.
    pub fn next_due(&self, state: &LinkState) -> Option<Instant> {
        let (sent, _, _) = self.queue.front()?;
        let due = state.due(*sent, self.delay)?;
        Some(self.head_leaves.map_or(due, |leaves| leaves.max(due)))
    }

    /// Moves into `out`, in order, at most `limit` items that may leave at `now`.
    pub fn pop_due(&mut self, state: &LinkState, now: Instant, limit: usize, out: &mut Vec<T>) {
        let mut taken = 0;
        while taken < limit {
            let Some(due) = self.next_due(state).filter(|due| *due <= now) else {
                break;
            };
            if let (Some(bandwidth), None) = (&self.bandwidth, self.head_leaves) {
                // Its latency has passed: it joins the link's bucket, from when it was due.
                let bytes = self.queue.front().map_or(0, |(_, bytes, _)| *bytes);
                let leaves = bandwidth.take(due, bytes);
                self.head_leaves = Some(leaves);
                if leaves > now {
                    break;
                }
            }
            if let Some((_, _, item)) = self.queue.pop_front() {
                self.head_leaves = None;
                out.push(item);
                taken += 1;
            }
        }
    }
}

/// Sleeps until `due`, or forever when there is nothing due (a `select!` branch that waits for
/// the head of a delay line). Precise to microseconds in a node that enabled it (a link of 1 ms
/// on tokio's millisecond timer takes 1 to 2 ms; `plumbing::precise_sleep`).
pub async fn sleep_until_due(due: Option<Instant>) {
    match due {
        Some(due) => clock::sleep_until_precise(due).await,
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
        let mut line = DelayLine::new(link.outgoing, None);
        let start = Instant::now();
        line.push(start, 0, 1);
        tokio::time::advance(10 * MS).await;
        line.push(Instant::now(), 0, 2);
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
        let mut line = DelayLine::new(link.outgoing, None);
        for i in 0..10 {
            line.push(Instant::now(), 0, i);
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
        let mut line = DelayLine::new(link.outgoing, None);
        // In the pipe when the cut comes: lost, and sent again at the heal.
        line.push(Instant::now(), 0, 1);
        tokio::time::advance(10 * MS).await;
        link.set_cut(true);
        // Sent during the cut.
        line.push(Instant::now(), 0, 2);
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

    /// 8 Mbit/s: a million bytes a second.
    const MBIT_8: u64 = 8_000_000;

    /// Runs `line` as a sender's task does until it is empty: each item with when it left,
    /// from `start`.
    async fn run(line: &mut DelayLine<u32>, link: &Link, start: Instant) -> Vec<(u32, Duration)> {
        let mut left = Vec::new();
        let mut out = Vec::new();
        while !line.is_empty() {
            sleep_until_due(line.next_due(&link.state())).await;
            line.pop_due(&link.state(), Instant::now(), usize::MAX, &mut out);
            left.extend(out.drain(..).map(|item| (item, Instant::now() - start)));
        }
        left
    }

    /// When the last of `bytes` sent at once may leave a link of `delay` at 8 Mbit/s: its
    /// latency, then all but the burst at the rate.
    fn earliest(delay: Duration, bytes: usize) -> Duration {
        delay + Duration::from_micros(bytes.saturating_sub(BURST_BYTES) as u64)
    }

    #[tokio::test(start_paused = true)]
    async fn a_link_at_8_mbit_s_carries_a_megabyte_in_about_a_second_in_order_after_its_latency() {
        for delay in [Duration::ZERO, 50 * MS] {
            let link = Link::new(delay, Duration::ZERO).with_bandwidth(Some(MBIT_8));
            let mut line = DelayLine::new(link.outgoing, link.bandwidth.clone());
            let start = Instant::now();
            // 100 frames of 10 kB.
            for i in 0..100 {
                line.push(start, 10_000, i);
            }
            let left = run(&mut line, &link, start).await;
            let order: Vec<_> = left.iter().map(|(item, _)| *item).collect();
            assert_eq!(order, (0..100).collect::<Vec<_>>());
            for (i, (_, at)) in (1..).zip(&left) {
                // No earlier than its latency plus its bytes and those before it at the rate
                // (less the burst), and no later than the timer's millisecond after.
                let earliest = earliest(delay, i * 10_000);
                assert!(
                    *at >= earliest && *at <= earliest + MS,
                    "frame {i} left at {at:?}, expected {earliest:?}"
                );
            }
            // What fits in the burst leaves with the latency alone.
            assert_eq!(left[5].1, delay);
            let (_, last) = left[99];
            assert!(
                last > delay + 900 * MS && last <= delay + 1_000 * MS,
                "{last:?}"
            );
            // Let the bucket fill again before the next link (the tasks share the clock).
            tokio::time::advance(Duration::from_secs(1)).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_frame_pays_its_serialization_and_so_does_what_follows_it() {
        let link = Link::new(20 * MS, Duration::ZERO).with_bandwidth(Some(MBIT_8));
        let mut line = DelayLine::new(link.outgoing, link.bandwidth.clone());
        let start = Instant::now();
        line.push(start, 500_000, 1);
        line.push(start, 100, 2);
        let left = run(&mut line, &link, start).await;
        // 20 ms, then 500 kB less the burst at a megabyte a second: 454.464 ms.
        assert_eq!(left[0].0, 1);
        assert!(left[0].1 >= earliest(20 * MS, 500_000), "{:?}", left[0]);
        assert!(
            left[0].1 <= earliest(20 * MS, 500_000) + MS,
            "{:?}",
            left[0]
        );
        // The small one waits behind it.
        assert_eq!(left[1].0, 2);
        assert!(left[1].1 >= earliest(20 * MS, 500_100), "{:?}", left[1]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unlimited_link_lets_a_megabyte_through_with_its_latency_alone() {
        let link = Link::new(50 * MS, Duration::ZERO);
        assert!(link.bandwidth.is_none());
        let mut line = DelayLine::new(link.outgoing, link.bandwidth.clone());
        let start = Instant::now();
        for i in 0..100 {
            line.push(start, 10_000, i);
        }
        let left = run(&mut line, &link, start).await;
        assert_eq!(left, (0..100).map(|i| (i, 50 * MS)).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn the_senders_of_one_link_share_its_rate() {
        // As the consensus and the mempool senders to one peer: two queues, one link.
        let link = Link::new(Duration::ZERO, Duration::ZERO).with_bandwidth(Some(MBIT_8));
        let mut consensus = DelayLine::new(link.outgoing, link.bandwidth.clone());
        let mut mempool = DelayLine::new(link.outgoing, link.bandwidth.clone());
        let start = Instant::now();
        for i in 0..50 {
            consensus.push(start, 10_000, i);
            mempool.push(start, 10_000, 100 + i);
        }
        let (a, b) = tokio::join!(
            run(&mut consensus, &link, start),
            run(&mut mempool, &link, start)
        );
        for left in [&a, &b] {
            assert!(left.windows(2).all(|w| w[0].0 < w[1].0), "in order");
        }
        // A megabyte in all: about a second, not half of one each.
        let last = a
            .last()
            .into_iter()
            .chain(b.last())
            .map(|(_, at)| *at)
            .max();
        let last = last.expect("frames");
        assert!(last >= earliest(Duration::ZERO, 1_000_000), "{last:?}");
        assert!(last <= earliest(Duration::ZERO, 1_000_000) + MS, "{last:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn what_waited_out_a_cut_crosses_at_the_rate_after_the_heal() {
        let link = Link::new(10 * MS, Duration::ZERO).with_bandwidth(Some(MBIT_8));
        let mut line = DelayLine::new(link.outgoing, link.bandwidth.clone());
        link.set_cut(true);
        for i in 0..100 {
            line.push(Instant::now(), 10_000, i);
        }
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(drain(&mut line, &link).is_empty(), "nothing while cut");
        link.set_cut(false);
        let healed = Instant::now();
        let left = run(&mut line, &link, healed).await;
        // Not all at once at the heal: the backlog is serialized as if sent then.
        let (_, last) = left[99];
        assert!(last >= earliest(10 * MS, 1_000_000), "{last:?}");
        assert!(last <= earliest(10 * MS, 1_000_000) + MS, "{last:?}");
    }

    #[test]
    fn the_bucket_counts_megabits_and_lets_a_burst_through_at_once() {
        let bandwidth = Bandwidth::new(MBIT_8);
        assert_eq!(bandwidth.serialization(1_000_000), Duration::from_secs(1));
        assert_eq!(bandwidth.serialization(1), Duration::from_micros(1));
        let now = Instant::now();
        // The burst at once, then a megabyte a second.
        assert_eq!(bandwidth.take(now, BURST_BYTES), now);
        assert_eq!(
            bandwidth.take(now, 1_000),
            now + Duration::from_micros(1_000)
        );
        // A rate of zero would never let anything through: it is taken as 1 bit/s.
        assert_eq!(Bandwidth::new(0).bits_per_second(), 1);
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
