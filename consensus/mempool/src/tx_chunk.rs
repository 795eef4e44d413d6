//! What the clients' port hands the batch maker: runs of transaction frames as they were read,
//! and the decoder that cuts them from a connection's read buffer.

use batch::{take_frames, TxFrames};
use bytes::BytesMut;
use std::io;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::codec::Decoder;

/// Transactions read from one connection in one go.
pub struct TxChunk {
    /// When they were read (ms since the epoch): the `receive` hop of a sample among them,
    /// taken once per chunk rather than per transaction.
    pub received_ms: u64,
    /// Whole frames, in the order the client wrote them: one run per read of the socket.
    pub runs: Vec<TxFrames>,
    /// The chunk's room in the queue to the batch maker, given back when the chunk is dropped.
    pub room: Option<OwnedSemaphorePermit>,
}

impl TxChunk {
    pub fn tx_count(&self) -> u64 {
        self.runs.iter().map(|run| u64::from(run.count())).sum()
    }

    /// The transactions, as slices of the runs.
    pub fn transactions(&self) -> impl Iterator<Item = &[u8]> {
        self.runs.iter().flat_map(TxFrames::transactions)
    }
}

/// Cuts runs of whole frames from a connection's read buffer: the only per-transaction work is
/// the bounds check of each length prefix. Each run holds at most `room` transactions and
/// bytes (the connection sets it before each read, to what its chunk can still take).
pub struct FrameRuns {
    max_tx_size: usize,
    /// `(transactions, bytes)` the next run may hold.
    pub room: (usize, usize),
}

impl FrameRuns {
    pub fn new(max_tx_size: usize) -> Self {
        FrameRuns {
            max_tx_size,
            room: (usize::MAX, usize::MAX),
        }
    }
}

impl Decoder for FrameRuns {
    type Item = TxFrames;
    type Error = io::Error;

    fn decode(&mut self, buffer: &mut BytesMut) -> io::Result<Option<TxFrames>> {
        let (txs, bytes) = self.room;
        take_frames(buffer, self.max_tx_size, txs.max(1), bytes.max(1))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_ending_inside_a_frame_is_an_error() {
        let mut decoder = FrameRuns::new(16);
        let mut buffer = BytesMut::from(TxFrames::from_transactions(&[b"abc"]).bytes());
        buffer.truncate(5);
        assert!(decoder.decode(&mut buffer).expect("no error yet").is_none());
        assert!(decoder.decode_eof(&mut buffer).is_err());
    }

    #[test]
    fn an_oversized_frame_is_invalid_data() {
        let mut decoder = FrameRuns::new(2);
        let mut buffer = BytesMut::from(TxFrames::from_transactions(&[b"abc"]).bytes());
        let error = decoder.decode(&mut buffer).expect_err("oversized");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }
}
