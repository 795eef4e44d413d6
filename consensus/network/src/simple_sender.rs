//! A best-effort sender: never waits for a peer, drops what it cannot deliver.

use super::codec::DEFAULT_MAX_FRAME_SIZE;
use super::handshake::Credentials;
use super::link::{sleep_until_due, DelayLine, Link};
use super::transport::{connect, FrameWriter};
use bytes::Bytes;
use plumbing::budgeted::{self, BudgetedReceiver, BudgetedSender, Held, TrySendError};
use plumbing::clock::Instant;
use rand::seq::SliceRandom;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// Messages queued per peer by default; more are dropped until the connection catches up.
pub const DEFAULT_SIMPLE_QUEUE_CAPACITY: usize = 1_000;

/// Bytes queued per peer unless set ([`SimpleSender::with_max_bytes`]), in frames of the
/// maximum size: room for two of the largest messages.
const DEFAULT_QUEUE_FRAMES: usize = 2;

/// At most this many queued messages go out in one write.
const MAX_BURST: usize = 1_024;

/// Best-effort sender: one connection task per peer behind a queue bounded in messages and in
/// bytes (a message counts until it is written to the socket, or dropped). When the queue is
/// full or the peer is down the message is dropped (counted, logged at debug level); the
/// connection is re-opened lazily by the next message. Whatever the peer writes back (acks) is
/// read and discarded so the peer never blocks on us.
///
/// Clones share the same connections. Connection tasks stop when the last clone is dropped.
#[derive(Clone)]
pub struct SimpleSender {
    inner: Arc<Inner>,
}

struct Inner {
    peers: Mutex<HashMap<SocketAddr, BudgetedSender<Outgoing>>>,
    queue_capacity: usize,
    /// Bytes queued per peer, at least `max_frame_size`.
    queue_bytes: usize,
    max_frame_size: usize,
    dropped: Arc<AtomicU64>,
    /// Proven on every connection when set (the committee's ports require it).
    credentials: Option<Arc<Credentials>>,
    /// Where messages go instead of a socket, in a simulation (see [`crate::testing::Tap`]).
    #[cfg(any(test, feature = "testing"))]
    tap: Option<crate::testing::Tap>,
}

/// A queued message; `sent` is stamped only under emulation (its delay counts from it).
struct Outgoing {
    data: Bytes,
    sent: Option<Instant>,
}

impl Inner {
    fn emulated(&self) -> bool {
        self.credentials
            .as_ref()
            .is_some_and(|c| c.emulation.is_some())
    }

    /// The emulated link to `address`, if this sender emulates one.
    fn link_to(&self, address: &SocketAddr) -> Option<Arc<Link>> {
        self.credentials
            .as_ref()
            .and_then(|c| c.emulation.as_ref())
            .and_then(|e| e.link_to(address))
    }
}

impl Default for SimpleSender {
    fn default() -> Self {
        Self::new()
    }
}

impl SimpleSender {
    pub fn new() -> Self {
        Self::with_config(DEFAULT_SIMPLE_QUEUE_CAPACITY, DEFAULT_MAX_FRAME_SIZE)
    }

    /// Queues at most `queue_capacity` messages (and two maximum frames' bytes) per peer and
    /// refuses messages longer than `max_frame_size` (the peers' receivers would reject them
    /// anyway).
    pub fn with_config(queue_capacity: usize, max_frame_size: usize) -> Self {
        Self::build(queue_capacity, max_frame_size, None)
    }

    /// As [`SimpleSender::with_config`], proving `credentials` on every connection it opens.
    pub fn authenticated(
        queue_capacity: usize,
        max_frame_size: usize,
        credentials: Credentials,
    ) -> Self {
        Self::build(queue_capacity, max_frame_size, Some(Arc::new(credentials)))
    }

    fn build(
        queue_capacity: usize,
        max_frame_size: usize,
        credentials: Option<Arc<Credentials>>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                peers: Mutex::new(HashMap::new()),
                queue_capacity: queue_capacity.max(1),
                queue_bytes: max_frame_size.saturating_mul(DEFAULT_QUEUE_FRAMES),
                max_frame_size,
                dropped: Arc::new(AtomicU64::new(0)),
                credentials,
                #[cfg(any(test, feature = "testing"))]
                tap: None,
            }),
        }
    }

    /// A sender that hands every message to `tap` instead of a connection (a simulated
    /// network).
    #[cfg(any(test, feature = "testing"))]
    pub fn tapped(tap: crate::testing::Tap) -> Self {
        let mut sender = Self::new();
        if let Some(inner) = Arc::get_mut(&mut sender.inner) {
            inner.tap = Some(tap);
        }
        sender
    }

    /// Queues at most `max_bytes` per peer (never less than one maximum frame), besides the
    /// count. Set before the first send and before cloning.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.queue_bytes = max_bytes.max(inner.max_frame_size).max(1);
        }
        self
    }

    /// Messages dropped so far (queue full, peer unreachable, connection lost, oversized).
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Bytes queued for `address` now, being written included.
    pub fn queued_bytes(&self, address: &SocketAddr) -> usize {
        self.inner
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(address)
            .map_or(0, BudgetedSender::queued_bytes)
    }

    /// Queues `data` for `address`; returns at once.
    pub async fn send(&mut self, address: SocketAddr, data: Bytes) {
        if data.len() > self.inner.max_frame_size {
            warn!(
                peer = %address,
                size = data.len(),
                max = self.inner.max_frame_size,
                "dropping message larger than the maximum frame size"
            );
            self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        #[cfg(any(test, feature = "testing"))]
        if let Some(tap) = &self.inner.tap {
            tap(address, data);
            return;
        }
        let bytes = data.len();
        let message = Outgoing {
            data,
            sent: self.inner.emulated().then(Instant::now),
        };
        let mut peers = self
            .inner
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let queue = peers
            .entry(address)
            .or_insert_with(|| self.spawn_connection(address));
        let message = match queue.try_send(message, bytes) {
            Ok(()) => return,
            Err(TrySendError::Full(_)) => {
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
                debug!(peer = %address, "send queue full; dropping message");
                return;
            }
            // The connection task is gone (it only ends if its runtime shuts down): replace it.
            Err(TrySendError::Refused(budgeted::SendError::Closed(message))) => message,
            // Not for a message within the frame size: the queue holds at least one.
            Err(TrySendError::Refused(error)) => {
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
                warn!(peer = %address, "dropping message: {error}");
                return;
            }
        };
        let queue = self.spawn_connection(address);
        if queue.try_send(message, bytes).is_err() {
            self.inner.dropped.fetch_add(1, Ordering::Relaxed);
        }
        peers.insert(address, queue);
    }

    pub async fn broadcast(&mut self, addresses: Vec<SocketAddr>, data: Bytes) {
        for address in addresses {
            self.send(address, data.clone()).await;
        }
    }

    /// Sends to `nodes` addresses picked at random (all of them if there are fewer).
    pub async fn lucky_broadcast(
        &mut self,
        mut addresses: Vec<SocketAddr>,
        data: Bytes,
        nodes: usize,
    ) {
        addresses.shuffle(&mut rand::thread_rng());
        addresses.truncate(nodes);
        self.broadcast(addresses, data).await;
    }

    fn spawn_connection(&self, address: SocketAddr) -> BudgetedSender<Outgoing> {
        let (queue, messages, _) =
            budgeted::channel(self.inner.queue_capacity, self.inner.queue_bytes);
        let peer = PeerConnection {
            address,
            connection: None,
            dropped: self.inner.dropped.clone(),
            credentials: self.inner.credentials.clone(),
        };
        match self.inner.link_to(&address) {
            None => tokio::spawn(peer.run(messages)),
            Some(link) => {
                tokio::spawn(peer.run_emulated(messages, link, self.inner.queue_capacity))
            }
        };
        queue
    }
}

/// Delivers queued messages to one peer until every handle to the queue is dropped.
struct PeerConnection {
    address: SocketAddr,
    connection: Option<Connection>,
    dropped: Arc<AtomicU64>,
    credentials: Option<Arc<Credentials>>,
}

impl PeerConnection {
    /// Messages keep their room in the queue's byte budget while they are written: a peer that
    /// reads slowly holds no more than the budget, in the queue and in the burst together.
    async fn run(mut self, mut messages: BudgetedReceiver<Outgoing>) {
        let mut burst = Vec::with_capacity(MAX_BURST);
        let mut frames = Vec::with_capacity(MAX_BURST);
        while messages.recv_many_held(&mut burst, MAX_BURST).await > 0 {
            frames.extend(burst.iter().map(|message| message.get().data.clone()));
            self.deliver(&frames).await;
            frames.clear();
            burst.clear();
        }
    }

    /// As `run`, over an emulated link: each message waits in the link's delay queue until it
    /// may cross (its latency, then the link's rate), still counted in the queue's budget (at
    /// most `capacity` wait there; beyond, the queue fills and messages are dropped as when a
    /// real connection stalls). Other peers have their own task: a slow or cut link holds no
    /// one else.
    async fn run_emulated(
        mut self,
        mut messages: BudgetedReceiver<Outgoing>,
        link: Arc<Link>,
        capacity: usize,
    ) {
        let mut line = DelayLine::new(link.outgoing, link.bandwidth.clone());
        let mut state = link.watch();
        let mut burst = Vec::with_capacity(MAX_BURST);
        let mut due_now: Vec<Held<Outgoing>> = Vec::with_capacity(MAX_BURST);
        let mut frames = Vec::with_capacity(MAX_BURST);
        let mut open = true;
        while open || !line.is_empty() {
            let due = line.next_due(&state.borrow_and_update());
            tokio::select! {
                received = messages.recv_many_held(&mut burst, MAX_BURST.min(capacity - line.len())),
                    if open && line.len() < capacity =>
                {
                    open = received > 0;
                    for message in burst.drain(..) {
                        let Outgoing { data, sent } = message.get();
                        let sent = sent.unwrap_or_else(Instant::now);
                        line.push(sent, data.len(), message);
                    }
                }
                () = sleep_until_due(due) => {}
                // The link (which owns the sender) outlives this task: this never errs.
                _ = state.changed() => {}
            }
            line.pop_due(&link.state(), Instant::now(), MAX_BURST, &mut due_now);
            if !due_now.is_empty() {
                frames.extend(due_now.iter().map(|message| message.get().data.clone()));
                self.deliver(&frames).await;
                frames.clear();
                due_now.clear();
            }
        }
    }

    /// Writes `frames` on the connection, opening one if needed; drops them (counted) if that
    /// fails.
    async fn deliver(&mut self, frames: &[Bytes]) {
        let address = self.address;
        if self.connection.as_ref().is_some_and(Connection::is_closed) {
            self.connection = None;
        }
        if self.connection.is_none() {
            match connect(address, self.credentials.as_deref()).await {
                Ok(stream) => self.connection = Some(Connection::new(stream)),
                Err(error) => {
                    debug!(peer = %address, %error, lost = frames.len(), "failed to connect; dropping messages");
                    self.dropped
                        .fetch_add(frames.len() as u64, Ordering::Relaxed);
                    return;
                }
            }
        }
        if let Some(open) = self.connection.as_mut() {
            if let Err(error) = open.writer.write_frames(frames).await {
                debug!(peer = %address, %error, lost = frames.len(), "failed to send; dropping messages");
                self.dropped
                    .fetch_add(frames.len() as u64, Ordering::Relaxed);
                self.connection = None;
            }
        }
    }
}

struct Connection {
    writer: FrameWriter<OwnedWriteHalf>,
    /// Reads and discards whatever the peer writes; it finishing means the peer closed.
    drain: JoinHandle<()>,
}

impl Connection {
    fn new(stream: TcpStream) -> Self {
        let (mut read, write) = stream.into_split();
        let drain = tokio::spawn(async move {
            let _ = tokio::io::copy(&mut read, &mut tokio::io::sink()).await;
        });
        Self {
            writer: FrameWriter::new(write),
            drain,
        }
    }

    /// Whether the peer has closed the connection (checked before writing, so a message is not
    /// written into a connection already known to be dead).
    fn is_closed(&self) -> bool {
        self.drain.is_finished()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.drain.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::tests::{TestHandler, DEADLINE};
    use crate::Receiver;
    use futures::StreamExt;
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio::time::timeout;

    async fn free_address() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        listener.local_addr().expect("address")
    }

    /// The next frame a peer reads, within the deadline.
    async fn next_frame(
        frames: &mut (impl futures::Stream<Item = std::io::Result<bytes::BytesMut>> + Unpin),
    ) -> Bytes {
        timeout(DEADLINE, frames.next())
            .await
            .expect("in time")
            .expect("open")
            .expect("a frame")
            .freeze()
    }

    #[tokio::test]
    async fn delivers_in_order_when_the_peer_is_up() {
        let (handler, mut received) = TestHandler::new();
        let (address, _handle) =
            Receiver::spawn(free_address().await, DEFAULT_MAX_FRAME_SIZE, handler)
                .await
                .expect("bind");
        let mut sender = SimpleSender::new();
        for i in 0..100u32 {
            sender
                .send(address, Bytes::from(i.to_be_bytes().to_vec()))
                .await;
        }
        for i in 0..100u32 {
            let got = timeout(DEADLINE, received.recv())
                .await
                .expect("delivered in time")
                .expect("receiver alive");
            assert_eq!(&got[..], &i.to_be_bytes());
        }
        assert_eq!(sender.dropped(), 0);
    }

    #[tokio::test]
    async fn does_not_block_when_the_peer_is_down_and_recovers_lazily() {
        let address = free_address().await;
        let mut sender = SimpleSender::with_config(4, DEFAULT_MAX_FRAME_SIZE);
        timeout(DEADLINE, async {
            for _ in 0..1_000 {
                sender.send(address, Bytes::from_static(b"lost")).await;
            }
        })
        .await
        .expect("sending to a dead peer never blocks");

        let (handler, mut received) = TestHandler::new();
        let (address, _handle) = Receiver::spawn(address, DEFAULT_MAX_FRAME_SIZE, handler)
            .await
            .expect("bind");
        // Best effort: messages queued while the peer was down may be dropped, so keep sending
        // until one gets through.
        timeout(DEADLINE, async {
            loop {
                sender.send(address, Bytes::from_static(b"found")).await;
                let wait = timeout(Duration::from_millis(100), received.recv()).await;
                if let Ok(Some(message)) = wait {
                    if &message[..] == b"found" {
                        return;
                    }
                }
            }
        })
        .await
        .expect("delivered once the peer is up");
        assert!(sender.dropped() > 0);
    }

    /// A peer that reads nothing holds at most the queue's byte budget of this sender's memory
    /// (queued and being written): past it, messages are dropped and counted. Counted in
    /// messages alone, the queue took its 1,000 messages whatever their size, frames of up to
    /// 8 MB. Once the peer reads again, what was queued arrives and room is free again.
    #[tokio::test(flavor = "current_thread")]
    async fn a_peer_that_reads_nothing_holds_at_most_the_byte_budget() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let frame = 64 * 1024;
        // Two frames of room (the default budget) in a queue of 1,000 messages.
        let mut sender = SimpleSender::with_config(1_000, frame);
        let message = |i: u8| Bytes::from(vec![i; frame]);
        // `send` never waits, so on this one thread the connection task only starts after the
        // loop: the queue alone decides what is kept.
        for i in 0..100 {
            sender.send(address, message(i)).await;
        }
        assert_eq!(sender.dropped(), 98, "more than two frames were queued");

        let (socket, _) = timeout(DEADLINE, listener.accept())
            .await
            .expect("the sender connects")
            .expect("accept");
        let mut frames = tokio_util::codec::FramedRead::new(socket, crate::codec(frame));
        for i in 0..2 {
            assert_eq!(next_frame(&mut frames).await, message(i));
        }
        // Written, so their room is back: the next two fit again.
        timeout(DEADLINE, async {
            while sender.queued_bytes(&address) > 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the room comes back once the frames are written");
        sender.send(address, message(100)).await;
        sender.send(address, message(101)).await;
        assert_eq!(sender.dropped(), 98);
        for i in 100..102 {
            assert_eq!(next_frame(&mut frames).await, message(i));
        }
    }

    #[tokio::test]
    async fn oversized_message_is_dropped() {
        let mut sender = SimpleSender::with_config(4, 8);
        sender
            .send(free_address().await, Bytes::from(vec![0u8; 9]))
            .await;
        assert_eq!(sender.dropped(), 1);
    }

    #[tokio::test]
    async fn lucky_broadcast_reaches_the_requested_number_of_peers() {
        let (handler, mut received) = TestHandler::new();
        let mut addresses = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..3 {
            let (address, handle) = Receiver::spawn(
                free_address().await,
                DEFAULT_MAX_FRAME_SIZE,
                handler.clone(),
            )
            .await
            .expect("bind");
            addresses.push(address);
            handles.push(handle);
        }
        let mut sender = SimpleSender::new();
        sender
            .lucky_broadcast(addresses, Bytes::from_static(b"lucky"), 2)
            .await;
        for _ in 0..2 {
            let got = timeout(DEADLINE, received.recv()).await.expect("in time");
            assert_eq!(got.as_deref(), Some(&b"lucky"[..]));
        }
    }
}
