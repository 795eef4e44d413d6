//! The frame codec every connection uses, fed the way a socket feeds it: in pieces.
//!
//! The first input byte sets the read size (1 to 256 bytes), the rest is the byte stream. Every
//! frame must fit the configured maximum and come from the stream; no panic, and the codec holds
//! no more than the input plus one announced frame (it reserves a frame's length, up to the
//! configured maximum, as soon as it has read the length prefix).
#![no_main]

use bytes::BytesMut;
use network::{codec, DEFAULT_MAX_FRAME_SIZE};
use consensus_fuzz::alloc::{assert_bounded, peak_during};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const PREFIX: usize = 4;

fn frames(chunk: usize, stream: &[u8]) -> usize {
    let mut codec = codec(DEFAULT_MAX_FRAME_SIZE);
    let mut buffer = BytesMut::new();
    let mut payload = 0;
    let mut count = 0;
    let mut check = |frame: BytesMut| {
        assert!(frame.len() <= DEFAULT_MAX_FRAME_SIZE);
        payload += frame.len();
        count += 1;
        assert!(
            payload + count * PREFIX <= stream.len(),
            "a frame from nowhere"
        );
    };
    for piece in stream.chunks(chunk) {
        buffer.extend_from_slice(piece);
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(frame)) => check(frame),
                Ok(None) => break,
                // The receiver closes the connection on a decode error.
                Err(_) => return count,
            }
        }
    }
    while let Ok(Some(frame)) = codec.decode_eof(&mut buffer) {
        check(frame);
    }
    count
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let chunk = first as usize + 1;
    let (_, peak) = peak_during(|| frames(chunk, stream));
    assert_bounded("frame", data.len(), peak, DEFAULT_MAX_FRAME_SIZE);
});
