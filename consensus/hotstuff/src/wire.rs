//! What nodes send each other on the consensus port ([`ConsensusMessage`]), and how it and every
//! other consensus value is encoded: bincode with fixed-width integers and a size limit, so a
//! hostile length prefix cannot make a node allocate more than a frame can hold.
//!
//! The message types it carries (`messages.rs` and its `commit_proof.rs` and
//! `record.rs`) know nothing of it.

use crate::messages::commit_proof::CommitProof;
use crate::messages::record::RecordReply;
use crate::messages::{Block, MessageError, Timeout, Vote, TC};
use bincode::Options;
use bytes::Bytes;
use config::{Committee, Round};
use crypto::{Digest, Hash, PublicKey};
use serde::{Deserialize, Serialize};

/// Upper bound on a decoded consensus message; blocks carry digests, not batches.
pub const MAX_MESSAGE_SIZE: u64 = 4 * 1024 * 1024;

/// The most blocks one `Chain` carries: a node far behind fetches its missing blocks that many
/// per round trip instead of one (more than `gc_depth` behind, it adopts a checkpoint instead).
pub const MAX_CHAIN_BLOCKS: usize = 32;

/// The encoding every consensus value uses, on the wire and in the store.
pub(crate) fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(MAX_MESSAGE_SIZE)
        .reject_trailing_bytes()
}

/// Everything sent on the consensus port.
#[derive(Clone, Serialize, Deserialize, Debug)]
pub enum ConsensusMessage {
    Propose(Block),
    Vote(Vote),
    Timeout(Timeout),
    TC(TC),
    /// Asks for the block with this digest and its ancestors above the round (the requester's
    /// last commit), to be sent back to the given authority (see [`ConsensusMessage::Chain`]).
    SyncRequest(Digest, PublicKey, Round),
    /// The answer to a `SyncRequest`: the block asked for and its stored ancestors down to the
    /// round asked, at most [`MAX_CHAIN_BLOCKS`], the block asked for first.
    Chain(#[serde(deserialize_with = "plumbing::bounded::vec")] Vec<Block>),
    /// Asks for the latest checkpoint, to be sent back to the given authority (state sync: see
    /// the `checkpoint` crate).
    CheckpointRequest(PublicKey),
    Checkpoint(CheckpointReply),
    /// Asks, for the given authority (whose store holds no vote record), what the receiver
    /// holds of its signatures and its highest certificates (see `safety/recall.rs`).
    RecordRequest(PublicKey),
    RecordReply(RecordReply),
}

/// A member's answer to `CheckpointRequest`: its latest checkpoint, the block it follows (which
/// the requester stores as its root) and the proof that this block committed.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CheckpointReply {
    /// Who answers; the network handler checks it is the authenticated peer.
    pub author: PublicKey,
    pub block: Block,
    pub proof: CommitProof,
    pub state: Bytes,
}

impl CheckpointReply {
    /// Checks the block (its signature and certificates: it becomes the requester's root, and
    /// the leader election reads its QC's signers) and that it committed. The state is not
    /// looked at: only f+1 matching reports vouch for it.
    pub fn verify(&self, committee: &Committee) -> Result<(), MessageError> {
        self.block.verify(committee)?;
        self.proof.verify(&self.block, committee)
    }
}

impl std::fmt::Debug for CheckpointReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CheckpointReply({} at round {}, {} bytes, from {})",
            self.block.digest(),
            self.block.round,
            self.state.len(),
            self.author
        )
    }
}

pub fn encode(message: &ConsensusMessage) -> Result<Bytes, bincode::Error> {
    options().serialize(message).map(Bytes::from)
}

pub fn decode(bytes: &[u8]) -> Result<ConsensusMessage, bincode::Error> {
    options().deserialize(bytes)
}

pub fn encode_block(block: &Block) -> Result<Bytes, bincode::Error> {
    options().serialize(block).map(Bytes::from)
}

pub fn decode_block(bytes: &[u8]) -> Result<Block, bincode::Error> {
    options().deserialize(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::Digest;

    #[test]
    fn round_trip_and_garbage() {
        let message = ConsensusMessage::SyncRequest(Digest::of(b"x"), Default::default(), 3);
        let bytes = encode(&message).expect("encode");
        assert!(matches!(
            decode(&bytes).expect("decode"),
            ConsensusMessage::SyncRequest(..)
        ));
        assert!(decode(&[0xff; 7]).is_err());
        // A Propose whose payload length claims 2^60 digests must fail, not allocate.
        let mut huge = vec![0u8; 4];
        huge.extend_from_slice(&[0xff; 64]);
        assert!(decode(&huge).is_err());
        let mut trailing = bytes.to_vec();
        trailing.push(0);
        assert!(decode(&trailing).is_err());
    }

    /// The fields of a block up to and including the payload's length, with a genesis QC, no TC.
    fn block_claiming_payload(length: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; 32 + 8 + 8 + 1 + 32 + 8];
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes
    }

    #[test]
    fn announced_lengths_do_not_drive_allocation() {
        use plumbing::test_alloc::peak_during;
        // A block whose QC claims 2^60 votes and one whose payload claims 2^60 digests, both
        // ending right there: a few dozen bytes must not cost a megabyte.
        let mut votes = vec![0u8; 32 + 8];
        votes.extend_from_slice(&(1u64 << 60).to_le_bytes());
        for block in [votes, block_claiming_payload(1 << 60)] {
            let (decoded, peak) = peak_during(|| decode_block(&block));
            assert!(decoded.is_err());
            assert!(peak < 4096, "{} bytes held {peak} bytes", block.len());
            let mut propose = 0u32.to_le_bytes().to_vec();
            propose.extend_from_slice(&block);
            let (decoded, peak) = peak_during(|| decode(&propose));
            assert!(decoded.is_err());
            assert!(peak < 4096, "{} bytes held {peak} bytes", propose.len());
        }
    }

    #[test]
    fn long_payloads_still_decode() {
        let block = Block {
            payload: (0..1000u32).map(|i| Digest::of(&i.to_le_bytes())).collect(),
            ..Block::default()
        };
        let bytes = encode_block(&block).expect("encode");
        assert!(decode_block(&bytes).expect("decode") == block);
    }
}
