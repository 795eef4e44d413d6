//! What every peer of a reliable sender is held to: its buffer's bounds, the longest message,
//! and the waits between connection attempts.

use std::time::Duration;

/// What every peer of a sender is held to.
#[derive(Clone, Copy)]
pub(super) struct Limits {
    /// Messages kept until acknowledged, and written before an ack.
    pub(super) capacity: usize,
    /// Bytes kept until acknowledged.
    pub(super) max_bytes: usize,
    /// Longer messages are refused.
    pub(super) max_frame_size: usize,
    /// First and longest wait between connection attempts.
    pub(super) backoff: (Duration, Duration),
}
