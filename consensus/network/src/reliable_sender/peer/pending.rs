//! A message of a peer's buffer, waiting for its ack.

use bytes::Bytes;
use plumbing::clock::Instant;
use tokio::sync::oneshot;

/// A message waiting for its ack.
pub(super) struct Pending {
    /// Position in the order of `send` calls; acks are matched by it.
    pub(super) seq: u64,
    pub(super) data: Bytes,
    pub(super) reply: oneshot::Sender<Bytes>,
    /// When `send` was called; stamped only under emulation (the link's latency counts from it).
    pub(super) sent: Option<Instant>,
}

impl Pending {
    /// The caller dropped its handler: the message need not be (re)sent.
    pub(super) fn cancelled(&self) -> bool {
        self.reply.is_closed()
    }
}
