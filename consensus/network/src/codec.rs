//! The one frame format used on every connection.

use bytes::Bytes;
use futures::stream::SplitSink;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// Largest frame accepted unless configured otherwise (a 500 KB batch fits many times over).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 8 * 1024 * 1024;

/// Length of the big-endian length prefix in front of every frame.
pub(crate) const LENGTH_PREFIX: usize = 4;

/// Frames are a 4-byte big-endian length prefix followed by the payload. Frames longer than
/// `max_frame_size` are refused both when decoding (the connection is then closed) and when
/// encoding, so a corrupt or hostile length prefix cannot make a node allocate gigabytes.
pub fn codec(max_frame_size: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(LENGTH_PREFIX)
        .big_endian()
        .max_frame_length(max_frame_size)
        .new_codec()
}

/// The write half of a connection, handed to handlers so they can reply (acks, sync answers).
pub type Writer = SplitSink<Framed<TcpStream, LengthDelimitedCodec>, Bytes>;

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use rand::{Rng, SeedableRng};
    use tokio_util::codec::{Decoder, Encoder};

    fn frame(payload: &[u8]) -> BytesMut {
        let mut buf = BytesMut::new();
        buf.put_u32(payload.len() as u32);
        buf.put_slice(payload);
        buf
    }

    #[test]
    fn round_trip() {
        let mut codec = codec(16);
        let mut buf = BytesMut::new();
        codec
            .encode(Bytes::from_static(b"hello"), &mut buf)
            .expect("encode");
        codec.encode(Bytes::new(), &mut buf).expect("encode empty");
        assert_eq!(&buf[..4], &5u32.to_be_bytes());
        let first = codec.decode(&mut buf).expect("decode").expect("a frame");
        assert_eq!(&first[..], b"hello");
        let second = codec.decode(&mut buf).expect("decode").expect("a frame");
        assert!(second.is_empty());
        assert!(codec.decode(&mut buf).expect("decode").is_none());
    }

    #[test]
    fn oversized_frame_is_rejected_by_the_decoder() {
        let mut codec = codec(8);
        let mut buf = frame(&[7u8; 9]);
        assert!(codec.decode(&mut buf).is_err());

        // The prefix alone is enough to refuse: no need to wait for (or buffer) the payload.
        let mut buf = BytesMut::new();
        buf.put_u32(u32::MAX);
        assert!(codec.decode(&mut buf).is_err());
    }

    #[test]
    fn oversized_frame_is_rejected_by_the_encoder() {
        let mut codec = codec(8);
        let mut buf = BytesMut::new();
        assert!(codec.encode(Bytes::from(vec![0u8; 9]), &mut buf).is_err());
        assert!(buf.is_empty());
    }

    #[test]
    fn frame_of_exactly_the_maximum_is_accepted() {
        let mut codec = codec(8);
        let mut buf = frame(&[1u8; 8]);
        let decoded = codec.decode(&mut buf).expect("decode").expect("a frame");
        assert_eq!(decoded.len(), 8);
    }

    #[test]
    fn truncated_input_never_yields_a_frame() {
        let full = frame(b"0123456789");
        for cut in 0..full.len() {
            // The codec remembers a parsed header, so each stream gets a fresh one.
            let mut buf = BytesMut::from(&full[..cut]);
            assert!(codec(64).decode(&mut buf).expect("partial").is_none());
            // At end of stream a partial frame is an error or, when only the header had
            // arrived, a clean end; never a frame.
            let mut buf = BytesMut::from(&full[..cut]);
            let at_eof = codec(64).decode_eof(&mut buf);
            assert!(!matches!(at_eof, Ok(Some(_))), "frame from a cut at {cut}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..2_000 {
            let len = rng.gen_range(0..64);
            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let mut codec = codec(32);
            let mut buf = BytesMut::from(&bytes[..]);
            // Decode until the codec asks for more input or reports an error; never panic.
            while let Ok(Some(frame)) = codec.decode(&mut buf) {
                assert!(frame.len() <= 32);
            }
            let _ = codec.decode_eof(&mut buf);
        }
    }
}
