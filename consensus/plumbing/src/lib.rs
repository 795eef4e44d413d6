//! Generic plumbing the other crates share: bounded channels that measure how full they get
//! ([`metered`]), channels bounded in bytes as well for messages of varying size
//! ([`budgeted`]), deserializing sequences without trusting the length the input announces
//! ([`bounded`]) and the wall clock in milliseconds ([`now_ms`]).
//!
//! It must not know consensus, the mempool, the network or the store: what flows through a
//! channel or is decoded is its caller's business.

pub mod bounded;
pub mod budgeted;
pub mod metered;
#[cfg(feature = "test-alloc")]
pub mod test_alloc;

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is set before it): the timestamps batches
/// carry and latencies are measured against, comparable across the processes of one host.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
