//! Strangers on the ports of real nodes on loopback.

mod common;

use batch::BatchBuilder;
use common::*;
use crypto::{Digest, KeyPair};
use hotstuff::wire;
use hotstuff::ConsensusMessage;
use mempool::MempoolMessage;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(300 + i)).collect()
}

/// Sends one frame as a stranger would (no handshake) and returns everything the node wrote back
/// until it closed the connection, or `None` if it was still open after `limit`.
fn stranger_sends(address: SocketAddr, payload: &[u8], limit: Duration) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(address).expect("connect");
    let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(payload);
    // The node may already have closed on us (a refused handshake); that is what we check below.
    let _ = stream.write_all(&frame);
    let deadline = Instant::now() + limit;
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("timeout");
        match stream.read(&mut buffer) {
            Ok(0) => return Some(received),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(received),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(e) => panic!("unexpected read error: {e}"),
        }
    }
}

fn acked(received: &[u8]) -> bool {
    received
        .windows(7)
        .any(|w| w == [0, 0, 0, 3, b'A', b'c', b'k'])
}

/// Before authentication a stranger's well-formed batch was stored and acknowledged (and kept
/// until it committed, that is forever), and its consensus messages were acknowledged and
/// processed. Now the node closes the connection before reading a frame.
#[test]
fn byzantine_stranger_is_refused_on_the_mempool_and_consensus_ports() {
    let keys = keys(4);
    let committee = committee(&keys);
    let node = TestNode::spawn(keys[0].clone(), committee.clone(), test_parameters());
    let authority = committee.authority(&keys[0].name).expect("member").clone();

    let mut builder = BatchBuilder::with_capacity(1_024);
    builder.push(&[7u8; 200]);
    let batch = builder.seal(1, 1_024);
    let frame = MempoolMessage::encode_batch(batch.bytes());
    let received = stranger_sends(authority.mempool_address, &frame, Duration::from_secs(15))
        .expect("the mempool port closes a stranger's connection");
    assert!(!acked(&received), "a stranger's batch was acknowledged");
    assert_eq!(node.mempool.received_batches.load(Ordering::Relaxed), 0);

    let request = wire::encode(&ConsensusMessage::SyncRequest(
        Digest::of(b"anything"),
        keys[1].name,
        0,
    ))
    .expect("encode");
    let received = stranger_sends(
        authority.consensus_address,
        &request,
        Duration::from_secs(15),
    )
    .expect("the consensus port closes a stranger's connection");
    assert!(!acked(&received), "a stranger's message was acknowledged");
}
