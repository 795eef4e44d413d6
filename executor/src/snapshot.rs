//! Snapshots of the executed state: what a node hands a peer that fell too far behind to replay
//! the chain (a checkpoint, in the hotstuff crate's state sync).
//!
//! Peers accept a snapshot when f+1 of them report the same digest of its bytes, so equal states
//! must give equal bytes on every node: every collection is written in a sorted order, never in
//! a hash map's.

use crate::transaction::Address;
use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

/// Largest snapshot decoded; a checkpoint travels in one consensus message, which is smaller.
const MAX_SNAPSHOT_SIZE: u64 = 64 * 1024 * 1024;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("state does not encode as a snapshot: {0}")]
    Encode(String),
    #[error("snapshot does not decode: {0}")]
    Decode(String),
    #[error("snapshot names account {0:?}, which this node's genesis does not have")]
    UnknownAccount(Address),
    #[error("snapshot does not fit this executor: {0}")]
    Mismatch(String),
}

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(MAX_SNAPSHOT_SIZE)
        .reject_trailing_bytes()
}

/// Encodes a snapshot part (fails only for a state over `MAX_SNAPSHOT_SIZE`).
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, SnapshotError> {
    options()
        .serialize(value)
        .map_err(|e| SnapshotError::Encode(e.to_string()))
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, SnapshotError> {
    options()
        .deserialize(bytes)
        .map_err(|e| SnapshotError::Decode(e.to_string()))
}
