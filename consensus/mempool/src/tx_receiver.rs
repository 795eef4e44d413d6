//! The clients' port: accepts connections and forwards transactions to the batch maker.
//!
//! Clients write one length-delimited frame per transaction and read nothing. To keep the cost
//! per transaction low, the frames already buffered on a connection go to the batch maker as
//! they were read, in runs of whole frames (a batch body holds the same frames), gathered into
//! one chunk: one channel message, not one per transaction.
//!
//! The chunks waiting for the batch maker are bounded in bytes, over all connections
//! ([`MAX_QUEUED_BYTES`]): a connection reserves room before it gathers a chunk, and the chunk
//! gives the room back once the batch maker has taken it. When the batch maker stops taking
//! transactions (this node's backlog is full), the room runs out, connections stop reading, and
//! the clients' writes block: back-pressure reaches the load generator instead of memory.
//!
//! So when the node stops, its clients may have written transactions it never read: in the
//! frame a connection holds while it waits for room, in its read buffer, in the kernel's socket
//! buffers. [`TxReceiverHandle::drain`] counts them (`unread_txs`) instead of leaving them
//! unaccounted for: every connection stops forwarding and reads on to the end of its stream.

use super::metrics::MempoolMetrics;
use super::tx_chunk::{FrameRuns, TxChunk};
use batch::TX_PREFIX_LEN;
use futures::{FutureExt, StreamExt};
use plumbing::clock;
use plumbing::now_ms;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Largest transaction accepted; a larger frame closes the connection.
pub const MAX_TRANSACTION_SIZE: usize = 128 * 1024;

/// Most transactions gathered into one chunk, so one busy client cannot hold a huge chunk back.
const MAX_CHUNK_TXS: usize = 1_024;

/// Read buffer per connection: a read syscall takes in a few hundred typical transactions.
const READ_BUFFER: usize = 64 * 1024;

/// A chunk stops gathering at this many bytes: with the bounded channel to the batch maker (a
/// connection waits for room before it reads more), this bounds what one client holds in flight.
const MAX_CHUNK_BYTES: usize = 1 << 20;

/// Bytes of chunks queued for the batch maker, over all connections.
pub const MAX_QUEUED_BYTES: usize = 4 << 20;

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

pub struct TxReceiver {
    listener: TcpListener,
    /// The port is open to anyone: connections beyond this are closed as they are accepted.
    max_connections: usize,
    port: Port,
}

/// What every connection of the port shares.
#[derive(Clone)]
struct Port {
    max_tx_size: usize,
    /// A client silent this long is disconnected, freeing its slot.
    idle_timeout: Duration,
    tx_batch_maker: mpsc::Sender<TxChunk>,
    metrics: Arc<MempoolMetrics>,
    /// Room, in bytes, for chunks on their way to the batch maker.
    queue: Arc<Semaphore>,
    /// Cancelled when the node stops: connections then count what is left instead of
    /// forwarding it.
    drain: CancellationToken,
}

/// The running port.
pub struct TxReceiverHandle {
    task: JoinHandle<()>,
    drain: CancellationToken,
}

impl TxReceiverHandle {
    /// Closes the port and every connection at once.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// For the node's stop: no more connections are accepted, nothing more goes to the batch
    /// maker, and every connection counts in `unread_txs` the transactions it holds, has
    /// buffered and can still read until its client's end of stream. Returns whether every
    /// connection got there within `deadline`; past it the port is closed and what was not
    /// read by then is not counted.
    pub async fn drain(self, deadline: Duration) -> bool {
        self.drain.cancel();
        let mut task = self.task;
        match clock::timeout(deadline, &mut task).await {
            Ok(_) => true,
            Err(_) => {
                task.abort();
                false
            }
        }
    }
}

impl TxReceiver {
    /// Binds `address` and serves it in the background; returns the bound address.
    pub async fn spawn(
        address: SocketAddr,
        max_tx_size: usize,
        max_connections: usize,
        idle_timeout: Duration,
        tx_batch_maker: mpsc::Sender<TxChunk>,
        metrics: Arc<MempoolMetrics>,
    ) -> io::Result<(SocketAddr, TxReceiverHandle)> {
        let listener = TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        let drain = CancellationToken::new();
        let receiver = TxReceiver {
            listener,
            max_connections,
            port: Port {
                max_tx_size,
                idle_timeout,
                tx_batch_maker,
                metrics,
                queue: Arc::new(Semaphore::new(MAX_QUEUED_BYTES)),
                drain: drain.clone(),
            },
        };
        let task = tokio::spawn(receiver.run());
        Ok((local, TxReceiverHandle { task, drain }))
    }

    async fn run(self) {
        // Connection tasks live in this set: counted for the cap, and ended with this task.
        let mut connections = JoinSet::new();
        let mut refused: u64 = 0;
        loop {
            tokio::select! {
                () = self.port.drain.cancelled() => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((socket, peer)) => {
                        if connections.len() >= self.max_connections {
                            refused += 1;
                            if refused.is_power_of_two() {
                                warn!(%peer, refused, "too many transactions connections; closing new ones");
                            }
                            continue;
                        }
                        debug!("transactions connection from {peer}");
                        connections.spawn(serve(socket, peer, self.port.clone()));
                    }
                    Err(e) => {
                        warn!("failed to accept a transactions connection: {e}");
                        clock::sleep(ACCEPT_BACKOFF).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
            if self.port.tx_batch_maker.is_closed() {
                return;
            }
        }
        // Draining: no new connection; each one counts what is left on it and ends.
        while connections.join_next().await.is_some() {}
    }
}

type Frames = FramedRead<TcpStream, FrameRuns>;

/// Why a connection stopped forwarding.
enum Stop {
    /// Nothing more to read: the client left, was idle, sent an oversized or broken frame, or
    /// the batch maker is gone.
    Closed,
    /// The node is stopping: the rest of the stream is to be counted, not forwarded.
    Drain,
}

/// Serves one client's connection: forwards its transactions, and when the node stops, counts
/// the rest.
async fn serve(socket: TcpStream, peer: SocketAddr, port: Port) {
    let mut frames =
        FramedRead::with_capacity(socket, FrameRuns::new(port.max_tx_size), READ_BUFFER);
    if let Stop::Drain = forward(&mut frames, peer, &port).await {
        count_unread(&mut frames, peer, &port.metrics).await;
    }
}

/// Reads one client's transactions and forwards them to the batch maker, until it disconnects,
/// sends an oversized or broken frame, the batch maker is gone, or the node stops. Transactions
/// read and not forwarded when the node stops are counted in `unread_txs`.
async fn forward(frames: &mut Frames, peer: SocketAddr, port: &Port) -> Stop {
    // The most one chunk can hold: it stops gathering past MAX_CHUNK_BYTES, by one frame at most.
    let reserve = (MAX_CHUNK_BYTES + TX_PREFIX_LEN + port.max_tx_size).min(MAX_QUEUED_BYTES) as u32;
    let metrics = &port.metrics;
    // Biased towards the stop: once it is signalled, nothing more is forwarded.
    loop {
        frames.decoder_mut().room = (MAX_CHUNK_TXS, MAX_CHUNK_BYTES);
        let next = tokio::select! {
            biased;
            () = port.drain.cancelled() => return Stop::Drain,
            next = clock::timeout(port.idle_timeout, frames.next()) => next,
        };
        let Ok(next) = next else {
            debug!("closing idle transactions connection from {peer}");
            return Stop::Closed;
        };
        let first = match next {
            Some(Ok(run)) => run,
            Some(Err(e)) => {
                warn!("closing transactions connection from {peer}: {e}");
                return Stop::Closed;
            }
            None => return Stop::Closed,
        };
        // Room first, so nothing more is read from this client while the queue is full: its
        // writes then block. Waiting connections are served in turn (the semaphore is fair).
        let room = tokio::select! {
            biased;
            () = port.drain.cancelled() => {
                MempoolMetrics::add(&metrics.unread_txs, u64::from(first.count()));
                return Stop::Drain;
            }
            room = port.queue.clone().acquire_many_owned(reserve) => room,
        };
        let Ok(mut room) = room else {
            return Stop::Closed;
        };
        let received_ms = now_ms();
        let mut bytes = first.bytes().len();
        let mut count = first.count() as usize;
        let mut runs = vec![first];
        let mut end = None;
        // Take what is already readable without waiting: `now_or_never` yields `None` as soon as
        // the next run would need the socket to become readable again.
        while count < MAX_CHUNK_TXS && bytes < MAX_CHUNK_BYTES {
            frames.decoder_mut().room = (MAX_CHUNK_TXS - count, MAX_CHUNK_BYTES - bytes);
            match frames.next().now_or_never() {
                Some(Some(Ok(run))) => {
                    bytes += run.bytes().len();
                    count += run.count() as usize;
                    runs.push(run);
                }
                Some(Some(Err(e))) => {
                    end = Some(Some(e));
                    break;
                }
                Some(None) => {
                    end = Some(None);
                    break;
                }
                None => break,
            }
        }
        // Forward what was read even if the connection then failed: those transactions were
        // complete frames.
        let count = count as u64;
        // Keep room for what was read; the rest goes back at once.
        let used = room.split(bytes.min(reserve as usize));
        drop(room);
        // Counted as received once the batch maker's channel has taken the chunk, as unread if
        // the node stops first: never both.
        let draining = tokio::select! {
            biased;
            () = port.drain.cancelled() => {
                MempoolMetrics::add(&metrics.unread_txs, count);
                true
            }
            slot = port.tx_batch_maker.reserve() => {
                let Ok(slot) = slot else {
                    return Stop::Closed;
                };
                MempoolMetrics::add(&metrics.received_txs, count);
                slot.send(TxChunk {
                    received_ms,
                    runs,
                    room: used,
                });
                false
            }
        };
        match end {
            Some(Some(e)) => {
                warn!("closing transactions connection from {peer}: {e}");
                return Stop::Closed;
            }
            Some(None) => return Stop::Closed,
            None if draining => return Stop::Drain,
            None => {}
        }
    }
}

/// The node is stopping: counts in `unread_txs`, without forwarding them, the frames left in
/// the read buffer and every frame the client still delivers, until its end of stream (its
/// client has exited by then, so its data and then its end of stream are on the way; the
/// caller's deadline ends this otherwise). A broken frame ends the connection, as it does while
/// forwarding.
async fn count_unread(frames: &mut Frames, peer: SocketAddr, metrics: &MempoolMetrics) {
    frames.decoder_mut().room = (usize::MAX, usize::MAX);
    while let Some(run) = frames.next().await {
        match run {
            Ok(run) => MempoolMetrics::add(&metrics.unread_txs, u64::from(run.count())),
            Err(e) => {
                warn!("closing transactions connection from {peer} while stopping: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
