//! What this process sent to and received from the committee: frames and bytes, counted where
//! every committee frame is written ([`super::transport::FrameWriter`]) and read
//! ([`super::Receiver`]). Client transactions arrive on the mempool's own port and are not
//! counted; neither are the acknowledgements a receiver writes back (a few bytes per frame).
//!
//! The counters are per process, not per sender: a node is one process, and its METRICS line
//! reports them as the committee traffic the node caused. Tests that run several nodes in one
//! process see their sum.

use std::sync::atomic::{AtomicU64, Ordering};

static SENT_FRAMES: AtomicU64 = AtomicU64::new(0);
static SENT_BYTES: AtomicU64 = AtomicU64::new(0);
static RECEIVED_FRAMES: AtomicU64 = AtomicU64::new(0);
static RECEIVED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The counters at one moment; bytes include each frame's length prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub sent_frames: u64,
    pub sent_bytes: u64,
    pub received_frames: u64,
    pub received_bytes: u64,
}

/// Everything counted since the process started.
pub fn traffic() -> Traffic {
    Traffic {
        sent_frames: SENT_FRAMES.load(Ordering::Relaxed),
        sent_bytes: SENT_BYTES.load(Ordering::Relaxed),
        received_frames: RECEIVED_FRAMES.load(Ordering::Relaxed),
        received_bytes: RECEIVED_BYTES.load(Ordering::Relaxed),
    }
}

pub(crate) fn sent(frames: u64, bytes: u64) {
    SENT_FRAMES.fetch_add(frames, Ordering::Relaxed);
    SENT_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

pub(crate) fn received(bytes: u64) {
    RECEIVED_FRAMES.fetch_add(1, Ordering::Relaxed);
    RECEIVED_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::tests::TestHandler;
    use crate::transport::FrameWriter;
    use crate::{codec, Receiver};
    use bytes::Bytes;
    use futures::SinkExt;
    use tokio::net::TcpStream;
    use tokio_util::codec::Framed;

    // Other tests of this binary write and read frames concurrently: each assertion is on how
    // much the counters grew at least.

    #[tokio::test]
    async fn every_frame_written_is_counted_with_its_length_prefix() {
        let before = traffic();
        let (client, _server) = tokio::io::duplex(64 * 1024);
        let mut writer = FrameWriter::new(client);
        let frames = vec![
            Bytes::from(vec![1u8; 1000]),
            Bytes::new(),
            Bytes::from_static(b"x"),
        ];
        writer.write_frames(&frames).await.expect("write");
        let after = traffic();
        assert!(after.sent_frames - before.sent_frames >= 3);
        assert!(after.sent_bytes - before.sent_bytes >= 1001 + 3 * 4);
    }

    #[tokio::test]
    async fn every_frame_a_receiver_reads_is_counted() {
        let (handler, mut rx) = TestHandler::new();
        let address = "127.0.0.1:0".parse().expect("address");
        let (address, _handle) = Receiver::spawn(address, 1 << 20, handler)
            .await
            .expect("bind");
        let before = traffic();
        let stream = TcpStream::connect(address).await.expect("connect");
        let mut client = Framed::new(stream, codec(1 << 20));
        for _ in 0..2 {
            client
                .send(Bytes::from(vec![7u8; 5000]))
                .await
                .expect("send");
        }
        for _ in 0..2 {
            rx.recv().await.expect("a frame handed over");
        }
        let after = traffic();
        assert!(after.received_frames - before.received_frames >= 2);
        assert!(after.received_bytes - before.received_bytes >= 2 * (5000 + 4));
    }
}
