//! Accepts connections and hands every frame to a handler.

use super::codec::{codec, Writer};
use super::error::HandlerError;
use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::codec::Framed;
use tracing::{debug, warn};

/// After a failed `accept` (typically out of file descriptors), wait this long before the next
/// attempt instead of spinning.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

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
}

/// A TCP server: one task accepts connections, one task per connection reads frames.
pub struct Receiver;

impl Receiver {
    /// Binds `address` (port 0 picks a free port), spawns the accept loop and returns the bound
    /// address with the accept loop's handle. Aborting that handle also closes every connection
    /// it accepted. A frame longer than `max_frame_size`, or bytes that are not a frame, close
    /// that connection with a warning; the receiver keeps accepting.
    pub async fn spawn<H: MessageHandler>(
        address: SocketAddr,
        max_frame_size: usize,
        handler: H,
    ) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
        let listener = TcpListener::bind(address).await?;
        let local = listener.local_addr()?;
        debug!(address = %local, "listening");
        let handle = tokio::spawn(accept_loop(listener, max_frame_size, handler));
        Ok((local, handle))
    }
}

async fn accept_loop<H: MessageHandler>(listener: TcpListener, max_frame_size: usize, handler: H) {
    // Connections live in a JoinSet owned by this task, so they end when it is aborted.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    debug!(%peer, "accepted connection");
                    connections.spawn(serve(socket, peer, max_frame_size, handler.clone()));
                }
                Err(error) => {
                    warn!(%error, "failed to accept a connection");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
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
    socket: TcpStream,
    peer: SocketAddr,
    max_frame_size: usize,
    handler: H,
) {
    if let Err(error) = socket.set_nodelay(true) {
        debug!(%peer, %error, "failed to set TCP_NODELAY");
    }
    let (mut writer, mut reader) = Framed::new(socket, codec(max_frame_size)).split();
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
                reader.next().await
            }
        };
        match next {
            Some(Ok(frame)) => {
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
pub(crate) mod tests {
    use super::*;
    use crate::network::DEFAULT_MAX_FRAME_SIZE;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::mpsc;
    use tokio::time::timeout;

    pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

    /// Records every message and replies `ack:<message>`; fails on the message `fail`.
    #[derive(Clone)]
    pub(crate) struct TestHandler {
        pub(crate) received: mpsc::UnboundedSender<Bytes>,
    }

    impl TestHandler {
        pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<Bytes>) {
            let (received, rx) = mpsc::unbounded_channel();
            (Self { received }, rx)
        }
    }

    impl MessageHandler for TestHandler {
        async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
            if &message[..] == b"fail" {
                return Err(HandlerError::Malformed("asked to fail".into()));
            }
            let _ = self.received.send(message.clone());
            let mut reply = b"ack:".to_vec();
            reply.extend_from_slice(&message);
            writer.send(Bytes::from(reply)).await?;
            Ok(())
        }
    }

    async fn start() -> (SocketAddr, mpsc::UnboundedReceiver<Bytes>, JoinHandle<()>) {
        let (handler, rx) = TestHandler::new();
        let address = "127.0.0.1:0".parse().expect("address");
        let (address, handle) = Receiver::spawn(address, 64, handler).await.expect("bind");
        (address, rx, handle)
    }

    type Client = Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>;

    async fn client(address: SocketAddr) -> Client {
        let stream = TcpStream::connect(address).await.expect("connect");
        Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE))
    }

    async fn request(client: &mut Client, message: &'static [u8]) -> Bytes {
        client
            .send(Bytes::from_static(message))
            .await
            .expect("send");
        let reply = timeout(DEADLINE, client.next())
            .await
            .expect("reply in time")
            .expect("connection open")
            .expect("valid frame");
        reply.freeze()
    }

    /// Waits until the server closes `stream` (end of file or a reset).
    async fn assert_closed(mut stream: TcpStream) {
        let mut buf = [0u8; 64];
        loop {
            match timeout(DEADLINE, stream.read(&mut buf))
                .await
                .expect("server closes the connection in time")
            {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    }

    async fn assert_still_serving(address: SocketAddr) {
        let mut good = client(address).await;
        assert_eq!(&request(&mut good, b"hello").await[..], b"ack:hello");
    }

    #[tokio::test]
    async fn replies_to_each_frame_in_order() {
        let (address, mut received, _handle) = start().await;
        let mut client = client(address).await;
        for message in [&b"one"[..], b"two", b""] {
            client
                .feed(Bytes::copy_from_slice(message))
                .await
                .expect("feed");
        }
        SinkExt::<Bytes>::flush(&mut client).await.expect("flush");
        for message in [&b"one"[..], b"two", b""] {
            let reply = timeout(DEADLINE, client.next())
                .await
                .expect("in time")
                .expect("open")
                .expect("frame");
            assert_eq!(&reply[4..], message);
            let got = timeout(DEADLINE, received.recv()).await.expect("in time");
            assert_eq!(got.as_deref(), Some(message));
        }
    }

    #[tokio::test]
    async fn garbage_closes_the_connection_only() {
        let (address, _received, _handle) = start().await;
        let mut bad = TcpStream::connect(address).await.expect("connect");
        bad.write_all(b"this is not a frame at all")
            .await
            .expect("write");
        assert_closed(bad).await;
        assert_still_serving(address).await;
    }

    #[tokio::test]
    async fn oversized_length_prefix_closes_the_connection_only() {
        let (address, _received, _handle) = start().await;
        let mut bad = TcpStream::connect(address).await.expect("connect");
        bad.write_all(&65u32.to_be_bytes()).await.expect("write");
        assert_closed(bad).await;
        assert_still_serving(address).await;
    }

    #[tokio::test]
    async fn disconnect_mid_frame_is_survived() {
        let (address, mut received, _handle) = start().await;
        let mut bad = TcpStream::connect(address).await.expect("connect");
        let mut bytes = 5u32.to_be_bytes().to_vec();
        bytes.extend_from_slice(b"whole");
        bytes.extend_from_slice(&10u32.to_be_bytes());
        bytes.extend_from_slice(b"half");
        bad.write_all(&bytes).await.expect("write");
        drop(bad);
        // The complete frame was still delivered; the truncated one was not.
        let got = timeout(DEADLINE, received.recv()).await.expect("in time");
        assert_eq!(got.as_deref(), Some(&b"whole"[..]));
        assert_still_serving(address).await;
        let got = timeout(DEADLINE, received.recv()).await.expect("in time");
        assert_eq!(got.as_deref(), Some(&b"hello"[..]));
    }

    #[tokio::test]
    async fn handler_error_closes_only_that_connection() {
        let (address, _received, _handle) = start().await;
        let mut other = client(address).await;
        assert_eq!(&request(&mut other, b"before").await[..], b"ack:before");

        let mut failing = client(address).await;
        failing
            .send(Bytes::from_static(b"fail"))
            .await
            .expect("send");
        assert_closed(failing.into_inner()).await;

        // The connection opened before the failure is still served, and so are new ones.
        assert_eq!(&request(&mut other, b"after").await[..], b"ack:after");
        assert_still_serving(address).await;
    }

    #[tokio::test]
    async fn aborting_the_receiver_closes_its_connections() {
        let (address, _received, handle) = start().await;
        let mut client = client(address).await;
        assert_eq!(&request(&mut client, b"hi").await[..], b"ack:hi");
        handle.abort();
        assert_closed(client.into_inner()).await;
    }
}
