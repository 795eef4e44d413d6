//! What tests of other crates need (the `testing` feature): the relay that
//! [`handshake::dial`](super::handshake::dial) must defeat, to play a hostile member at the
//! handshake, and the [`Tap`] that turns a sender into one end of a simulated network.

use super::handshake::{ACCEPTED, ANSWER_LEN, HANDSHAKE_TIMEOUT, HELLO_LEN, KEY_LEN};
use bytes::Bytes;
use crypto::PublicKey;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where a tapped sender ([`crate::ReliableSender::tapped`], [`crate::SimpleSender::tapped`])
/// hands each message, with the address it was sent to.
pub type Tap = Arc<dyn Fn(SocketAddr, Bytes) + Send + Sync>;

/// How a relayed handshake ended.
#[derive(Debug)]
pub enum Relay {
    /// Nobody answered at the target, or a side went silent: nothing was decided.
    Unreachable,
    /// The dialer hung up on the hello it was passed: it names a member other than the one whose
    /// address it dialled.
    RefusedByDialer,
    /// The dialer signed, and the member at the target refused the answer.
    RefusedByTarget,
    /// The member at the target let the relay in as the dialer: frames written on `stream`
    /// count there as `dialer`'s.
    Entered {
        dialer: PublicKey,
        stream: TcpStream,
    },
}

/// Answers `dialer`, who dialled us, with the hello of the member listening at `target`, and
/// passes the dialer's signed answer on to that member: what a member does that wants to speak
/// at `target` as whoever dials it.
pub async fn relay_handshake(mut dialer: TcpStream, target: SocketAddr) -> Relay {
    let relay = async {
        let Ok(mut acceptor) = TcpStream::connect(target).await else {
            return Relay::Unreachable;
        };
        let mut hello = [0u8; HELLO_LEN];
        if acceptor.read_exact(&mut hello).await.is_err() || dialer.write_all(&hello).await.is_err()
        {
            return Relay::Unreachable;
        }
        let mut answer = [0u8; ANSWER_LEN];
        if dialer.read_exact(&mut answer).await.is_err() {
            return Relay::RefusedByDialer;
        }
        let mut verdict = [0u8; 1];
        if acceptor.write_all(&answer).await.is_err()
            || acceptor.read_exact(&mut verdict).await.is_err()
            || verdict[0] != ACCEPTED
        {
            return Relay::RefusedByTarget;
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&answer[..KEY_LEN]);
        Relay::Entered {
            dialer: PublicKey(key),
            stream: acceptor,
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, relay)
        .await
        .unwrap_or(Relay::Unreachable)
}
