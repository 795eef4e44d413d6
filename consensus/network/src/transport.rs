//! What both senders share: opening a connection and writing frames without copying payloads.

use super::codec::LENGTH_PREFIX;
use super::handshake::{self, Credentials, HandshakeError};
use super::traffic;
use bytes::Bytes;
use plumbing::clock;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::warn;

/// A connection attempt to an unreachable host can hang for minutes at the TCP level; give up
/// sooner so the caller's backoff and drop policies take over.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many buffers per `writev` (Linux allows 1024).
const MAX_IO_SLICES: usize = 512;

/// Opens a connection with Nagle's algorithm off: votes and acks are small and latency-bound,
/// and senders already coalesce bursts into one write themselves. With `credentials`, proves
/// them to the member the credentials expect at `address` ([`handshake`]) before returning, so
/// frames written afterwards are read; an address where they expect no member is not dialled.
pub(crate) async fn connect(
    address: SocketAddr,
    credentials: Option<&Credentials>,
) -> io::Result<TcpStream> {
    let acceptor = match credentials {
        None => None,
        Some(credentials) => Some(*credentials.acceptor_at(&address).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{address} is no committee member's {:?} port",
                    credentials.purpose
                ),
            )
        })?),
    };
    let mut stream = clock::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connection attempt timed out"))??;
    stream.set_nodelay(true)?;
    if let (Some(credentials), Some(acceptor)) = (credentials, acceptor) {
        handshake::dial(&mut stream, credentials, &acceptor)
            .await
            .map_err(|error| match error {
                HandshakeError::Io(error) => error,
                // Refusals mean a misconfigured committee or port: worth a warning, and the
                // caller's backoff keeps them rare.
                other => {
                    warn!(peer = %address, error = %other, "handshake refused");
                    io::Error::new(io::ErrorKind::PermissionDenied, other.to_string())
                }
            })?;
    }
    Ok(stream)
}

/// Writes length-prefixed frames (the same bytes as [`super::codec`]) straight from the callers'
/// `Bytes`: a burst of frames goes out with vectored writes, usually one syscall, and no payload
/// is copied into an intermediate buffer as `Framed` would do.
pub(crate) struct FrameWriter<W> {
    io: W,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub(crate) fn new(io: W) -> Self {
        Self { io }
    }

    /// Writes every frame, in order. The caller checks sizes against the peer's maximum; a
    /// payload longer than `u32::MAX` cannot be framed and is refused before anything is written.
    pub(crate) async fn write_frames(&mut self, frames: &[Bytes]) -> io::Result<()> {
        let mut headers = Vec::with_capacity(frames.len());
        for frame in frames {
            let length = u32::try_from(frame.len()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "frame longer than u32::MAX")
            })?;
            headers.push(length.to_be_bytes());
        }
        // Part 2i is frame i's header, part 2i + 1 its payload.
        let part = |index: usize| -> &[u8] {
            if index.is_multiple_of(2) {
                &headers[index / 2][..LENGTH_PREFIX]
            } else {
                &frames[index / 2][..]
            }
        };
        let parts = frames.len() * 2;
        let (mut current, mut offset) = (0, 0);
        let mut slices = Vec::with_capacity(parts.min(MAX_IO_SLICES));
        loop {
            // Skip finished parts, including empty payloads, so we never issue an empty write.
            while current < parts && offset == part(current).len() {
                current += 1;
                offset = 0;
            }
            if current == parts {
                break;
            }
            slices.clear();
            slices.push(IoSlice::new(&part(current)[offset..]));
            slices.extend(
                (current + 1..parts.min(current + MAX_IO_SLICES))
                    .map(part)
                    .filter(|bytes| !bytes.is_empty())
                    .map(IoSlice::new),
            );
            let mut written = self.io.write_vectored(&slices).await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            while written > 0 {
                let remaining = part(current).len() - offset;
                if written >= remaining {
                    written -= remaining;
                    current += 1;
                    offset = 0;
                } else {
                    offset += written;
                    written = 0;
                }
            }
        }
        self.io.flush().await?;
        let bytes: usize = frames.iter().map(|frame| frame.len() + LENGTH_PREFIX).sum();
        traffic::sent(frames.len() as u64, bytes as u64);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;
    use futures::StreamExt;
    use tokio_util::codec::FramedRead;

    #[tokio::test]
    async fn frames_survive_partial_writes() {
        // A tiny duplex buffer forces many short, partial writes.
        let (client, server) = tokio::io::duplex(7);
        let frames: Vec<Bytes> = vec![
            Bytes::from_static(b"first"),
            Bytes::new(),
            Bytes::from(vec![9u8; 1000]),
            Bytes::new(),
            Bytes::from_static(b"last"),
        ];
        let expected = frames.clone();
        let writer = tokio::spawn(async move {
            let mut writer = FrameWriter::new(client);
            writer.write_frames(&frames).await
        });
        let mut reader = FramedRead::new(server, codec(4096));
        for want in expected {
            let got = reader.next().await.expect("a frame").expect("valid frame");
            assert_eq!(got.freeze(), want);
        }
        writer.await.expect("join").expect("write");
    }

    #[tokio::test]
    async fn more_frames_than_one_writev_holds() {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let frames: Vec<Bytes> = (0..3 * MAX_IO_SLICES as u32)
            .map(|i| Bytes::from(i.to_be_bytes().to_vec()))
            .collect();
        let expected = frames.clone();
        let writer = tokio::spawn(async move {
            let mut writer = FrameWriter::new(client);
            writer.write_frames(&frames).await
        });
        let mut reader = FramedRead::new(server, codec(16));
        for want in expected {
            let got = reader.next().await.expect("a frame").expect("valid frame");
            assert_eq!(got.freeze(), want);
        }
        writer.await.expect("join").expect("write");
    }
}
