//! Accepts connections and hands every frame to a handler.

use super::codec::{codec, Writer, LENGTH_PREFIX};
use super::error::HandlerError;
use super::handshake::{self, Gate};
use super::link::Link;
use super::slots::{HandshakeSlot, SlotLimits, Slots};
use super::traffic;
use bytes::Bytes;
use crypto::PublicKey;
use futures::{FutureExt, SinkExt, StreamExt};
use plumbing::clock;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::Framed;
use tracing::{debug, warn};

/// After a failed `accept` (typically out of file descriptors), wait this long before the next
/// attempt instead of spinning.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Connections served at once unless configured otherwise (see `Parameters::max_connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Silence after which a connection is closed unless configured otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Processes the frames of every connection a [`Receiver`] accepts.
pub trait MessageHandler: Clone + Send + Sync + 'static {
    /// Called for every frame received, in order, per connection. An `Err` closes this
    /// connection (logged with the peer address), never the receiver.
    ///
    /// Replies may be written with `writer.send(..)` or, cheaper for many small replies,
    /// `writer.feed(..)`: the receiver flushes fed replies before it waits for more input.
    fn dispatch(
        &self,
        writer: &mut Writer,
        message: Bytes,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send;

    /// The handler for one connection whose peer proved it holds `peer`'s committee key (only
    /// on a receiver with a [`Gate`]). Handlers that account per member override it.
    fn for_peer(&self, _peer: PublicKey) -> Self {
        self.clone()
    }
}

/// What a receiver accepts.
#[derive(Clone)]
pub struct ReceiverConfig {
    /// A longer frame closes its connection.
    pub max_frame_size: usize,
    /// Connections served at once; further ones are closed as they are accepted, so a flood of
    /// connections costs a bounded number of tasks and buffers. On a gated port a quarter of it
    /// bounds the handshakes of strangers' hosts, while members' hosts have slots of their own
    /// ([`SlotLimits`]).
    pub max_connections: usize,
    /// A connection silent for this long is closed (its slot is freed).
    pub idle_timeout: Duration,
    /// `Some`: a connection's frames are read only after its peer proved a committee key
    /// ([`handshake`]); `None`: open to anyone (the clients' port, tests).
    pub gate: Option<Gate>,
}

impl ReceiverConfig {
    /// Open to anyone, with the default connection limits.
    pub fn open(max_frame_size: usize) -> Self {
        ReceiverConfig {
            max_frame_size,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            gate: None,
        }
    }

    /// Only for committee members that pass the handshake.
    pub fn gated(max_frame_size: usize, gate: Gate) -> Self {
        ReceiverConfig {
            gate: Some(gate),
            ..Self::open(max_frame_size)
        }
    }
}

/// A TCP server: one task accepts connections, one task per connection reads frames.
pub struct Receiver;

impl Receiver {
    /// Binds `address` (port 0 picks a free port), spawns the accept loop and returns the bound
    /// address with the accept loop's handle. Aborting that handle also closes every connection
    /// it accepted. A frame longer than `max_frame_size`, or bytes that are not a frame, close
    /// that connection with a warning; the receiver keeps accepting. Open to anyone, with the
    /// default limits: see [`Receiver::spawn_with`].
    pub async fn spawn<H: MessageHandler>(
        address: SocketAddr,
        max_frame_size: usize,
        handler: H,
    ) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        Self::spawn_with(address, ReceiverConfig::open(max_frame_size), handler).await
    }

    /// As [`Receiver::spawn`], with the limits and the gate of `config`.
    pub async fn spawn_with<H: MessageHandler>(
        address: SocketAddr,
        config: ReceiverConfig,
        handler: H,
    ) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        debug!(address = %local, "listening");
        let handle = tokio::spawn(accept_loop(listener, config, handler));
        Ok((local, handle))
    }
}

async fn accept_loop<H: MessageHandler>(listener: TcpListener, config: ReceiverConfig, handler: H) {
    // Connections live in a JoinSet owned by this task, so they end when it is aborted.
    let mut connections = JoinSet::new();
    // On a gated port, who may be in the handshake at once (see `slots`).
    let slots = config.gate.as_ref().map(|gate| {
        Slots::new(
            SlotLimits::for_max_connections(config.max_connections),
            gate.member_hosts.as_ref().clone(),
        )
    });
    let mut refused: u64 = 0;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let slot = slots.as_ref().map(|slots| slots.admit(peer.ip()));
                    if connections.len() >= config.max_connections
                        || matches!(slot, Some(None))
                    {
                        // Dropping the socket closes it; logged sparingly, as a flood would.
                        refused += 1;
                        if refused.is_power_of_two() {
                            warn!(%peer, refused, "connection limit reached; closing new connections");
                        }
                        continue;
                    }
                    debug!(%peer, "accepted connection");
                    connections.spawn(serve(
                        socket,
                        peer,
                        config.clone(),
                        handler.clone(),
                        slots.clone(),
                        slot.flatten(),
                    ));
                }
                Err(error) => {
                    warn!(%error, "failed to accept a connection");
                    clock::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
            Some(finished) = connections.join_next(), if !connections.is_empty() => {
                if let Err(error) = finished {
                    if error.is_panic() {
                        warn!(%error, "connection task panicked");
                    }
                }
            }
        }
    }
}

async fn serve<H: MessageHandler>(
    mut socket: TcpStream,
    peer: SocketAddr,
    config: ReceiverConfig,
    handler: H,
    slots: Option<Arc<Slots>>,
    handshaking: Option<HandshakeSlot>,
) {
    if let Err(error) = socket.set_nodelay(true) {
        debug!(%peer, %error, "failed to set TCP_NODELAY");
    }
    let mut link = None;
    let mut member = None;
    let handler = match &config.gate {
        None => handler,
        Some(gate) => match handshake::accept(&mut socket, gate).await {
            Ok(name) => {
                debug!(%peer, %name, "peer authenticated");
                gate.presence.arrived(&name);
                link = gate.emulation.as_ref().and_then(|e| e.link_of(&name));
                member = slots.map(|slots| slots.enter(name));
                handler.for_peer(name)
            }
            Err(error) => {
                // Debug only: a stranger decides how often this happens.
                debug!(%peer, %error, "handshake failed; closing connection");
                return;
            }
        },
    };
    drop(handshaking);
    let frames = read_frames(socket, peer, &config, &handler, link);
    match &member {
        None => frames.await,
        Some(member) => tokio::select! {
            () = frames => {}
            () = member.pushed_out() => {
                debug!(%peer, "the member opened newer connections; closing this one");
            }
        },
    }
}

/// Hands every frame of `socket` to `handler` until the connection ends.
async fn read_frames<H: MessageHandler>(
    socket: TcpStream,
    peer: SocketAddr,
    config: &ReceiverConfig,
    handler: &H,
    link: Option<Arc<Link>>,
) {
    let (mut writer, mut reader) = Framed::new(socket, codec(config.max_frame_size)).split();
    loop {
        // Take the next frame if it is already buffered; otherwise push out any replies the
        // handler fed but did not flush, so a burst of requests gets its replies in one write.
        let next = match reader.next().now_or_never() {
            Some(next) => next,
            None => {
                if let Err(error) = writer.flush().await {
                    debug!(%peer, %error, "failed to write replies; closing connection");
                    return;
                }
                match clock::timeout(config.idle_timeout, reader.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        debug!(%peer, "idle connection; closing it");
                        return;
                    }
                }
            }
        };
        match next {
            Some(Ok(frame)) => {
                traffic::received((frame.len() + LENGTH_PREFIX) as u64);
                if let Some(link) = &link {
                    // Emulated partition: nothing is accepted across a cut. The frame waits for
                    // the heal and we read no further meanwhile, so the peer's writes stall as
                    // over a dead path.
                    link.wait_open().await;
                }
                if let Err(error) = handler.dispatch(&mut writer, frame.freeze()).await {
                    warn!(%peer, %error, "handler failed; closing connection");
                    return;
                }
            }
            Some(Err(error)) => {
                warn!(%peer, %error, "invalid frame; closing connection");
                return;
            }
            None => {
                debug!(%peer, "connection closed by peer");
                // The peer may have only shut down its write side and still wait for replies.
                let _ = writer.flush().await;
                return;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
