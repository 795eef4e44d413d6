use super::*;
use crate::DEFAULT_MAX_FRAME_SIZE;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::timeout;

pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// Records every message and replies `ack:<message>`; fails on the message `fail`.
#[derive(Clone)]
pub(crate) struct TestHandler {
    pub(crate) received: mpsc::UnboundedSender<Bytes>,
}

impl TestHandler {
    pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<Bytes>) {
        let (received, rx) = mpsc::unbounded_channel();
        (Self { received }, rx)
    }
}

impl MessageHandler for TestHandler {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        if &message[..] == b"fail" {
            return Err(HandlerError::Malformed("asked to fail".into()));
        }
        let _ = self.received.send(message.clone());
        let mut reply = b"ack:".to_vec();
        reply.extend_from_slice(&message);
        writer.send(Bytes::from(reply)).await?;
        Ok(())
    }
}

async fn start() -> (SocketAddr, mpsc::UnboundedReceiver<Bytes>, JoinHandle<()>) {
    let (handler, rx) = TestHandler::new();
    let address = "127.0.0.1:0".parse().expect("address");
    let (address, handle) = Receiver::spawn(address, 64, handler).await.expect("bind");
    (address, rx, handle)
}

type Client = Framed<TcpStream, tokio_util::codec::LengthDelimitedCodec>;

async fn client(address: SocketAddr) -> Client {
    let stream = TcpStream::connect(address).await.expect("connect");
    Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE))
}

async fn request(client: &mut Client, message: &'static [u8]) -> Bytes {
    client
        .send(Bytes::from_static(message))
        .await
        .expect("send");
    let reply = timeout(DEADLINE, client.next())
        .await
        .expect("reply in time")
        .expect("connection open")
        .expect("valid frame");
    reply.freeze()
}

/// Waits until the server closes `stream` (end of file or a reset).
async fn assert_closed(mut stream: TcpStream) {
    let mut buf = [0u8; 64];
    loop {
        match timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("server closes the connection in time")
        {
            Ok(0) | Err(_) => return,
            Ok(_) => continue,
        }
    }
}

async fn assert_still_serving(address: SocketAddr) {
    let mut good = client(address).await;
    assert_eq!(&request(&mut good, b"hello").await[..], b"ack:hello");
}

#[tokio::test]
async fn replies_to_each_frame_in_order() {
    let (address, mut received, _handle) = start().await;
    let mut client = client(address).await;
    for message in [&b"one"[..], b"two", b""] {
        client
            .feed(Bytes::copy_from_slice(message))
            .await
            .expect("feed");
    }
    SinkExt::<Bytes>::flush(&mut client).await.expect("flush");
    for message in [&b"one"[..], b"two", b""] {
        let reply = timeout(DEADLINE, client.next())
            .await
            .expect("in time")
            .expect("open")
            .expect("frame");
        assert_eq!(&reply[4..], message);
        let got = timeout(DEADLINE, received.recv()).await.expect("in time");
        assert_eq!(got.as_deref(), Some(message));
    }
}

#[tokio::test]
async fn garbage_closes_the_connection_only() {
    let (address, _received, _handle) = start().await;
    let mut bad = TcpStream::connect(address).await.expect("connect");
    bad.write_all(b"this is not a frame at all")
        .await
        .expect("write");
    assert_closed(bad).await;
    assert_still_serving(address).await;
}

#[tokio::test]
async fn oversized_length_prefix_closes_the_connection_only() {
    let (address, _received, _handle) = start().await;
    let mut bad = TcpStream::connect(address).await.expect("connect");
    bad.write_all(&65u32.to_be_bytes()).await.expect("write");
    assert_closed(bad).await;
    assert_still_serving(address).await;
}

#[tokio::test]
async fn disconnect_mid_frame_is_survived() {
    let (address, mut received, _handle) = start().await;
    let mut bad = TcpStream::connect(address).await.expect("connect");
    let mut bytes = 5u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(b"whole");
    bytes.extend_from_slice(&10u32.to_be_bytes());
    bytes.extend_from_slice(b"half");
    bad.write_all(&bytes).await.expect("write");
    drop(bad);
    // The complete frame was still delivered; the truncated one was not.
    let got = timeout(DEADLINE, received.recv()).await.expect("in time");
    assert_eq!(got.as_deref(), Some(&b"whole"[..]));
    assert_still_serving(address).await;
    let got = timeout(DEADLINE, received.recv()).await.expect("in time");
    assert_eq!(got.as_deref(), Some(&b"hello"[..]));
}

#[tokio::test]
async fn handler_error_closes_only_that_connection() {
    let (address, _received, _handle) = start().await;
    let mut other = client(address).await;
    assert_eq!(&request(&mut other, b"before").await[..], b"ack:before");

    let mut failing = client(address).await;
    failing
        .send(Bytes::from_static(b"fail"))
        .await
        .expect("send");
    assert_closed(failing.into_inner()).await;

    // The connection opened before the failure is still served, and so are new ones.
    assert_eq!(&request(&mut other, b"after").await[..], b"ack:after");
    assert_still_serving(address).await;
}

#[tokio::test]
async fn aborting_the_receiver_closes_its_connections() {
    let (address, _received, handle) = start().await;
    let mut client = client(address).await;
    assert_eq!(&request(&mut client, b"hi").await[..], b"ack:hi");
    handle.abort();
    assert_closed(client.into_inner()).await;
}

async fn start_with(config: ReceiverConfig) -> (SocketAddr, mpsc::UnboundedReceiver<Bytes>) {
    let (handler, rx) = TestHandler::new();
    let address = "127.0.0.1:0".parse().expect("address");
    let (address, _handle) = Receiver::spawn_with(address, config, handler)
        .await
        .expect("bind");
    (address, rx)
}

/// On a gated port only members that prove their key are read; a stranger
/// (raw frames, or a full handshake with a key outside the committee) is closed unread.
#[tokio::test]
async fn byzantine_gated_receiver_reads_members_only() {
    use crate::handshake::{self, Credentials, Gate, Purpose};
    use crate::ReliableSender;
    use crypto::KeyPair;
    let members: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
    let gate = Gate::new(
        members[0].name,
        Purpose::Mempool,
        members.iter().map(|k| k.name),
    );
    let (address, mut received) = start_with(ReceiverConfig::gated(64, gate)).await;

    let mut raw = client(address).await;
    raw.send(Bytes::from_static(b"raw")).await.expect("send");
    assert_closed(raw.into_inner()).await;

    let stranger = KeyPair::from_seed(42);
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let credentials = Credentials::new(stranger.name, stranger.secret, Purpose::Mempool);
    let dialed = handshake::dial(&mut stream, &credentials, &members[0].name).await;
    assert!(dialed.is_err());
    assert_closed(stream).await;

    let credentials =
        Credentials::new(members[2].name, members[2].secret.clone(), Purpose::Mempool)
            .dialling([(address, members[0].name)]);
    let mut sender = ReliableSender::authenticated(8, 64, credentials);
    let ack = timeout(
        DEADLINE,
        sender.send(address, Bytes::from_static(b"member")).await,
    )
    .await
    .expect("acked in time")
    .expect("acked");
    assert_eq!(&ack[..], b"ack:member");
    // Only the member's frame was ever dispatched.
    let got = timeout(DEADLINE, received.recv()).await.expect("in time");
    assert_eq!(got.as_deref(), Some(&b"member"[..]));
    assert!(received.try_recv().is_err());
}

/// Connections over the cap are closed at once; a slot frees when a
/// connection ends.
#[tokio::test]
async fn byzantine_connection_flood_is_capped() {
    let config = ReceiverConfig {
        max_connections: 2,
        ..ReceiverConfig::open(64)
    };
    let (address, _received) = start_with(config).await;
    let mut first = client(address).await;
    assert_eq!(&request(&mut first, b"1").await[..], b"ack:1");
    let mut second = client(address).await;
    assert_eq!(&request(&mut second, b"2").await[..], b"ack:2");
    let third = TcpStream::connect(address).await.expect("connect");
    assert_closed(third).await;
    drop(first);
    // The slot frees once the server notices the close: retry within a deadline.
    timeout(DEADLINE, async {
        loop {
            let mut next = client(address).await;
            if next.send(Bytes::from_static(b"3")).await.is_ok() {
                if let Ok(Some(Ok(reply))) = timeout(Duration::from_millis(200), next.next()).await
                {
                    assert_eq!(&reply[..], b"ack:3");
                    return;
                }
            }
        }
    })
    .await
    .expect("a slot frees when a connection ends");
    assert_eq!(&request(&mut second, b"still").await[..], b"ack:still");
}

/// A connection that stays silent past the idle timeout is closed, so
/// idle (or half-sent) connections cannot hold slots forever.
#[tokio::test]
async fn byzantine_idle_connection_is_closed() {
    let config = ReceiverConfig {
        idle_timeout: Duration::from_millis(200),
        ..ReceiverConfig::open(64)
    };
    let (address, _received) = start_with(config).await;
    let mut idle = client(address).await;
    assert_eq!(&request(&mut idle, b"hi").await[..], b"ack:hi");
    // Half a frame, then silence.
    let mut stream = idle.into_inner();
    stream.write_all(&10u32.to_be_bytes()).await.expect("write");
    assert_closed(stream).await;
}

/// Records each frame with the member its connection authenticated as.
#[derive(Clone)]
struct PeerRecorder {
    peer: Option<PublicKey>,
    received: mpsc::UnboundedSender<(Option<PublicKey>, Bytes)>,
}

impl MessageHandler for PeerRecorder {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        let _ = self.received.send((self.peer, message));
        writer.send(Bytes::from_static(b"ack")).await?;
        Ok(())
    }

    fn for_peer(&self, peer: PublicKey) -> Self {
        PeerRecorder {
            peer: Some(peer),
            received: self.received.clone(),
        }
    }
}

/// A member B that D dials answers with the hello X just sent B, passes D's signed answer
/// on to X and then writes frames of its own on X's port, which X reads as D's. D refuses a
/// hello that names anyone but B, so B never gets an answer to pass on.
#[tokio::test]
async fn byzantine_handshake_relay_cannot_speak_as_the_dialer() {
    use crate::handshake::{Credentials, Gate, Purpose};
    use crate::testing::{relay_handshake, Relay};
    use crate::ReliableSender;
    use crypto::KeyPair;
    let keys: Vec<_> = (0..3).map(KeyPair::from_seed).collect();
    let (d, b, x) = (&keys[0], &keys[1], &keys[2]);
    let (tx, mut received) = mpsc::unbounded_channel();
    let recorder = PeerRecorder {
        peer: None,
        received: tx,
    };
    let gate = Gate::new(x.name, Purpose::Consensus, keys.iter().map(|k| k.name));
    let local = "127.0.0.1:0".parse().expect("address");
    let (x_address, _x) = Receiver::spawn_with(local, ReceiverConfig::gated(1024, gate), recorder)
        .await
        .expect("bind");

    let b_listener = TcpListener::bind(local).await.expect("bind");
    let b_address = b_listener.local_addr().expect("address");
    let relay = tokio::spawn(async move {
        let (from_d, _) = b_listener.accept().await.expect("D dials B");
        match relay_handshake(from_d, x_address).await {
            Relay::Entered { stream, .. } => {
                // In as D: speak for it.
                let mut as_d = Framed::new(stream, codec(1024));
                let _ = as_d.send(Bytes::from_static(b"forged by B")).await;
                let _ = as_d.next().await;
                "entered X's port as D"
            }
            Relay::RefusedByDialer => "refused by D",
            Relay::RefusedByTarget => "refused by X",
            Relay::Unreachable => "undecided",
        }
    });

    let credentials = Credentials::new(d.name, d.secret.clone(), Purpose::Consensus)
        .dialling([(b_address, b.name), (x_address, x.name)]);
    let mut sender = ReliableSender::authenticated(8, 1024, credentials);
    let _pending = sender.send(b_address, Bytes::from_static(b"for B")).await;
    let relayed = timeout(DEADLINE, relay)
        .await
        .expect("the relay ends in time")
        .expect("relay task");
    assert_eq!(
        relayed, "refused by D",
        "B passed D's handshake on to X and spoke as D"
    );
    assert!(
        received.try_recv().is_err(),
        "X read a frame as D's that D never sent"
    );
}

/// A committee whose members all live on `host`, at placeholder ports (gates read only the
/// hosts; dialers are told the real address).
fn committee_on(host: &str, keys: &[crypto::KeyPair]) -> config::Committee {
    use config::{Authority, Committee};
    let authorities = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let address: SocketAddr = format!("{host}:{}", 1 + i).parse().expect("address");
            let authority = Authority {
                stake: 1,
                consensus_address: address,
                mempool_address: address,
                transactions_address: address,
            };
            (key.name, authority)
        })
        .collect();
    Committee { authorities }
}

/// Strangers on other hosts open connections that never answer the hello and redial as
/// soon as one is closed. Before, they held every handshake slot of the port and a member
/// could not get in; now members' hosts have slots of their own.
#[tokio::test]
async fn byzantine_silent_strangers_cannot_lock_members_out() {
    use crate::handshake::{Credentials, Gate, Purpose, HANDSHAKE_TIMEOUT, HELLO_LEN};
    use crate::ReliableSender;
    use crypto::KeyPair;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::net::TcpSocket;
    let keys: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
    let gate = Gate::for_committee(
        keys[0].name,
        Purpose::Consensus,
        &committee_on("127.0.0.1", &keys),
    );
    // 16 connections: 4 handshake slots for strangers.
    let config = ReceiverConfig {
        max_connections: 16,
        ..ReceiverConfig::gated(64, gate)
    };
    let (address, _received) = start_with(config).await;

    // Eight strangers, each on a host of its own, each holding one silent connection.
    let holding = Arc::new(AtomicUsize::new(0));
    let mut strangers = Vec::new();
    for host in 2..10 {
        let holding = holding.clone();
        strangers.push(tokio::spawn(async move {
            let local: SocketAddr = format!("127.0.0.{host}:0").parse().expect("address");
            loop {
                let socket = TcpSocket::new_v4().expect("socket");
                socket.bind(local).expect("bind a loopback address");
                let Ok(mut stream) = socket.connect(address).await else {
                    continue;
                };
                let mut hello = [0u8; HELLO_LEN];
                if stream.read_exact(&mut hello).await.is_err() {
                    // Refused: try again at once, as a flood would (a pause keeps the
                    // test's own CPU in check).
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                // A slot: hold it, silent, until the acceptor gives up on us.
                holding.fetch_add(1, Ordering::Relaxed);
                let _ = stream.read(&mut hello).await;
                holding.fetch_sub(1, Ordering::Relaxed);
            }
        }));
    }
    timeout(DEADLINE, async {
        while holding.load(Ordering::Relaxed) < 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the strangers fill their slots");

    // The strangers' connections last until the handshake timeout: a member that gets in
    // before half of it was never locked out, only not delayed either.
    let credentials = Credentials::new(keys[1].name, keys[1].secret.clone(), Purpose::Consensus)
        .dialling([(address, keys[0].name)]);
    let mut member = ReliableSender::authenticated(8, 64, credentials);
    let ack = timeout(
        HANDSHAKE_TIMEOUT / 2,
        member.send(address, Bytes::from_static(b"member")).await,
    )
    .await
    .expect("a member gets in while strangers hold their slots")
    .expect("acked");
    assert_eq!(&ack[..], b"ack:member");
    assert!(
        holding.load(Ordering::Relaxed) >= 4,
        "the strangers still hold their slots"
    );
    for stranger in strangers {
        stranger.abort();
    }
}

/// A member that opens connection after connection on a port (all authenticated, all idle)
/// filled every slot of it before, and the other members were refused until the idle
/// timeout; now it holds at most `CONNECTIONS_PER_MEMBER`, its oldest closed first.
#[tokio::test]
async fn byzantine_member_opening_many_connections_closes_only_its_own() {
    use crate::handshake::{self, Credentials, Gate, Purpose};
    use crate::ReliableSender;
    use crypto::KeyPair;
    let keys: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
    let gate = Gate::for_committee(
        keys[0].name,
        Purpose::Mempool,
        &committee_on("127.0.0.1", &keys),
    );
    let config = ReceiverConfig {
        max_connections: 16,
        ..ReceiverConfig::gated(64, gate)
    };
    let (address, _received) = start_with(config).await;
    let dialling = |key: &KeyPair| {
        Credentials::new(key.name, key.secret.clone(), Purpose::Mempool)
            .dialling([(address, keys[0].name)])
    };

    let greedy = dialling(&keys[1]);
    let mut held = Vec::new();
    for _ in 0..16 {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        handshake::dial(&mut stream, &greedy, &keys[0].name)
            .await
            .expect("a member gets in");
        held.push(stream);
    }
    let mut newest = Framed::new(held.pop().expect("a connection"), codec(64));
    assert_closed(held.remove(0)).await;

    let mut honest = ReliableSender::authenticated(8, 64, dialling(&keys[2]));
    let ack = timeout(
        DEADLINE,
        honest.send(address, Bytes::from_static(b"honest")).await,
    )
    .await
    .expect("another member gets in")
    .expect("acked");
    assert_eq!(&ack[..], b"ack:honest");
    // The greedy member's newest connection is served still.
    assert_eq!(&request(&mut newest, b"newest").await[..], b"ack:newest");
}
