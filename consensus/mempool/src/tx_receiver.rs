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
use tokio_util::codec::FramedRead;
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
    max_tx_size: usize,
    /// The port is open to anyone: connections beyond this are closed as they are accepted.
    max_connections: usize,
    /// A client silent this long is disconnected, freeing its slot.
    idle_timeout: Duration,
    tx_batch_maker: mpsc::Sender<TxChunk>,
    metrics: Arc<MempoolMetrics>,
    /// Room, in bytes, for chunks on their way to the batch maker.
    queue: Arc<Semaphore>,
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
    ) -> io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        let receiver = TxReceiver {
            listener,
            max_tx_size,
            max_connections,
            idle_timeout,
            tx_batch_maker,
            metrics,
            queue: Arc::new(Semaphore::new(MAX_QUEUED_BYTES)),
        };
        Ok((local, tokio::spawn(receiver.run())))
    }

    async fn run(self) {
        // Connection tasks live in this set: counted for the cap, and ended with this task.
        let mut connections = JoinSet::new();
        let mut refused: u64 = 0;
        loop {
            tokio::select! {
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
                        connections.spawn(serve(
                            socket,
                            peer,
                            self.max_tx_size,
                            self.idle_timeout,
                            self.tx_batch_maker.clone(),
                            self.metrics.clone(),
                            self.queue.clone(),
                        ));
                    }
                    Err(e) => {
                        warn!("failed to accept a transactions connection: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
            if self.tx_batch_maker.is_closed() {
                return;
            }
        }
    }
}

/// Reads one client's transactions until it disconnects, sends an oversized or broken frame,
/// or the batch maker is gone.
async fn serve(
    socket: TcpStream,
    peer: SocketAddr,
    max_tx_size: usize,
    idle_timeout: Duration,
    tx_batch_maker: mpsc::Sender<TxChunk>,
    metrics: Arc<MempoolMetrics>,
    queue: Arc<Semaphore>,
) {
    // The most one chunk can hold: it stops gathering past MAX_CHUNK_BYTES, by one transaction
    // at most.
    let reserve = (MAX_CHUNK_BYTES + max_tx_size).min(MAX_QUEUED_BYTES) as u32;
    let mut frames = FramedRead::with_capacity(socket, codec(max_tx_size), READ_BUFFER);
    loop {
        let Ok(next) = tokio::time::timeout(idle_timeout, frames.next()).await else {
            debug!("closing idle transactions connection from {peer}");
            return;
        };
        let first = match next {
            Some(Ok(frame)) => frame.freeze(),
            Some(Err(e)) => {
                warn!("closing transactions connection from {peer}: {e}");
                return;
            }
            None => return,
        };
        // Room first, so nothing more is read from this client while the queue is full: its
        // writes then block. Waiting connections are served in turn (the semaphore is fair).
        let Ok(mut room) = queue.clone().acquire_many_owned(reserve).await else {
            return;
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
        MempoolMetrics::add(&metrics.received_txs, chunk.len() as u64);
        // Keep room for what was read; the rest goes back at once.
        let used = room.split(bytes.min(reserve as usize));
        drop(room);
        let chunk = TxChunk {
            received_ms,
            txs: chunk,
            room: used,
        };
        if tx_batch_maker.send(chunk).await.is_err() {
            return;
        }
        match end {
            Some(Some(e)) => {
                warn!("closing transactions connection from {peer}: {e}");
                return;
            }
            Some(None) => return,
            None => {}
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
}
