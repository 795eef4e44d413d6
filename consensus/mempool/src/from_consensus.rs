//! What the consensus core tells the mempool: the batches of a block to fetch, and what it may
//! forget once blocks commit.

use config::Round;
use crypto::{Digest, PublicKey};

/// What the consensus core tells the mempool. Digests come from blocks the core has checked, at
/// most `max_block_digests` per message, so the channel's capacity bounds its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsensusMempoolMessage {
    /// The core saw a block (author, round) whose payload it lacks: fetch these batches (first
    /// from the block's author).
    Synchronize(Vec<Digest>, PublicKey, Round),
    /// Round `r` committed: forget sync requests for rounds older than r - gc_depth.
    Cleanup(Round),
    /// A committed block's batches: this node's own ones leave its backlog.
    Committed(Vec<Digest>),
    /// This node's batches that will not be proposed again and whose fate it cannot tell (its
    /// blocks in a stretch of the chain it skipped by adopting a checkpoint): they leave the
    /// backlog of batches waiting for a commit.
    Abandoned(Vec<Digest>),
}
