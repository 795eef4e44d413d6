//! What stops a consensus message from being processed, and what stops the node.

use crate::aggregator::AggregatorError;
use crate::messages::MessageError;
use crate::payload::waiter::PayloadError;
use crate::safety::SafetyStateError;
use crate::sync::synchronizer::SyncError;
use config::Round;
use crypto::{Digest, PublicKey};
use store::StoreError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConsensusError {
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error(transparent)]
    Aggregator(#[from] AggregatorError),
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error("encoding failed: {0}")]
    Encoding(#[from] bincode::Error),
    #[error("block {0} missing from the store during commit")]
    MissingAncestor(Digest),
    #[error("a downstream channel closed")]
    ChannelClosed,
    #[error("message of round {round} is too far ahead of round {current}")]
    TooFarAhead { round: Round, current: Round },
    #[error(transparent)]
    SafetyState(#[from] SafetyStateError),
    #[error(transparent)]
    Fatal(#[from] FatalError),
}

/// An error after which the node must stop: going on could only spread the damage. The core
/// stops, commits nothing more, and publishes the error on `ConsensusHandle::fatal`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FatalError {
    /// A batch of a committed block is neither in the store nor readable there (a machine crash
    /// lost it), and no peer sent it in time: executing the block without it would leave this
    /// node with a state its peers do not have. `node recover` on the store keeps the vote
    /// record and drops the rest; started again, the node rejoins from its peers.
    #[error(
        "STORE: batch {batch} of committed block {block} (round {round}) is lost: {reason}; \
         executing the block without it would make this node's state differ from its peers'. \
         Run `node recover --store PATH` on this node's store (it keeps the vote record) and \
         start the node again to rejoin from its peers"
    )]
    LostBatch {
        batch: Digest,
        block: Digest,
        round: Round,
        reason: String,
    },
    /// This node's store holds no vote record, and a member holds a signature of this node's key:
    /// the key signed before, and the node could sign a second time in a round it signed in.
    #[error(
        "VOTE RECORD: member {peer} holds this node's signature of round {round}, but this \
         node's store holds no vote record (a new --store path, or none): it could vote twice in \
         a round it voted in. Start it on the store it ran on; or, accepting that risk, with \
         --risk-equivocation-without-vote-record (it then signs only above the rounds its peers \
         show it signed in and the committee's highest certificate)"
    )]
    VoteRecordMissing { round: Round, peer: PublicKey },
    /// Two different blocks committed at one height: more than f members are Byzantine (or
    /// this node is broken). Nothing of the conflicting chain was output.
    #[error(
        "SAFETY: committing block {block} of round {round} would fork away the last committed \
         block {last_committed} of round {last_committed_round}"
    )]
    Fork {
        block: Digest,
        round: Round,
        last_committed: Digest,
        last_committed_round: Round,
    },
}
