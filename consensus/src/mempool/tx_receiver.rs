//! The clients' port: accepts connections and forwards transactions to the batch maker.
//!
//! Clients write one length-delimited frame per transaction and read nothing. To keep the cost
//! per transaction low, every frame already buffered on a connection is gathered into one chunk
//! and the chunk is one channel message (not one message per transaction).

use super::batch::now_ms;
use crate::network::codec;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::FramedRead;
use tracing::{debug, warn};

/// Largest transaction accepted; a larger frame closes the connection.
pub const MAX_TRANSACTION_SIZE: usize = 128 * 1024;

/// Most transactions gathered into one chunk, so one busy client cannot hold a huge chunk back.
const MAX_CHUNK_TXS: usize = 1_024;

/// Read buffer per connection: a read syscall takes in a few hundred typical transactions.
const READ_BUFFER: usize = 64 * 1024;

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Transactions read from one connection in one go.
pub struct TxChunk {
    /// When they were read (ms since the epoch): the `receive` hop of a sample among them,
    /// taken once per chunk rather than per transaction.
    pub received_ms: u64,
    pub txs: Vec<Bytes>,
}

pub struct TxReceiver {
    listener: TcpListener,
    max_tx_size: usize,
    tx_batch_maker: mpsc::Sender<TxChunk>,
}

impl TxReceiver {
    /// Binds `address` and serves it in the background; returns the bound address.
    pub async fn spawn(
        address: SocketAddr,
        max_tx_size: usize,
        tx_batch_maker: mpsc::Sender<TxChunk>,
    ) -> io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        let receiver = TxReceiver {
            listener,
            max_tx_size,
            tx_batch_maker,
        };
        Ok((local, tokio::spawn(receiver.run())))
    }

    async fn run(self) {
        loop {
            match self.listener.accept().await {
                Ok((socket, peer)) => {
                    debug!("transactions connection from {peer}");
                    tokio::spawn(serve(
                        socket,
                        peer,
                        self.max_tx_size,
                        self.tx_batch_maker.clone(),
                    ));
                }
                Err(e) => {
                    warn!("failed to accept a transactions connection: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
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
    tx_batch_maker: mpsc::Sender<TxChunk>,
) {
    let mut frames = FramedRead::with_capacity(socket, codec(max_tx_size), READ_BUFFER);
    loop {
        let first = match frames.next().await {
            Some(Ok(frame)) => frame.freeze(),
            Some(Err(e)) => {
                warn!("closing transactions connection from {peer}: {e}");
                return;
            }
            None => return,
        };
        let received_ms = now_ms();
        let mut chunk = Vec::with_capacity(64);
        chunk.push(first);
        let mut end = None;
        // Take what is already readable without waiting: `now_or_never` yields `None` as soon as
        // the next frame would need the socket to become readable again.
        while chunk.len() < MAX_CHUNK_TXS {
            match frames.next().now_or_never() {
                Some(Some(Ok(frame))) => chunk.push(frame.freeze()),
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
        let chunk = TxChunk {
            received_ms,
            txs: chunk,
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
        let (address, _handle) = TxReceiver::spawn("127.0.0.1:0".parse().expect("addr"), 64, tx)
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
}
