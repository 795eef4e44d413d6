//! A sender that keeps every message until the peer acknowledges it.
//!
//! Each peer gets a buffer shared between the callers and one connection task. Callers only
//! append to it (never wait); the task writes what is new, matches the peer's reply frames to
//! messages in FIFO order, and rewrites everything still unacknowledged after a reconnection.
//! Under emulation a message is written only once its link's latency has passed since it was
//! sent and the link's rate lets it through (and never while the link is cut), and acks are
//! taken the link's return latency after they arrive; unacknowledged messages wait within the
//! same bounded buffer.

use super::codec::DEFAULT_MAX_FRAME_SIZE;
use super::handshake::Credentials;
use bytes::Bytes;
use rand::seq::SliceRandom;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::warn;

mod limits;
mod peer;

use limits::Limits;
use peer::Peer;

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

#[cfg(test)]
mod tests;
