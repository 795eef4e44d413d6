//! The wire and storage format of a batch of transactions:
//!
//! ```text
//! header:  version u8 | sealed_at_ms u64 LE | tx_count u32 LE
//! body:    tx_count × (len u32 BE | tx bytes)
//! ```
//! The body's entries are the frames clients send (see `frames.rs`), so the batch maker copies
//! what it read in whole runs. The same bytes are sent to peers, stored, hashed (once) and
//! handed to the stages behind consensus, so a batch is never re-encoded. Transactions stay
//! opaque here: the mempool never deserializes them.

use crate::frames::{TxFrames, TxSlices, TX_PREFIX_LEN};
use bytes::{BufMut, Bytes, BytesMut};
use crypto::Digest;
use thiserror::Error;

/// 2: transactions framed as clients frame them (big-endian lengths).
const VERSION: u8 = 2;
pub const HEADER_LEN: usize = 1 + 8 + 4;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum BatchError {
    #[error("batch shorter than its header ({0} bytes)")]
    TooShort(usize),
    #[error("unknown batch version {0}")]
    Version(u8),
    #[error("transaction {index} overruns the batch")]
    Truncated { index: u32 },
    #[error("{0} trailing bytes after the last transaction")]
    Trailing(usize),
}

/// Accumulates transactions in their final wire layout, leaving room for the header.
///
/// The buffer may start with a fixed frame prefix (e.g. a message tag) that is not part of the
/// batch: sealing then yields both the batch and the whole frame (prefix + batch) as two views
/// of one allocation, so the batch goes to peers without being copied.
pub struct BatchBuilder {
    buffer: BytesMut,
    tx_count: u32,
    prefix: Vec<u8>,
}

impl BatchBuilder {
    pub fn with_capacity(bytes: usize) -> Self {
        Self::with_frame_prefix(&[], bytes)
    }

    /// A builder whose sealed buffers start with `prefix` (see [`BatchBuilder::seal_framed`]).
    pub fn with_frame_prefix(prefix: &[u8], bytes: usize) -> Self {
        let mut builder = BatchBuilder {
            buffer: BytesMut::new(),
            tx_count: 0,
            prefix: prefix.to_vec(),
        };
        builder.buffer = builder.fresh_buffer(bytes);
        builder
    }

    fn fresh_buffer(&self, bytes: usize) -> BytesMut {
        let mut buffer = BytesMut::with_capacity(self.prefix.len() + HEADER_LEN + bytes);
        buffer.put_slice(&self.prefix);
        buffer.put_bytes(0, HEADER_LEN);
        buffer
    }

    pub fn push(&mut self, tx: &[u8]) {
        self.buffer.put_u32(tx.len() as u32);
        self.buffer.put_slice(tx);
        self.tx_count += 1;
    }

    /// Appends a run of frames as it is: one copy for the whole run.
    pub fn append(&mut self, frames: &TxFrames) {
        self.buffer.put_slice(frames.bytes());
        self.tx_count += frames.count();
    }

    pub fn tx_count(&self) -> u32 {
        self.tx_count
    }

    /// The frame prefix of the batch being built, to rewrite in place: for a prefix that
    /// changes from batch to batch (its place in a sequence), still sent without a copy.
    pub fn frame_prefix_mut(&mut self) -> &mut [u8] {
        &mut self.buffer[..self.prefix.len()]
    }

    /// Bytes of transactions (with their length prefixes), excluding the header.
    pub fn payload_len(&self) -> usize {
        self.buffer.len() - self.prefix.len() - HEADER_LEN
    }

    pub fn is_empty(&self) -> bool {
        self.tx_count == 0
    }

    /// Writes the header and freezes the batch; the builder starts over, empty.
    pub fn seal(&mut self, sealed_at_ms: u64, next_capacity: usize) -> Batch {
        self.seal_framed(sealed_at_ms, next_capacity).0
    }

    /// Like [`BatchBuilder::seal`], and also returns the frame: the builder's prefix followed by
    /// the batch bytes, sharing the batch's allocation.
    pub fn seal_framed(&mut self, sealed_at_ms: u64, next_capacity: usize) -> (Batch, Bytes) {
        let fresh = self.fresh_buffer(next_capacity);
        let mut buffer = std::mem::replace(&mut self.buffer, fresh);
        let tx_count = std::mem::take(&mut self.tx_count);
        let start = self.prefix.len();
        let header = &mut buffer[start..start + HEADER_LEN];
        header[0] = VERSION;
        header[1..9].copy_from_slice(&sealed_at_ms.to_le_bytes());
        header[9..13].copy_from_slice(&tx_count.to_le_bytes());
        let frame = buffer.freeze();
        let bytes = frame.slice(start..);
        let batch = Batch {
            digest: Digest::of_batch(&bytes),
            bytes,
            sealed_at_ms,
            tx_count,
        };
        (batch, frame)
    }
}

/// A validated, hashed batch. Cloning is cheap (`Bytes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    bytes: Bytes,
    digest: Digest,
    sealed_at_ms: u64,
    tx_count: u32,
}

impl Batch {
    /// Validates the layout of bytes received from the network, and hashes them. Rejecting here
    /// means no later stage ever walks a malformed batch.
    pub fn parse(bytes: Bytes) -> Result<Self, BatchError> {
        let (sealed_at_ms, tx_count) = header(&bytes)?;
        let mut walk = TxSlices::new(&bytes, HEADER_LEN);
        let mut offset = HEADER_LEN;
        for index in 0..tx_count {
            offset = walk
                .next_range()
                .ok_or(BatchError::Truncated { index })?
                .end;
        }
        if offset != bytes.len() {
            return Err(BatchError::Trailing(bytes.len() - offset));
        }
        Ok(Batch {
            digest: Digest::of_batch(&bytes),
            bytes,
            sealed_at_ms,
            tx_count,
        })
    }

    /// A batch read back from this node's own store under `digest`. Only the header is read:
    /// what the store holds was validated before it was stored (built by the batch maker, or
    /// `parse`d on receipt), and walking the body again costs a cache miss per transaction at
    /// commit, when the batch has long left the cache.
    pub fn stored(bytes: Bytes, digest: Digest) -> Result<Self, BatchError> {
        let (sealed_at_ms, tx_count) = header(&bytes)?;
        // Every transaction takes at least its length prefix.
        let room = (bytes.len() - HEADER_LEN) / TX_PREFIX_LEN;
        if tx_count as usize > room {
            return Err(BatchError::Truncated {
                index: u32::try_from(room).unwrap_or(u32::MAX),
            });
        }
        Ok(Batch {
            digest,
            bytes,
            sealed_at_ms,
            tx_count,
        })
    }

    pub fn digest(&self) -> Digest {
        self.digest
    }

    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    pub fn sealed_at_ms(&self) -> u64 {
        self.sealed_at_ms
    }

    pub fn tx_count(&self) -> u32 {
        self.tx_count
    }

    /// The transactions, as zero-copy slices of the batch.
    pub fn transactions(&self) -> Transactions<'_> {
        Transactions {
            bytes: &self.bytes,
            slices: TxSlices::new(&self.bytes, HEADER_LEN),
        }
    }
}

impl Batch {
    /// The transactions as borrowed slices: for a pass that only peeks at each one (finding
    /// latency samples), without a reference count per transaction.
    pub fn tx_slices(&self) -> TxSlices<'_> {
        TxSlices::new(&self.bytes, HEADER_LEN)
    }
}

/// The header's `(sealed_at_ms, tx_count)`, once its length and version are checked.
fn header(bytes: &[u8]) -> Result<(u64, u32), BatchError> {
    if bytes.len() < HEADER_LEN {
        return Err(BatchError::TooShort(bytes.len()));
    }
    if bytes[0] != VERSION {
        return Err(BatchError::Version(bytes[0]));
    }
    Ok((
        u64::from_le_bytes(array(&bytes[1..9])),
        u32::from_le_bytes(array(&bytes[9..13])),
    ))
}

fn array<const N: usize>(slice: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(slice);
    out
}

pub struct Transactions<'a> {
    bytes: &'a Bytes,
    slices: TxSlices<'a>,
}

impl Iterator for Transactions<'_> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        // The layout was validated by `parse`/`seal`; the walk stays total all the same.
        self.slices
            .next_range()
            .map(|range| self.bytes.slice(range))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of(txs: &[&[u8]]) -> Batch {
        let mut builder = BatchBuilder::with_capacity(64);
        for tx in txs {
            builder.push(tx);
        }
        builder.seal(42, 64)
    }

    #[test]
    fn seal_then_parse_round_trips() {
        let batch = batch_of(&[b"one", b"", b"three"]);
        assert_eq!(batch.tx_count(), 3);
        let parsed = Batch::parse(batch.bytes().clone()).expect("valid");
        assert_eq!(parsed, batch);
        assert_eq!(parsed.sealed_at_ms(), 42);
        let txs: Vec<_> = parsed.transactions().collect();
        let slices: Vec<&[u8]> = parsed.tx_slices().collect();
        assert_eq!(slices, txs.iter().map(|t| &t[..]).collect::<Vec<_>>());
        assert_eq!(txs, vec![&b"one"[..], &b""[..], &b"three"[..]]);
    }

    #[test]
    fn a_batch_body_is_the_clients_frames_appended_as_they_came() {
        let txs: [&[u8]; 3] = [b"one", b"", b"three"];
        let pushed = batch_of(&txs);
        let mut builder = BatchBuilder::with_capacity(64);
        let run = TxFrames::from_transactions(&txs);
        let (head, rest) = run.clone().split_reaching(1);
        builder.append(&head);
        builder.append(&rest.expect("two more"));
        let appended = builder.seal(42, 64);
        assert_eq!(appended, pushed);
        assert_eq!(&pushed.bytes()[HEADER_LEN..], run.bytes());
        // The client's length prefix: big-endian.
        assert_eq!(&run.bytes()[..4], &3u32.to_be_bytes());
    }

    #[test]
    fn builder_restarts_empty_after_seal() {
        let mut builder = BatchBuilder::with_capacity(8);
        builder.push(b"a");
        let first = builder.seal(1, 8);
        assert!(builder.is_empty());
        assert_eq!(builder.payload_len(), 0);
        builder.push(b"b");
        let second = builder.seal(2, 8);
        assert_ne!(first.digest(), second.digest());
        assert_eq!(second.transactions().collect::<Vec<_>>(), vec![&b"b"[..]]);
    }

    #[test]
    fn framed_seal_shares_the_batch_bytes() {
        let mut builder = BatchBuilder::with_frame_prefix(&[7], 16);
        builder.push(b"tx");
        assert_eq!(builder.payload_len(), TX_PREFIX_LEN + 2);
        let (batch, frame) = builder.seal_framed(5, 16);
        assert_eq!(frame[0], 7);
        assert_eq!(&frame[1..], &batch.bytes()[..]);
        assert_eq!(Batch::parse(frame.slice(1..)).expect("valid"), batch);
        // The next batch gets the prefix again.
        builder.push(b"again");
        let (second, frame) = builder.seal_framed(6, 16);
        assert_eq!(frame[0], 7);
        assert_eq!(second.tx_count(), 1);
    }

    #[test]
    fn a_rewritten_prefix_goes_out_with_its_batch_only() {
        let mut builder = BatchBuilder::with_frame_prefix(&[7, 0], 16);
        builder.push(b"tx");
        builder.frame_prefix_mut()[1] = 42;
        let (batch, frame) = builder.seal_framed(5, 16);
        assert_eq!(&frame[..2], &[7, 42]);
        assert_eq!(&frame[2..], &batch.bytes()[..]);
        builder.push(b"next");
        let (_, frame) = builder.seal_framed(6, 16);
        assert_eq!(
            &frame[..2],
            &[7, 0],
            "the next batch starts from the builder's prefix"
        );
    }

    #[test]
    fn stored_batches_are_read_by_their_header() {
        let batch = batch_of(&[b"abc", b"de"]);
        let stored = Batch::stored(batch.bytes().clone(), batch.digest()).expect("valid");
        assert_eq!(stored, batch);
        let bytes = batch.bytes();
        assert_eq!(
            Batch::stored(bytes.slice(..5), batch.digest()),
            Err(BatchError::TooShort(5))
        );
        let mut version = bytes.to_vec();
        version[0] = 9;
        assert_eq!(
            Batch::stored(version.into(), batch.digest()),
            Err(BatchError::Version(9))
        );
        // More transactions than the body has room for prefixes.
        let mut count = bytes.to_vec();
        count[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Batch::stored(count.into(), batch.digest()).is_err());
        // The body is not walked: a broken length inside it is `parse`'s to find, on receipt.
        let mut body = bytes.to_vec();
        body[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        let body = Bytes::from(body);
        assert!(Batch::parse(body.clone()).is_err());
        assert!(Batch::stored(body, batch.digest()).is_ok());
    }

    #[test]
    fn malformed_batches_are_rejected() {
        let good = batch_of(&[b"abc", b"de"]).bytes().clone();
        assert_eq!(Batch::parse(good.slice(..5)), Err(BatchError::TooShort(5)));
        assert_eq!(
            Batch::parse(good.slice(..good.len() - 1)),
            Err(BatchError::Truncated { index: 1 })
        );
        let mut extra = good.to_vec();
        extra.push(0);
        assert_eq!(Batch::parse(extra.into()), Err(BatchError::Trailing(1)));
        let mut version = good.to_vec();
        version[0] = 9;
        assert_eq!(Batch::parse(version.into()), Err(BatchError::Version(9)));
        // A huge declared length must not overflow or panic.
        let mut huge = good.to_vec();
        huge[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(Batch::parse(huge.into()).is_err());
        // A huge tx count with no body.
        let mut count = good.slice(..HEADER_LEN).to_vec();
        count[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Batch::parse(count.into()).is_err());
    }
}
