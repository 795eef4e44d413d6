//! TCP networking for consensus and the mempool.
//!
//! It must not know what the frames carry: messages are bytes to it, and their meaning and
//! encoding belong to `mempool` and `hotstuff`. Of the committee it knows only who the members
//! are and where they listen (`config`), to authenticate them and to emulate their links.
//!
//! Every message travels as one frame: a 4-byte big-endian length followed by the payload
//! ([`codec`]). A [`Receiver`] hands each frame to a [`MessageHandler`], which may reply on the
//! same connection. Two senders sit on the other side:
//! - [`SimpleSender`] is best effort: it drops messages rather than wait for a slow or dead peer;
//! - [`ReliableSender`] keeps every message until the peer acknowledges it (one reply frame per
//!   message) and retransmits across reconnections.
//!
//! Under emulation ([`emulation`]) every committee link gets a latency, may get a rate and may
//! be cut: the senders hold frames in a delay queue per link (paced by the link's token bucket),
//! receivers stop reading from a peer cut off.
//!
//! Payloads stay `Bytes` from the caller to the socket and from the socket to the handler:
//! senders write frames straight from the caller's buffers, many per syscall.

mod codec;
pub mod emulation;
mod error;
pub mod handshake;
pub mod link;
pub mod presence;
mod receiver;
mod reliable_sender;
mod simple_sender;
mod slots;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod traffic;
mod transport;

pub use codec::{codec, Writer, DEFAULT_MAX_FRAME_SIZE};
pub use emulation::{EmulationError, EmulationSpec, NetEmulation};
pub use error::HandlerError;
pub use link::{Link, LinkState};
pub use presence::Presence;
pub use receiver::{
    MessageHandler, Receiver, ReceiverConfig, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};
pub use reliable_sender::{CancelHandler, ReliableSender, DEFAULT_RELIABLE_CAPACITY};
pub use simple_sender::{SimpleSender, DEFAULT_SIMPLE_QUEUE_CAPACITY};
pub use slots::{SlotLimits, CONNECTIONS_PER_MEMBER, HANDSHAKES_PER_MEMBER};
#[cfg(any(test, feature = "testing"))]
pub use testing::Tap;
pub use traffic::{traffic, Traffic};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The same port on every interface of the address's family. Nodes listen here rather than on
/// the committee's address, which on a cloud host is a public IP behind NAT and not local.
pub fn listen_address(address: SocketAddr) -> SocketAddr {
    let any = match address.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(any, address.port())
}
