//! Liveness: which round a member is in, who leads it, and what moves it on.
//!
//! - `pacemaker`: the round, its timer, its leader, and the rules that move the round by
//!   certificates and by joining f+1 members' timeouts;
//! - `leader`: who leads a round (round-robin, or leader reputation over recent blocks);
//! - `timer`: the round's timeout.

pub mod leader;
pub(crate) mod pacemaker;
pub(crate) mod timer;

pub(crate) use pacemaker::Pacemaker;
