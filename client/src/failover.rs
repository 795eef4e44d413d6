//! What a client does when its node goes away (crashed, killed by the harness's fault schedule):
//! it moves to the next node that accepts a connection, as a wallet fails over to another
//! validator, and resends what the lost node may have dropped.
//!
//! A node keeps the transactions it received in its mempool until they are sealed into a batch,
//! and each node proposes its own batches: whatever it had not got committed is gone with it.
//! For signed transactions that is worse than a loss, because a lost nonce holds every later
//! transaction of its sender in the executor's backlog for the rest of the run. So the client
//! keeps what it sent in the last [`RESEND_WINDOW`] and sends it again to the next node: a copy
//! of a transaction that did execute is dropped as a stale nonce (and counted so), a copy of a
//! lost one fills the gap. Opaque `hotstuff` transactions have no nonce and would be committed
//! twice, so they are never resent.

use anyhow::{bail, Result};
use bytes::Bytes;
use futures::SinkExt;
use plumbing::clock::{sleep, timeout, Instant};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tracing::{info, warn};

/// How far back sent transactions are resent after a failover: past the commit latency of a
/// loaded run with a crash in it (a few timeouts), so that what the lost node held is covered.
pub const RESEND_WINDOW: Duration = Duration::from_secs(5);
/// How long one connection attempt may take before the next node is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Pause after every node refused, before trying them all again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The transactions sent in the last [`RESEND_WINDOW`], oldest first.
#[derive(Default)]
pub struct ResendWindow {
    sent: VecDeque<(Instant, Bytes)>,
}

impl ResendWindow {
    pub fn push(&mut self, at: Instant, tx: Bytes) {
        self.sent.push_back((at, tx));
    }

    /// Forgets what was sent more than [`RESEND_WINDOW`] before `now`.
    pub fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.sent.front() {
            if now.saturating_duration_since(*at) <= RESEND_WINDOW {
                break;
            }
            self.sent.pop_front();
        }
    }

    /// What to send again, oldest first (the window keeps it: a second failover soon after the
    /// first resends it again).
    pub fn to_resend(&self) -> impl Iterator<Item = &Bytes> {
        self.sent.iter().map(|(_, tx)| tx)
    }
}

/// The connection to the node the client loads, and the nodes it may move to.
pub struct NodeConnection {
    /// Every node's transactions address, the client's own target first.
    nodes: Vec<SocketAddr>,
    /// Index in `nodes` of the node connected to.
    current: usize,
    transport: Framed<TcpStream, LengthDelimitedCodec>,
}

impl NodeConnection {
    /// Connects to `target`; `others` are the nodes to fail over to, tried in the order given
    /// starting after `target`.
    pub async fn open(target: SocketAddr, others: &[SocketAddr]) -> Result<Self> {
        let mut nodes = vec![target];
        // Start the rotation after the target's place in the list, so that the clients of
        // different nodes spread over the survivors instead of all moving to the same one.
        let start = others
            .iter()
            .position(|a| *a == target)
            .map_or(0, |i| i + 1);
        for i in 0..others.len() {
            let address = others[(start + i) % others.len()];
            if !nodes.contains(&address) {
                nodes.push(address);
            }
        }
        let transport = connect(target).await?;
        Ok(NodeConnection {
            nodes,
            current: 0,
            transport,
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.nodes[self.current]
    }

    pub async fn feed(&mut self, tx: Bytes) -> std::io::Result<()> {
        self.transport.feed(tx).await
    }

    pub async fn flush(&mut self) -> std::io::Result<()> {
        SinkExt::<Bytes>::flush(&mut self.transport).await
    }

    /// After the connection broke: connects to the next node that accepts, trying every node
    /// in turn (the lost one last, since it may be back by then) until `deadline`.
    pub async fn fail_over(&mut self, deadline: Instant) -> Result<SocketAddr> {
        let lost = self.address();
        loop {
            for step in 1..=self.nodes.len() {
                let next = (self.current + step) % self.nodes.len();
                match timeout(CONNECT_TIMEOUT, connect(self.nodes[next])).await {
                    Ok(Ok(transport)) => {
                        self.transport = transport;
                        self.current = next;
                        info!("connection to {lost} lost; moved to {}", self.address());
                        return Ok(self.address());
                    }
                    Ok(Err(e)) => warn!("{e:#}"),
                    Err(_) => warn!("connecting to {} timed out", self.nodes[next]),
                }
            }
            if Instant::now() >= deadline {
                bail!("connection to {lost} lost, and no node accepts a connection");
            }
            sleep(RETRY_PAUSE).await;
        }
    }
}

async fn connect(address: SocketAddr) -> Result<Framed<TcpStream, LengthDelimitedCodec>> {
    let stream = TcpStream::connect(address)
        .await
        .map_err(|e| anyhow::anyhow!("connecting to {address}: {e}"))?;
    stream.set_nodelay(true)?;
    Ok(Framed::new(stream, LengthDelimitedCodec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::net::TcpListener;

    #[test]
    fn the_window_keeps_the_last_five_seconds() {
        let start = Instant::now();
        let mut window = ResendWindow::default();
        for s in 0..8u64 {
            window.push(start + Duration::from_secs(s), Bytes::from(vec![s as u8]));
        }
        window.expire(start + Duration::from_secs(8));
        let kept: Vec<u8> = window.to_resend().map(|tx| tx[0]).collect();
        assert_eq!(kept, vec![3, 4, 5, 6, 7]);
    }

    /// The client's node goes away: the connection moves to the next node that listens, and
    /// what is sent then arrives there.
    #[tokio::test]
    async fn a_lost_connection_moves_to_a_node_that_listens() {
        let first = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let second = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        // A port with nobody behind it, tried (and skipped) on the way.
        let dead = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let dead_address = dead.local_addr().expect("address");
        drop(dead);
        let (a, b) = (
            first.local_addr().expect("address"),
            second.local_addr().expect("address"),
        );
        let mut connection = NodeConnection::open(a, &[a, dead_address, b])
            .await
            .expect("open");
        let (accepted, _) = first.accept().await.expect("accept");
        // The node dies: its socket and its listener close.
        drop(accepted);
        drop(first);
        // Writes into a closed connection fail once the peer's reset arrives.
        let mut failed = false;
        for _ in 0..100 {
            let sent = async {
                connection.feed(Bytes::from_static(b"tx")).await?;
                connection.flush().await
            };
            if sent.await.is_err() {
                failed = true;
                break;
            }
            sleep(Duration::from_millis(10)).await;
        }
        assert!(failed, "writing to a closed connection kept succeeding");
        let moved = connection
            .fail_over(Instant::now() + Duration::from_secs(5))
            .await
            .expect("a node listens");
        assert_eq!(moved, b);
        let (stream, _) = second.accept().await.expect("accept");
        let mut framed = Framed::new(stream, LengthDelimitedCodec::new());
        connection
            .feed(Bytes::from_static(b"after"))
            .await
            .expect("feed");
        connection.flush().await.expect("flush");
        let frame = framed.next().await.expect("a frame").expect("read");
        assert_eq!(&frame[..], b"after");
    }

    #[tokio::test]
    async fn no_node_listening_is_an_error_by_the_deadline() {
        let gone = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = gone.local_addr().expect("address");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let target = listener.local_addr().expect("address");
        let mut connection = NodeConnection::open(target, &[target, address])
            .await
            .expect("open");
        drop(gone);
        drop(listener);
        let error = connection
            .fail_over(Instant::now() + Duration::from_millis(300))
            .await
            .expect_err("nobody listens");
        assert!(error.to_string().contains("no node accepts"), "{error}");
    }
}
