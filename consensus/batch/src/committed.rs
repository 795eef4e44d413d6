//! What consensus outputs: a batch of a committed block, in commit order.

use crate::batch::{Batch, BatchBuilder};
use config::Round;
use crypto::Digest;

/// A batch of a committed block, in commit order.
///
/// Every committed block reaches the application, also one that delivers no batch (an idle
/// chain's blocks, or a block whose batches were all committed before): it comes as an empty
/// batch, marked `last_of_block` (see [`CommittedBatch::is_empty_block`]). The application
/// checkpoints after blocks it sees, so without these an idle chain would get no new checkpoint
/// while its peers prune blocks, and a node restarted then would adopt a root whose successors
/// nobody keeps any more.
#[derive(Clone, Debug)]
pub struct CommittedBatch {
    pub round: Round,
    /// The block that committed it.
    pub block: Digest,
    /// Whether it is the last batch of its block this committer delivers: once it is executed,
    /// the application's state is the state after the block (what a checkpoint captures).
    pub last_of_block: bool,
    pub batch: Batch,
    pub committed_at_ms: u64,
}

impl CommittedBatch {
    /// The stand-in for a block that delivers no batch: no transactions, last of its block.
    pub fn empty_block(round: Round, block: Digest, committed_at_ms: u64) -> Self {
        CommittedBatch {
            round,
            block,
            last_of_block: true,
            batch: BatchBuilder::with_capacity(0).seal(committed_at_ms, 0),
            committed_at_ms,
        }
    }

    /// Whether this stands for a block that delivered no batch ([`CommittedBatch::empty_block`]).
    pub fn is_empty_block(&self) -> bool {
        self.last_of_block && self.batch.tx_count() == 0
    }
}
