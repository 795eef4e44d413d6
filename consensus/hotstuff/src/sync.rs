//! Catching up: fetching the blocks a member lacks, serving them to peers, and adopting a
//! checkpoint from peers when replaying the chain is no longer possible.
//!
//! - `synchronizer`: the ancestors of a block that arrived before them, asked of peers;
//! - `helper`: the answers to peers' block and checkpoint requests;
//! - `state_sync`: a checkpoint adopted from f+1 matching replies, each with the proof its block
//!   committed, which the helper builds from the direct commits this node saw
//!   (`direct_commits`);
//! - `adoption`: when to ask for a checkpoint, and what taking one's block as our root decides.

pub(crate) mod adoption;
pub(crate) mod direct_commits;
pub(crate) mod helper;
pub(crate) mod state_sync;
pub(crate) mod synchronizer;
