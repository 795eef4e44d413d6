//! The batches blocks carry: which a block may name, how long they are kept, and who holds them.
//!
//! - `waiter`: a block waits until its batches are stored here (asked of the mempool);
//! - `buffer`: our mempool's digests, waiting for our next proposal;
//! - `holders`: the rounds every peer certified, so batches all of them hold can be freed;
//! - `gc`: the window (rounds and time) batches and blocks are kept for, and what it frees;
//! - `pruning`: the stored blocks, deleted once they leave that window.

pub(crate) mod buffer;
pub(crate) mod gc;
pub(crate) mod holders;
pub(crate) mod pruning;
pub(crate) mod waiter;
