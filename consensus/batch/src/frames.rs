//! Transaction frames: the one framing a transaction has from the client to execution.
//!
//! ```text
//! frame: len u32 BE | tx bytes
//! ```
//! A client writes each transaction as one such frame (the frame of `network::codec`), and a
//! batch body is the same frames back to back. So the clients' port hands the batch maker runs
//! of whole frames as they were read ([`TxFrames`]), and the batch maker appends each run with
//! one copy: no transaction is decoded, split off or re-framed on its own. The only
//! per-transaction work left is the bounds check that keeps a hostile length from hurting the
//! node ([`take_frames`]).

use bytes::{Bytes, BytesMut};
use thiserror::Error;

/// Length of the prefix in front of every transaction.
pub const TX_PREFIX_LEN: usize = 4;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("transaction frame of {len} bytes over the {max}-byte limit")]
pub struct OversizedFrame {
    pub len: usize,
    pub max: usize,
}

/// Complete transaction frames, back to back, each within the size limit they were read with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxFrames {
    bytes: Bytes,
    count: u32,
}

impl TxFrames {
    /// Frames `txs` (for tests and generators; the clients' port never builds runs this way).
    pub fn from_transactions<T: AsRef<[u8]>>(txs: &[T]) -> Self {
        let mut bytes = Vec::new();
        for tx in txs {
            bytes.extend_from_slice(&(tx.as_ref().len() as u32).to_be_bytes());
            bytes.extend_from_slice(tx.as_ref());
        }
        TxFrames {
            bytes: bytes.into(),
            count: txs.len() as u32,
        }
    }

    /// The frames, prefixes included.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes of the transactions alone, without their prefixes.
    pub fn payload_len(&self) -> usize {
        self.bytes.len() - self.count as usize * TX_PREFIX_LEN
    }

    /// The transactions, as slices of the run.
    pub fn transactions(&self) -> TxSlices<'_> {
        TxSlices::new(&self.bytes, 0)
    }

    /// Splits the run after its first frame at which it reaches `bytes` bytes (prefixes
    /// included): the head reaches `bytes` by at most one frame, and the rest, if any, follows.
    /// A run shorter than `bytes` comes back whole, without walking its frames.
    pub fn split_reaching(self, bytes: usize) -> (TxFrames, Option<TxFrames>) {
        if self.bytes.len() < bytes {
            return (self, None);
        }
        let mut offset = 0;
        let mut count = 0;
        // The run was bounds-checked when it was taken, so every prefix is there.
        while offset < self.bytes.len() {
            offset += TX_PREFIX_LEN + prefix_at(&self.bytes, offset);
            count += 1;
            if offset >= bytes {
                break;
            }
        }
        if count == self.count {
            return (self, None);
        }
        let head = TxFrames {
            bytes: self.bytes.slice(..offset),
            count,
        };
        let rest = TxFrames {
            bytes: self.bytes.slice(offset..),
            count: self.count - count,
        };
        (head, Some(rest))
    }
}

impl TxFrames {
    /// The run without the frames at `positions` (ascending, counted from this run's first
    /// frame; those at or past its end are ignored): the frames between them, in order, as
    /// slices of this run's bytes (nothing is copied). Runs left empty are left out, so a run
    /// whose every frame is named comes back as no run at all.
    pub fn without(self, positions: &[u32]) -> Vec<TxFrames> {
        let mut positions = positions
            .iter()
            .copied()
            .filter(|p| *p < self.count)
            .peekable();
        if positions.peek().is_none() {
            return vec![self];
        }
        let mut kept = Vec::new();
        let (mut start, mut offset, mut count) = (0, 0, 0);
        for index in 0..self.count {
            let end = offset + TX_PREFIX_LEN + prefix_at(&self.bytes, offset);
            if positions.next_if_eq(&index).is_some() {
                if count > 0 {
                    kept.push(TxFrames {
                        bytes: self.bytes.slice(start..offset),
                        count,
                    });
                }
                start = end;
                count = 0;
            } else {
                count += 1;
            }
            offset = end;
        }
        if count > 0 {
            kept.push(TxFrames {
                bytes: self.bytes.slice(start..offset),
                count,
            });
        }
        kept
    }
}

/// Takes the complete frames at the front of `buffer`, up to `max_txs` frames, stopping after
/// the frame at which the run reaches `max_bytes`; an incomplete frame stays in the buffer
/// (with room reserved for the rest of it). `Ok(None)` if no frame is complete yet.
///
/// A frame announcing more than `max_tx_size` bytes is refused as soon as its prefix is read,
/// before its body is waited for: the frames in front of it are returned first, and the next
/// call returns the error.
pub fn take_frames(
    buffer: &mut BytesMut,
    max_tx_size: usize,
    max_txs: usize,
    max_bytes: usize,
) -> Result<Option<TxFrames>, OversizedFrame> {
    let mut offset = 0;
    let mut count = 0u32;
    while (count as usize) < max_txs && offset < max_bytes {
        let Some(prefix) = buffer.get(offset..offset + TX_PREFIX_LEN) else {
            break;
        };
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if len > max_tx_size {
            if count > 0 {
                break;
            }
            return Err(OversizedFrame {
                len,
                max: max_tx_size,
            });
        }
        let end = offset + TX_PREFIX_LEN + len;
        if end > buffer.len() {
            buffer.reserve(end - buffer.len());
            break;
        }
        offset = end;
        count += 1;
    }
    if count == 0 {
        return Ok(None);
    }
    Ok(Some(TxFrames {
        bytes: buffer.split_to(offset).freeze(),
        count,
    }))
}

/// The length in the prefix at `offset`; the caller has checked the prefix is there.
fn prefix_at(bytes: &[u8], offset: usize) -> usize {
    let mut prefix = [0; TX_PREFIX_LEN];
    prefix.copy_from_slice(&bytes[offset..offset + TX_PREFIX_LEN]);
    u32::from_be_bytes(prefix) as usize
}

/// Transactions as borrowed slices of frames back to back; stops at the first frame that does
/// not fit (which validated bytes never have).
pub struct TxSlices<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> TxSlices<'a> {
    pub(crate) fn new(bytes: &'a [u8], offset: usize) -> Self {
        TxSlices { bytes, offset }
    }

    /// The range of the next transaction, advancing past it.
    pub(crate) fn next_range(&mut self) -> Option<std::ops::Range<usize>> {
        self.bytes.get(self.offset..self.offset + TX_PREFIX_LEN)?;
        let start = self.offset + TX_PREFIX_LEN;
        let end = start
            .checked_add(prefix_at(self.bytes, self.offset))
            .filter(|&e| e <= self.bytes.len())?;
        self.offset = end;
        Some(start..end)
    }
}

impl<'a> Iterator for TxSlices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let bytes = self.bytes;
        self.next_range().map(|range| &bytes[range])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(txs: &[&[u8]]) -> BytesMut {
        BytesMut::from(TxFrames::from_transactions(txs).bytes())
    }

    #[test]
    fn takes_complete_frames_and_leaves_a_partial_one() {
        let mut buffer = stream(&[b"one", b"", b"three"]);
        buffer.truncate(buffer.len() - 2);
        let run = take_frames(&mut buffer, 16, 100, 1 << 20)
            .expect("valid")
            .expect("two complete frames");
        assert_eq!(run.count(), 2);
        assert_eq!(
            run.transactions().collect::<Vec<_>>(),
            vec![&b"one"[..], b""]
        );
        assert_eq!(run.payload_len(), 3);
        // The partial frame waits for its end.
        assert_eq!(take_frames(&mut buffer, 16, 100, 1 << 20), Ok(None));
        buffer.extend_from_slice(b"ee");
        let last = take_frames(&mut buffer, 16, 100, 1 << 20)
            .expect("valid")
            .expect("the last frame");
        assert_eq!(last.transactions().collect::<Vec<_>>(), vec![&b"three"[..]]);
        assert!(buffer.is_empty());
    }

    #[test]
    fn a_run_stops_at_its_limits() {
        let txs: Vec<&[u8]> = vec![b"aaaa"; 10];
        let mut buffer = stream(&txs);
        let by_count = take_frames(&mut buffer, 16, 3, 1 << 20)
            .expect("ok")
            .expect("run");
        assert_eq!(by_count.count(), 3);
        // 8 bytes a frame: the run stops at the frame that reaches 20 bytes, the third.
        let by_bytes = take_frames(&mut buffer, 16, 100, 20)
            .expect("ok")
            .expect("run");
        assert_eq!(by_bytes.count(), 3);
        assert_eq!(by_bytes.bytes().len(), 24);
        assert_eq!(buffer.len(), 4 * 8);
    }

    #[test]
    fn an_oversized_frame_is_refused_by_its_prefix_after_the_frames_before_it() {
        let mut buffer = stream(&[b"ok"]);
        buffer.extend_from_slice(&u32::MAX.to_be_bytes());
        let run = take_frames(&mut buffer, 16, 100, 1 << 20)
            .expect("ok")
            .expect("run");
        assert_eq!(run.count(), 1);
        assert_eq!(
            take_frames(&mut buffer, 16, 100, 1 << 20),
            Err(OversizedFrame {
                len: u32::MAX as usize,
                max: 16
            })
        );
        // A frame of exactly the limit is fine.
        let mut exact = stream(&[&[1u8; 16]]);
        assert!(take_frames(&mut exact, 16, 100, 1 << 20)
            .expect("ok")
            .is_some());
    }

    #[test]
    fn a_run_without_some_frames_keeps_the_others_in_order_without_copying() {
        let run = TxFrames::from_transactions(&[&b"a"[..], b"bb", b"ccc", b"dddd", b"e"]);
        let txs = |runs: &[TxFrames]| -> Vec<Vec<u8>> {
            runs.iter()
                .flat_map(|r| r.transactions().map(<[u8]>::to_vec))
                .collect()
        };
        assert_eq!(run.clone().without(&[]), vec![run.clone()]);
        let kept = run.clone().without(&[1, 3]);
        assert_eq!(
            kept.iter().map(TxFrames::count).collect::<Vec<_>>(),
            [1, 1, 1]
        );
        assert_eq!(txs(&kept), [b"a".to_vec(), b"ccc".to_vec(), b"e".to_vec()]);
        // Slices of the run's own bytes.
        assert_eq!(kept[1].bytes().as_ptr(), run.bytes()[11..].as_ptr());
        let ends = run.clone().without(&[0, 4]);
        assert_eq!(ends.len(), 1);
        assert_eq!(
            txs(&ends),
            [b"bb".to_vec(), b"ccc".to_vec(), b"dddd".to_vec()]
        );
        assert_eq!(ends[0].payload_len(), 9);
        // Every frame named: nothing left; positions past the run change nothing.
        assert!(run.clone().without(&[0, 1, 2, 3, 4]).is_empty());
        assert_eq!(run.clone().without(&[5, 9]), vec![run]);
    }

    #[test]
    fn a_run_splits_at_the_frame_that_reaches_the_size() {
        let run = TxFrames::from_transactions(&[&b"aa"[..], b"bbbb", b"c", b"dd"]);
        // Frames of 6, 8, 5 and 6 bytes: 10 bytes are reached by the second.
        let (head, rest) = run.clone().split_reaching(10);
        assert_eq!(
            head.transactions().collect::<Vec<_>>(),
            vec![&b"aa"[..], b"bbbb"]
        );
        let rest = rest.expect("the rest");
        assert_eq!(rest.count(), 2);
        assert_eq!(
            rest.transactions().collect::<Vec<_>>(),
            vec![&b"c"[..], b"dd"]
        );
        // Reached exactly at a frame's end: the split is there.
        let (head, _) = run.clone().split_reaching(6);
        assert_eq!(head.count(), 1);
        // Reached only by the last frame, or not at all: the run is whole.
        assert_eq!(run.clone().split_reaching(25), (run.clone(), None));
        assert_eq!(run.clone().split_reaching(1000), (run.clone(), None));
        // Nothing left to reach: one frame still goes, as a push would.
        assert_eq!(run.split_reaching(0).0.count(), 1);
    }
}
