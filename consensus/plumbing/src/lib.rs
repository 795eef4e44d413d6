//! Generic plumbing the other crates share: bounded channels that measure how full they get
//! ([`metered`]), channels bounded in bytes as well for messages of varying size
//! ([`budgeted`]), deserializing sequences without trusting the length the input announces
//! ([`bounded`]) and the process's clock, which time dilation slows ([`clock`]; the wall clock in
//! milliseconds, [`now_ms`], is its) with sleeps that end within microseconds of their deadline
//! for the emulated links ([`precise_sleep`]).
//!
//! It must not know consensus, the mempool, the network or the store: what flows through a
//! channel or is decoded is its caller's business.

pub mod bounded;
pub mod budgeted;
pub mod clock;
pub mod metered;
pub mod precise_sleep;
#[cfg(feature = "test-alloc")]
pub mod test_alloc;

pub use clock::now_ms;
