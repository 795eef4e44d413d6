//! Messages between mempools (the `mempool_address` port).
//!
//! ```text
//! frame: tag u8 | body
//!   tag 0 Batch:        body = the batch bytes (see `batch.rs`), acknowledged with one frame
//!   tag 1 BatchRequest: body = bincode (Vec<Digest>, requestor PublicKey), never acknowledged
//!   tag 2 Attestation:  body = bincode Attestation (`--verify=attested`), never acknowledged
//!   tag 3 Authored:     body = seq u64 LE | the batch bytes, acknowledged with one frame
//! ```
//! A batch is not bincode-encoded: its body is the batch itself, so receiving one is a slice of
//! the frame and sending one reuses the sealed buffer. An author sends its own batches as
//! `Authored`, with their place in its sequence (which names their attesters); a batch sent on
//! behalf of another (a reply to a batch request) is a plain `Batch`, which nobody attests.

use crate::attest::Attestation;
use bincode::Options;
use bytes::{BufMut, Bytes, BytesMut};
use crypto::{Digest, PublicKey};
use serde::Deserialize;
use thiserror::Error;

/// The reply to a stored batch: the sender's quorum waiter counts it.
pub const ACK: &[u8] = b"Ack";
/// The reply to a batch refused for the sender's quota: one reply per message still (the
/// reliable sender matches replies in order), but it does not count towards a quorum.
pub const REFUSED: &[u8] = b"Full";

pub const BATCH_TAG: u8 = 0;
pub const BATCH_REQUEST_TAG: u8 = 1;
pub const ATTESTATION_TAG: u8 = 2;
pub const AUTHORED_TAG: u8 = 3;
/// The frame prefix of an `Authored` batch: its tag and its number.
pub const AUTHORED_PREFIX_LEN: usize = 1 + 8;

#[derive(Debug, Error)]
pub enum MessageError {
    #[error("empty mempool message")]
    Empty,
    #[error("unknown mempool message tag {0}")]
    UnknownTag(u8),
    #[error("undecodable batch request: {0}")]
    Request(#[source] bincode::Error),
    #[error("undecodable attestation: {0}")]
    Attestation(#[source] bincode::Error),
    #[error("an authored batch without its number")]
    NoNumber,
}

#[derive(Debug, PartialEq, Eq)]
pub enum MempoolMessage {
    /// The batch bytes, not yet validated (`Batch::parse` does that).
    Batch(Bytes),
    /// These digests are wanted by `requestor`.
    BatchRequest(Vec<Digest>, PublicKey),
    /// A member's statement of a batch's invalid transactions (not yet verified).
    Attestation(Attestation),
    /// A batch from its author, with its place in the author's sequence (not yet validated).
    Authored(u64, Bytes),
}

impl MempoolMessage {
    pub fn decode(frame: Bytes) -> Result<Self, MessageError> {
        let tag = *frame.first().ok_or(MessageError::Empty)?;
        match tag {
            BATCH_TAG => Ok(MempoolMessage::Batch(frame.slice(1..))),
            BATCH_REQUEST_TAG => {
                let request: Request = request_options()
                    .deserialize(&frame[1..])
                    .map_err(MessageError::Request)?;
                Ok(MempoolMessage::BatchRequest(
                    request.digests,
                    request.requestor,
                ))
            }
            ATTESTATION_TAG => request_options()
                .deserialize(&frame[1..])
                .map(MempoolMessage::Attestation)
                .map_err(MessageError::Attestation),
            AUTHORED_TAG => {
                let number = frame
                    .get(1..AUTHORED_PREFIX_LEN)
                    .ok_or(MessageError::NoNumber)?;
                let mut seq = [0u8; 8];
                seq.copy_from_slice(number);
                Ok(MempoolMessage::Authored(
                    u64::from_le_bytes(seq),
                    frame.slice(AUTHORED_PREFIX_LEN..),
                ))
            }
            other => Err(MessageError::UnknownTag(other)),
        }
    }

    /// The prefix of an `Authored` frame of batch number `seq`.
    pub fn authored_prefix(seq: u64) -> [u8; AUTHORED_PREFIX_LEN] {
        let mut prefix = [AUTHORED_TAG; AUTHORED_PREFIX_LEN];
        prefix[1..].copy_from_slice(&seq.to_le_bytes());
        prefix
    }

    /// Frames batch bytes as their author's batch number `seq` (a copy, as `encode_batch`; the
    /// batch maker writes the prefix in the sealed buffer instead).
    pub fn encode_authored(seq: u64, batch: &[u8]) -> Bytes {
        let mut frame = BytesMut::with_capacity(AUTHORED_PREFIX_LEN + batch.len());
        frame.put_slice(&Self::authored_prefix(seq));
        frame.put_slice(batch);
        frame.freeze()
    }

    /// Frames stored batch bytes. This copies the batch once; the hot path (freshly sealed
    /// batches) avoids it with `BatchBuilder::seal_framed`.
    pub fn encode_batch(batch: &[u8]) -> Bytes {
        let mut frame = BytesMut::with_capacity(1 + batch.len());
        frame.put_u8(BATCH_TAG);
        frame.put_slice(batch);
        frame.freeze()
    }

    pub fn encode_request(digests: &[Digest], requestor: &PublicKey) -> Bytes {
        let mut frame = vec![BATCH_REQUEST_TAG];
        // Serializing digests and a key into a Vec cannot fail: no maps, no size limit.
        bincode::serialize_into(&mut frame, &(digests, requestor))
            .unwrap_or_else(|e| unreachable!("bincode into a Vec failed: {e}"));
        Bytes::from(frame)
    }

    pub fn encode_attestation(attestation: &Attestation) -> Bytes {
        let mut frame = vec![ATTESTATION_TAG];
        // As for requests: serializing into a Vec cannot fail.
        bincode::serialize_into(&mut frame, attestation)
            .unwrap_or_else(|e| unreachable!("bincode into a Vec failed: {e}"));
        Bytes::from(frame)
    }
}

/// The body of a batch request as it is decoded: the same bytes as the `(digests, requestor)`
/// tuple `encode_request` writes, without trusting the announced number of digests.
#[derive(Deserialize)]
struct Request {
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    digests: Vec<Digest>,
    requestor: PublicKey,
}

/// What `bincode::serialize` writes (fixed-width integers), read strictly: nothing may follow.
fn request_options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let batch = MempoolMessage::encode_batch(b"payload");
        assert_eq!(
            MempoolMessage::decode(batch).expect("batch"),
            MempoolMessage::Batch(Bytes::from_static(b"payload"))
        );
        let digests = vec![Digest::of(b"a"), Digest::of(b"b")];
        let name = crypto::KeyPair::from_seed(1).name;
        let request = MempoolMessage::encode_request(&digests, &name);
        assert_eq!(
            MempoolMessage::decode(request.clone()).expect("request"),
            MempoolMessage::BatchRequest(digests, name)
        );
        assert!(matches!(
            MempoolMessage::decode(request.slice(..request.len() - 1)),
            Err(MessageError::Request(_))
        ));
        assert!(matches!(
            MempoolMessage::decode(Bytes::new()),
            Err(MessageError::Empty)
        ));
        assert!(matches!(
            MempoolMessage::decode(Bytes::from_static(&[9, 1])),
            Err(MessageError::UnknownTag(9))
        ));
        let authored = MempoolMessage::encode_authored(7, b"payload");
        assert_eq!(
            MempoolMessage::decode(authored.clone()).expect("authored"),
            MempoolMessage::Authored(7, Bytes::from_static(b"payload"))
        );
        assert!(matches!(
            MempoolMessage::decode(authored.slice(..AUTHORED_PREFIX_LEN - 1)),
            Err(MessageError::NoNumber)
        ));
    }

    #[test]
    fn announced_length_does_not_drive_allocation() {
        // Nine bytes claiming 2^60 digests must not cost a megabyte.
        let mut frame = vec![BATCH_REQUEST_TAG];
        frame.extend_from_slice(&(1u64 << 60).to_le_bytes());
        let (decoded, peak) =
            plumbing::test_alloc::peak_during(|| MempoolMessage::decode(Bytes::from(frame)));
        assert!(decoded.is_err());
        assert!(peak < 4096, "9 bytes held {peak} bytes");
    }

    #[test]
    fn request_with_trailing_bytes_is_rejected() {
        let name = crypto::KeyPair::from_seed(1).name;
        let mut frame = MempoolMessage::encode_request(&[Digest::of(b"a")], &name).to_vec();
        frame.push(0);
        assert!(matches!(
            MempoolMessage::decode(Bytes::from(frame)),
            Err(MessageError::Request(_))
        ));
    }
}
