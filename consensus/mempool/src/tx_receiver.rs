//! The clients' port: accepts connections and forwards transactions to the batch maker.
//!
//! Clients write one length-delimited frame per transaction and read nothing. To keep the cost
//! per transaction low, every frame already buffered on a connection is gathered into one chunk
//! and the chunk is one channel message (not one message per transaction).
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
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use network::codec;
use plumbing::now_ms;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
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

/// Transactions read from one connection in one go.
pub struct TxChunk {
    /// When they were read (ms since the epoch): the `receive` hop of a sample among them,
    /// taken once per chunk rather than per transaction.
    pub received_ms: u64,
    pub txs: Vec<Bytes>,
    /// The chunk's room in the queue to the batch maker, given back when the chunk is dropped.
    pub room: Option<OwnedSemaphorePermit>,
}

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
        match tokio::time::timeout(deadline, &mut task).await {
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
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
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

type Frames = FramedRead<TcpStream, LengthDelimitedCodec>;

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
    let mut frames = FramedRead::with_capacity(socket, codec(port.max_tx_size), READ_BUFFER);
    if let Stop::Drain = forward(&mut frames, peer, &port).await {
        count_unread(&mut frames, peer, &port.metrics).await;
    }
}

/// Reads one client's transactions and forwards them to the batch maker, until it disconnects,
/// sends an oversized or broken frame, the batch maker is gone, or the node stops. Transactions
/// read and not forwarded when the node stops are counted in `unread_txs`.
async fn forward(frames: &mut Frames, peer: SocketAddr, port: &Port) -> Stop {
    // The most one chunk can hold: it stops gathering past MAX_CHUNK_BYTES, by one transaction
    // at most.
    let reserve = (MAX_CHUNK_BYTES + port.max_tx_size).min(MAX_QUEUED_BYTES) as u32;
    let metrics = &port.metrics;
    // Biased towards the stop: once it is signalled, nothing more is forwarded.
    loop {
        let next = tokio::select! {
            biased;
            () = port.drain.cancelled() => return Stop::Drain,
            next = tokio::time::timeout(port.idle_timeout, frames.next()) => next,
        };
        let Ok(next) = next else {
            debug!("closing idle transactions connection from {peer}");
            return Stop::Closed;
        };
        let first = match next {
            Some(Ok(frame)) => frame.freeze(),
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
                MempoolMetrics::add(&metrics.unread_txs, 1);
                return Stop::Drain;
            }
            room = port.queue.clone().acquire_many_owned(reserve) => room,
        };
        let Ok(mut room) = room else {
            return Stop::Closed;
        };
        let received_ms = now_ms();
        let mut bytes = first.len();
        let mut chunk = Vec::with_capacity(64);
        chunk.push(first);
        let mut end = None;
        // Take what is already readable without waiting: `now_or_never` yields `None` as soon as
        // the next frame would need the socket to become readable again.
        while chunk.len() < MAX_CHUNK_TXS && bytes < MAX_CHUNK_BYTES {
            match frames.next().now_or_never() {
                Some(Some(Ok(frame))) => {
                    bytes += frame.len();
                    chunk.push(frame.freeze());
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
        let count = chunk.len() as u64;
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
                    txs: chunk,
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
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(_) => MempoolMetrics::add(&metrics.unread_txs, 1),
            Err(e) => {
                warn!("closing transactions connection from {peer} while stopping: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::SinkExt;
    use tokio_util::codec::FramedWrite;

    #[tokio::test]
    async fn forwards_every_transaction_and_drops_oversized_frames() {
        let (tx, mut rx) = mpsc::channel(16);
        let metrics = Arc::new(MempoolMetrics::default());
        let (address, _handle) = TxReceiver::spawn(
            "127.0.0.1:0".parse().expect("addr"),
            64,
            16,
            Duration::from_secs(60),
            tx,
            metrics.clone(),
        )
        .await
        .expect("bind");
        let socket = TcpStream::connect(address).await.expect("connect");
        let mut client = FramedWrite::new(socket, codec(1024));
        for i in 0..500u32 {
            client
                .feed(Bytes::from(i.to_be_bytes().to_vec()))
                .await
                .expect("feed");
        }
        SinkExt::<Bytes>::flush(&mut client).await.expect("flush");

        let mut received = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), async {
            while received.len() < 500 {
                received.extend(rx.recv().await.expect("chunk").txs);
            }
        })
        .await
        .expect("all transactions forwarded");
        let expected: Vec<Bytes> = (0..500u32)
            .map(|i| Bytes::from(i.to_be_bytes().to_vec()))
            .collect();
        assert_eq!(received, expected);
        let counted = metrics
            .received_txs
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(counted, 500);

        // An oversized transaction closes the connection: the client sees end of stream.
        client.send(Bytes::from(vec![0u8; 65])).await.expect("send");
        let mut socket = client.into_inner();
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::io::AsyncReadExt::read(&mut socket, &mut buf),
        )
        .await
        .expect("closed in time");
        assert!(matches!(read, Ok(0) | Err(_)));
        assert!(rx.try_recv().is_err());
    }

    /// The clients' port is open to anyone, so connections are capped; a
    /// connection over the cap is closed at once, and a slot frees when a client leaves or
    /// stays silent past the idle timeout.
    #[tokio::test]
    async fn byzantine_connection_flood_is_capped_and_idle_clients_leave() {
        let (tx, mut rx) = mpsc::channel(16);
        let (address, _handle) = TxReceiver::spawn(
            "127.0.0.1:0".parse().expect("addr"),
            64,
            2,
            Duration::from_millis(300),
            tx,
            Arc::default(),
        )
        .await
        .expect("bind");
        let mut clients = Vec::new();
        for i in 0..2u8 {
            let socket = TcpStream::connect(address).await.expect("connect");
            let mut client = FramedWrite::new(socket, codec(1024));
            client.send(Bytes::from(vec![i])).await.expect("send");
            let chunk = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("served in time");
            assert_eq!(chunk.map(|c| c.txs), Some(vec![Bytes::from(vec![i])]));
            clients.push(client);
        }
        // The third is closed without being served.
        let mut third = TcpStream::connect(address).await.expect("connect");
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::io::AsyncReadExt::read(&mut third, &mut buf),
        )
        .await
        .expect("closed in time");
        assert!(matches!(read, Ok(0) | Err(_)));
        // The silent clients are closed after the idle timeout...
        for client in clients {
            let mut socket = client.into_inner();
            let read = tokio::time::timeout(
                Duration::from_secs(10),
                tokio::io::AsyncReadExt::read(&mut socket, &mut buf),
            )
            .await
            .expect("idle client closed in time");
            assert!(matches!(read, Ok(0) | Err(_)));
        }
        // ...which frees their slots.
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let socket = TcpStream::connect(address).await.expect("connect");
                let mut client = FramedWrite::new(socket, codec(1024));
                if client.send(Bytes::from_static(b"z")).await.is_ok() {
                    if let Ok(Some(chunk)) =
                        tokio::time::timeout(Duration::from_millis(200), rx.recv()).await
                    {
                        assert_eq!(chunk.txs, vec![Bytes::from_static(b"z")]);
                        return;
                    }
                }
            }
        })
        .await
        .expect("a new client is served once the idle ones left");
    }

    /// A batch maker that takes nothing (its backlog is full) must not make the port buffer
    /// without bound: chunks wait within MAX_QUEUED_BYTES, the connection stops reading and the
    /// client's writes block; once chunks are taken, every transaction arrives, in order.
    #[tokio::test]
    async fn an_idle_batch_maker_stops_the_port_reading() {
        let (tx, mut rx) = mpsc::channel(100_000);
        let tx_size = 1_000;
        let (address, _handle) = TxReceiver::spawn(
            "127.0.0.1:0".parse().expect("addr"),
            tx_size,
            16,
            Duration::from_secs(60),
            tx,
            Arc::default(),
        )
        .await
        .expect("bind");
        // Four times the queue, more than the kernel's socket buffers on loopback can take too.
        let count = 4 * MAX_QUEUED_BYTES / tx_size;
        let client = tokio::spawn(async move {
            let socket = TcpStream::connect(address).await.expect("connect");
            let mut client = FramedWrite::new(socket, codec(2 * tx_size));
            for i in 0..count as u32 {
                let mut tx = vec![0u8; tx_size];
                tx[..4].copy_from_slice(&i.to_be_bytes());
                client.feed(Bytes::from(tx)).await.expect("feed");
            }
            SinkExt::<Bytes>::flush(&mut client).await.expect("flush");
        });
        // Wait until the queue is as full as it gets: less room left than one chunk needs.
        let queued = |rx: &mpsc::Receiver<TxChunk>| rx.len();
        tokio::time::timeout(Duration::from_secs(20), async {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let now = queued(&rx);
                if now > 0 && now == last {
                    break;
                }
                last = now;
            }
        })
        .await
        .expect("the queue fills");
        let mut chunks = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            chunks.push(chunk);
        }
        let bytes: usize = chunks.iter().flat_map(|c| &c.txs).map(Bytes::len).sum();
        assert!(bytes <= MAX_QUEUED_BYTES, "{bytes} bytes queued");
        assert!(!client.is_finished(), "the client's writes never blocked");
        // Taking the chunks gives their room back: the rest arrives, in order.
        fn check(next: &mut u32, chunk: TxChunk) {
            for tx in chunk.txs {
                assert_eq!(tx[..4], next.to_be_bytes());
                *next += 1;
            }
        }
        let mut next = 0u32;
        for chunk in chunks {
            check(&mut next, chunk);
        }
        tokio::time::timeout(Duration::from_secs(60), async {
            while (next as usize) < count {
                check(&mut next, rx.recv().await.expect("chunk"));
            }
        })
        .await
        .expect("every transaction arrives once the queue drains");
        client.await.expect("client");
    }

    /// The node stops while its batch maker takes nothing: the client wrote several times what
    /// the port queues and left. Draining reads every connection to its end: what the batch
    /// maker got (received) and what was left in the connection (unread) are every transaction
    /// written, each once. Whether the connection waits for room in the queue (bytes) or in the
    /// channel (chunks).
    #[tokio::test]
    async fn a_drain_at_the_stop_counts_what_the_batch_maker_never_got() {
        for channel in [100_000, 1] {
            drain_counts_every_transaction(channel).await;
        }
    }

    async fn drain_counts_every_transaction(channel: usize) {
        let (tx, mut rx) = mpsc::channel(channel);
        let tx_size = 1_000;
        let metrics = Arc::new(MempoolMetrics::default());
        let (address, handle) = TxReceiver::spawn(
            "127.0.0.1:0".parse().expect("addr"),
            tx_size,
            16,
            Duration::from_secs(60),
            tx,
            metrics.clone(),
        )
        .await
        .expect("bind");
        let count = 4 * MAX_QUEUED_BYTES / tx_size;
        let client = tokio::spawn(async move {
            let socket = TcpStream::connect(address).await.expect("connect");
            let mut client = FramedWrite::new(socket, codec(2 * tx_size));
            for _ in 0..count {
                client
                    .feed(Bytes::from(vec![7u8; tx_size]))
                    .await
                    .expect("feed");
            }
            // Flushed and closed: the rest of what it wrote waits in the socket buffers.
            SinkExt::<Bytes>::close(&mut client).await.expect("close");
        });
        // The queue fills and the client's writes block: no more is read.
        tokio::time::timeout(Duration::from_secs(20), async {
            let mut last = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let now = rx.len();
                if now > 0 && now == last {
                    break;
                }
                last = now;
            }
        })
        .await
        .expect("the queue fills");
        assert!(!client.is_finished(), "the client's writes never blocked");
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        // The node stops: the drain unblocks the client by reading on, and counts the rest.
        assert!(
            handle.drain(Duration::from_secs(20)).await,
            "drained in time"
        );
        let (received, unread) = (load(&metrics.received_txs), load(&metrics.unread_txs));
        assert_eq!(received + unread, count as u64, "{received} + {unread}");
        assert!(unread > 0);
        client.await.expect("the client wrote everything");
        // Nothing was forwarded past the stop: what the batch maker holds is what was received.
        let mut forwarded = 0;
        while let Ok(chunk) = rx.try_recv() {
            forwarded += chunk.txs.len() as u64;
        }
        assert_eq!(forwarded, received);
    }
}
