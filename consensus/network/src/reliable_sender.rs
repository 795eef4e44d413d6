//! A sender that keeps every message until the peer acknowledges it.
//!
//! Each peer gets a buffer shared between the callers and one connection task. Callers only
//! append to it (never wait); the task writes what is new, matches the peer's reply frames to
//! messages in FIFO order, and rewrites everything still unacknowledged after a reconnection.
//! Under emulation a message is written only once its link's latency has passed since it was
//! sent and the link's rate lets it through (and never while the link is cut), and acks are
//! taken the link's return latency after they arrive; unacknowledged messages wait within the
//! same bounded buffer.

use super::codec::{codec, DEFAULT_MAX_FRAME_SIZE};
use super::handshake::Credentials;
use super::link::{sleep_until_due, DelayLine, Link};
use super::presence::Presence;
use super::transport::{connect, FrameWriter};
use bytes::Bytes;
use crypto::PublicKey;
use futures::{FutureExt, StreamExt};
use plumbing::clock::{self, Instant};
use rand::seq::SliceRandom;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

mod backoff;
mod crossing;

use backoff::Backoff;
use crossing::Crossing;

/// Messages kept per peer by default before the oldest is dropped.
pub const DEFAULT_RELIABLE_CAPACITY: usize = 10_000;

/// Bytes kept per peer by default before the oldest message is dropped.
pub const DEFAULT_RELIABLE_BYTES: usize = 64 << 20;

/// First delay before reconnecting; doubles after each attempt that delivers nothing.
const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Resolves with the peer's reply frame (the ack) once delivered. Dropping it cancels the
/// message: it will not be retransmitted. It resolves to an error if the message is dropped
/// (buffer overflow, oversized message) or the sender shuts down.
pub type CancelHandler = oneshot::Receiver<Bytes>;

/// Reliable sender: one connection task per peer. Every message stays in a bounded per-peer
/// buffer until the peer acknowledges it; the peer's handler writes exactly one reply frame per
/// message, in order. On a connection error the task reconnects with exponential backoff and
/// retransmits unacknowledged, not cancelled messages in order. When the buffer is full (in
/// messages or in bytes) the oldest message is dropped, so a dead peer never blocks the caller
/// nor grows memory.
///
/// Clones share the same connections. Connection tasks stop when the last clone is dropped.
#[derive(Clone)]
pub struct ReliableSender {
    inner: Arc<Inner>,
}

struct Inner {
    peers: Mutex<HashMap<SocketAddr, Arc<Peer>>>,
    limits: Limits,
    shutdown: CancellationToken,
    /// Proven on every connection when set (the committee's ports require it).
    credentials: Option<Arc<Credentials>>,
    /// Where messages go instead of a socket, in a simulation (see [`crate::testing::Tap`]).
    #[cfg(any(test, feature = "testing"))]
    tap: Option<crate::testing::Tap>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Default for ReliableSender {
    fn default() -> Self {
        Self::new()
    }
}

impl ReliableSender {
    pub fn new() -> Self {
        Self::with_config(DEFAULT_RELIABLE_CAPACITY, DEFAULT_MAX_FRAME_SIZE)
    }

    /// Keeps at most `capacity` unacknowledged messages per peer.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_config(capacity, DEFAULT_MAX_FRAME_SIZE)
    }

    /// Keeps at most `capacity` unacknowledged messages per peer and refuses messages longer
    /// than `max_frame_size` (the peers' receivers would reject them anyway).
    pub fn with_config(capacity: usize, max_frame_size: usize) -> Self {
        Self::build(capacity, max_frame_size, None)
    }

    /// As [`ReliableSender::with_config`], proving `credentials` on every connection it opens.
    pub fn authenticated(capacity: usize, max_frame_size: usize, credentials: Credentials) -> Self {
        Self::build(capacity, max_frame_size, Some(Arc::new(credentials)))
    }

    fn build(
        capacity: usize,
        max_frame_size: usize,
        credentials: Option<Arc<Credentials>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                peers: Mutex::new(HashMap::new()),
                limits: Limits {
                    capacity: capacity.max(1),
                    max_bytes: DEFAULT_RELIABLE_BYTES,
                    max_frame_size,
                    backoff: (INITIAL_BACKOFF, MAX_BACKOFF),
                },
                shutdown: CancellationToken::new(),
                credentials,
                #[cfg(any(test, feature = "testing"))]
                tap: None,
            }),
        }
    }

    /// A sender that hands every message to `tap` instead of a connection (a simulated
    /// network: the message is never acknowledged, and never sent again).
    #[cfg(any(test, feature = "testing"))]
    pub fn tapped(tap: crate::testing::Tap) -> Self {
        let mut sender = Self::new();
        if let Some(inner) = Arc::get_mut(&mut sender.inner) {
            inner.tap = Some(tap);
        }
        sender
    }

    /// Keeps at most `max_bytes` of unacknowledged messages per peer (besides the count). Set
    /// before the first send.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.limits.max_bytes = max_bytes.max(1);
        }
        self
    }

    /// Waits at least `initial`, then twice as long after each attempt that delivers nothing, up
    /// to `max`, between connection attempts to a peer (tests use long waits). Set before the
    /// first send.
    #[cfg(test)]
    fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.limits.backoff = (initial, max);
        }
        self
    }

    /// Queues `data` for `address` and returns at once; the handler resolves with the ack.
    pub async fn send(&mut self, address: SocketAddr, data: Bytes) -> CancelHandler {
        let (reply, handler) = oneshot::channel();
        if data.len() > self.inner.limits.max_frame_size {
            warn!(
                peer = %address,
                size = data.len(),
                max = self.inner.limits.max_frame_size,
                "dropping message larger than the maximum frame size"
            );
            return handler;
        }
        #[cfg(any(test, feature = "testing"))]
        if let Some(tap) = &self.inner.tap {
            tap(address, data);
            return handler;
        }
        self.peer(address).push(data, reply);
        handler
    }

    pub async fn broadcast(
        &mut self,
        addresses: Vec<SocketAddr>,
        data: Bytes,
    ) -> Vec<CancelHandler> {
        let mut handlers = Vec::with_capacity(addresses.len());
        for address in addresses {
            handlers.push(self.send(address, data.clone()).await);
        }
        handlers
    }

    /// Sends to `nodes` addresses picked at random (all of them if there are fewer).
    pub async fn lucky_broadcast(
        &mut self,
        mut addresses: Vec<SocketAddr>,
        data: Bytes,
        nodes: usize,
    ) -> Vec<CancelHandler> {
        addresses.shuffle(&mut rand::thread_rng());
        addresses.truncate(nodes);
        self.broadcast(addresses, data).await
    }

    /// The peer's buffer, spawning its connection task on first use.
    fn peer(&self, address: SocketAddr) -> Arc<Peer> {
        let mut peers = self
            .inner
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        peers
            .entry(address)
            .or_insert_with(|| {
                let peer = Arc::new(Peer::new(
                    address,
                    self.inner.limits,
                    self.inner.credentials.clone(),
                ));
                let task = peer.clone();
                let shutdown = self.inner.shutdown.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = shutdown.cancelled() => {}
                        _ = task.keep_connected() => {}
                    }
                });
                peer
            })
            .clone()
    }
}

/// A message waiting for its ack.
struct Pending {
    /// Position in the order of `send` calls; acks are matched by it.
    seq: u64,
    data: Bytes,
    reply: oneshot::Sender<Bytes>,
    /// When `send` was called; stamped only under emulation (the link's latency counts from it).
    sent: Option<Instant>,
}

impl Pending {
    /// The caller dropped its handler: the message need not be (re)sent.
    fn cancelled(&self) -> bool {
        self.reply.is_closed()
    }
}

struct Peer {
    address: SocketAddr,
    limits: Limits,
    credentials: Option<Arc<Credentials>>,
    /// The emulated link to this peer, if any.
    link: Option<Arc<Link>>,
    state: Mutex<State>,
    /// Wakes the connection task: new messages, or room in the in-flight window.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Unacknowledged messages in `seq` order.
    queue: VecDeque<Pending>,
    /// Bytes of the messages in `queue`.
    bytes: usize,
    next_seq: u64,
    /// Messages with `seq` below this were written on the current connection (or skipped as
    /// cancelled).
    cursor: u64,
    /// `seq`s written on the current connection, oldest first: the peer acks in this order.
    in_flight: VecDeque<u64>,
    /// Acks received on the current connection.
    acked: u64,
    /// The message next to be written on an emulated link of limited rate and when the link's
    /// bucket lets it leave, once it has taken its bytes (only the next one takes them, so the
    /// messages keep their order).
    leaves: Option<(u64, Instant)>,
    /// Messages dropped because the buffer was full.
    overflowed: u64,
}

impl Peer {
    fn new(address: SocketAddr, limits: Limits, credentials: Option<Arc<Credentials>>) -> Self {
        let link = credentials
            .as_ref()
            .and_then(|c| c.emulation.as_ref())
            .and_then(|e| e.link_to(&address));
        Self {
            address,
            limits,
            credentials,
            link,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, data: Bytes, reply: oneshot::Sender<Bytes>) {
        let mut state = self.lock();
        while !state.queue.is_empty()
            && (state.queue.len() >= self.limits.capacity
                || state.bytes + data.len() > self.limits.max_bytes)
        {
            // Dropping the oldest entry drops its reply sender, so its handler errors. If it is
            // in flight, its ack will find no entry and be ignored.
            state.pop_front();
            state.overflowed += 1;
            if state.overflowed.is_power_of_two() {
                warn!(
                    peer = %self.address,
                    dropped = state.overflowed,
                    "reliable sender buffer full; dropping oldest messages"
                );
            }
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        let sent = self.link.as_ref().map(|_| Instant::now());
        state.bytes += data.len();
        state.queue.push_back(Pending {
            seq,
            data,
            reply,
            sent,
        });
        drop(state);
        self.wake.notify_one();
    }

    /// Connects whenever there is something to deliver, forever (until shutdown).
    async fn keep_connected(&self) {
        let mut backoff = Backoff::new(self.limits.backoff);
        loop {
            self.wait_for_work().await;
            match connect(self.address, self.credentials.as_deref()).await {
                Ok(stream) => {
                    debug!(peer = %self.address, "connected");
                    let error = self.serve(stream).await;
                    debug!(peer = %self.address, %error, "connection lost");
                }
                Err(error) => debug!(peer = %self.address, %error, "failed to connect"),
            }
            if self.end_connection() {
                backoff.reset();
            }
            if self.has_live_messages() {
                let delay = backoff.next_delay();
                match self.member_here() {
                    // A member that connects to us listens again: no reason to wait longer.
                    Some((presence, member)) => tokio::select! {
                        () = clock::sleep(delay) => {}
                        () = presence.arrival(member) => backoff.reset(),
                    },
                    None => clock::sleep(delay).await,
                }
            }
        }
    }

    /// The member expected at this address and where its arrivals are announced (committee
    /// links only).
    fn member_here(&self) -> Option<(&Presence, &PublicKey)> {
        let credentials = self.credentials.as_deref()?;
        let member = credentials.acceptor_at(&self.address)?;
        Some((&credentials.presence, member))
    }

    async fn wait_for_work(&self) {
        while !self.has_live_messages() {
            self.wake.notified().await;
        }
    }

    fn has_live_messages(&self) -> bool {
        self.lock().queue.iter().any(|pending| !pending.cancelled())
    }

    /// Forgets the connection's progress so everything unacknowledged is written again, and
    /// discards cancelled messages. Returns whether the connection delivered anything.
    fn end_connection(&self) -> bool {
        let mut state = self.lock();
        state.queue.retain(|pending| !pending.cancelled());
        state.bytes = state.queue.iter().map(|pending| pending.data.len()).sum();
        state.cursor = 0;
        state.in_flight.clear();
        state.leaves = None;
        std::mem::take(&mut state.acked) > 0
    }

    /// Runs one connection until it fails; returns why.
    async fn serve(&self, stream: TcpStream) -> io::Error {
        let (read, write) = stream.into_split();
        let mut writer = FrameWriter::new(write);
        let mut reader = FramedRead::new(read, codec(self.limits.max_frame_size));
        // Writing and reading acks run concurrently: a peer blocked on writing acks we do not
        // read would stop reading our messages.
        let (written, read) = match &self.link {
            None => (
                self.write_loop(&mut writer).left_future(),
                self.read_loop(&mut reader).left_future(),
            ),
            Some(link) => (
                self.write_loop_emulated(&mut writer, link).right_future(),
                self.read_loop_emulated(&mut reader, link).right_future(),
            ),
        };
        tokio::select! {
            result = written => result.err(),
            result = read => result.err(),
        }
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "closed by peer"))
    }

    async fn write_loop(&self, writer: &mut FrameWriter<OwnedWriteHalf>) -> io::Result<()> {
        loop {
            let (batch, _) = self.take_unwritten(None);
            if batch.is_empty() {
                self.wake.notified().await;
            } else {
                writer.write_frames(&batch).await?;
            }
        }
    }

    /// As `write_loop`, writing each message only once it may cross the link.
    async fn write_loop_emulated(
        &self,
        writer: &mut FrameWriter<OwnedWriteHalf>,
        link: &Link,
    ) -> io::Result<()> {
        let mut state = link.watch();
        loop {
            let crossing = Crossing {
                link: *state.borrow_and_update(),
                delay: link.outgoing,
                bandwidth: link.bandwidth.as_deref(),
                now: Instant::now(),
            };
            let (batch, next_due) = self.take_unwritten(Some(crossing));
            if !batch.is_empty() {
                writer.write_frames(&batch).await?;
                continue;
            }
            tokio::select! {
                () = self.wake.notified() => {}
                () = sleep_until_due(next_due) => {}
                // The link (which owns the sender) outlives this connection: this never errs.
                _ = state.changed() => {}
            }
        }
    }

    /// Claims every message not yet written on this connection, within the in-flight window;
    /// under emulation only those that may cross the link by now, and says when the next one may.
    fn take_unwritten(&self, crossing: Option<Crossing>) -> (Vec<Bytes>, Option<Instant>) {
        let mut state = self.lock();
        let State {
            queue,
            cursor,
            in_flight,
            leaves,
            ..
        } = &mut *state;
        let start = queue.partition_point(|pending| pending.seq < *cursor);
        let mut batch = Vec::new();
        let mut next_due = None;
        for pending in queue.range(start..) {
            if in_flight.len() >= self.limits.capacity {
                break;
            }
            if let (Some(crossing), Some(sent)) = (&crossing, pending.sent) {
                // Due times never decrease along the queue: the first not due ends the batch.
                if let Err(due) = crossing.clears(pending, sent, leaves) {
                    next_due = due;
                    break;
                }
            }
            *cursor = pending.seq + 1;
            if !pending.cancelled() {
                in_flight.push_back(pending.seq);
                batch.push(pending.data.clone());
            }
        }
        (batch, next_due)
    }

    /// Matches reply frames to in-flight messages. Returns `Ok` at end of stream.
    async fn read_loop(
        &self,
        reader: &mut FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    ) -> io::Result<()> {
        while let Some(frame) = reader.next().await {
            self.acknowledge(frame?.freeze())?;
        }
        Ok(())
    }

    /// As `read_loop`, taking each reply the link's return latency after it arrived, and none
    /// while the link is cut.
    async fn read_loop_emulated(
        &self,
        reader: &mut FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
        link: &Link,
    ) -> io::Result<()> {
        // Not paced: the peer's rate is the peer's to emulate, and acks are a few bytes.
        let mut acks = DelayLine::new(link.incoming, None);
        let mut state = link.watch();
        let mut due = Vec::new();
        loop {
            let next_due = acks.next_due(&state.borrow_and_update());
            tokio::select! {
                frame = reader.next() => match frame {
                    Some(frame) => {
                        let frame = frame?.freeze();
                        acks.push(Instant::now(), frame.len(), frame);
                    }
                    None => return Ok(()),
                },
                () = sleep_until_due(next_due) => {}
                // The link (which owns the sender) outlives this connection: this never errs.
                _ = state.changed() => {}
            }
            acks.pop_due(&link.state(), Instant::now(), usize::MAX, &mut due);
            for ack in due.drain(..) {
                self.acknowledge(ack)?;
            }
        }
    }

    fn acknowledge(&self, ack: Bytes) -> io::Result<()> {
        let mut state = self.lock();
        let window_was_full = state.in_flight.len() >= self.limits.capacity;
        let Some(seq) = state.in_flight.pop_front() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply frame without an outstanding message",
            ));
        };
        state.acked += 1;
        // Entries older than `seq` still queued were skipped as cancelled when this connection
        // wrote `seq`; if `seq` itself is gone it was dropped on overflow.
        let mut ack = Some(ack);
        while state.queue.front().is_some_and(|front| front.seq <= seq) {
            if let Some(pending) = state.pop_front() {
                if pending.seq == seq {
                    if let Some(ack) = ack.take() {
                        // The caller may have dropped its handler; nothing to do then.
                        let _ = pending.reply.send(ack);
                    }
                }
            }
        }
        drop(state);
        if window_was_full {
            self.wake.notify_one();
        }
        Ok(())
    }
}

impl State {
    /// Takes the oldest message off the queue, keeping `bytes` in step.
    fn pop_front(&mut self) -> Option<Pending> {
        let pending = self.queue.pop_front()?;
        self.bytes -= pending.data.len();
        Some(pending)
    }
}

/// What every peer of a sender is held to.
#[derive(Clone, Copy)]
struct Limits {
    /// Messages kept until acknowledged, and written before an ack.
    capacity: usize,
    /// Bytes kept until acknowledged.
    max_bytes: usize,
    /// Longer messages are refused.
    max_frame_size: usize,
    /// First and longest wait between connection attempts.
    backoff: (Duration, Duration),
}

#[cfg(test)]
mod tests;
