//! The clients' port's framing, fed the way a socket feeds it: in pieces, cut into runs of whole
//! transaction frames by `batch::take_frames`.
//!
//! The first input byte sets the read size (1 to 256 bytes), the second the largest transaction
//! (0 to 255 bytes), the rest is the byte stream. Asserts: no panic; every run's transactions fit
//! the limit and are, in order and byte for byte, the frames at the front of the stream; a run
//! appended to a batch reads back as the same transactions; the decoder holds no more than the
//! input plus one announced frame.
#![no_main]

use batch::{take_frames, Batch, BatchBuilder, TX_PREFIX_LEN};
use bytes::BytesMut;
use consensus_fuzz::alloc::{assert_bounded, peak_during};
use libfuzzer_sys::fuzz_target;

fn runs(read: usize, max_tx_size: usize, stream: &[u8]) {
    let mut buffer = BytesMut::new();
    let mut consumed = 0;
    let mut builder = BatchBuilder::with_capacity(0);
    for piece in stream.chunks(read) {
        buffer.extend_from_slice(piece);
        loop {
            match take_frames(&mut buffer, max_tx_size, 7, 64) {
                Ok(Some(run)) => {
                    let expected = &stream[consumed..consumed + run.bytes().len()];
                    assert_eq!(run.bytes(), expected, "a run that is not the stream");
                    let mut walked = 0;
                    for tx in run.transactions() {
                        assert!(tx.len() <= max_tx_size);
                        walked += TX_PREFIX_LEN + tx.len();
                    }
                    assert_eq!(walked, run.bytes().len());
                    consumed += run.bytes().len();
                    builder.append(&run);
                }
                Ok(None) => break,
                // The port closes the connection on an oversized frame.
                Err(_) => return,
            }
        }
    }
    let batch = Batch::parse(builder.seal(0, 0).bytes().clone()).expect("appended runs parse");
    let length: usize = batch.tx_slices().map(|tx| TX_PREFIX_LEN + tx.len()).sum();
    assert_eq!(length, consumed);
}

fuzz_target!(|data: &[u8]| {
    let [read, max, stream @ ..] = data else {
        return;
    };
    let (_, peak) = peak_during(|| runs(usize::from(*read) + 1, usize::from(*max), stream));
    assert_bounded("tx frames", data.len(), peak, 256 + TX_PREFIX_LEN);
});
