use super::*;
use crate::codec::codec;
use crate::receiver::tests::{TestHandler, DEADLINE};
use crate::Receiver;
use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

type Connection = Framed<TcpStream, LengthDelimitedCodec>;

async fn free_address() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("address")
}

async fn accept(listener: &TcpListener) -> Connection {
    let (stream, _) = timeout(DEADLINE, listener.accept())
        .await
        .expect("sender connects in time")
        .expect("accept");
    Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE))
}

async fn next_frame(connection: &mut Connection) -> Bytes {
    timeout(DEADLINE, connection.next())
        .await
        .expect("frame in time")
        .expect("connection open")
        .expect("valid frame")
        .freeze()
}

async fn ack(connection: &mut Connection, reply: &'static [u8]) {
    connection
        .send(Bytes::from_static(reply))
        .await
        .expect("send ack");
}

async fn acked(handler: CancelHandler) -> Bytes {
    timeout(DEADLINE, handler)
        .await
        .expect("ack in time")
        .expect("message delivered")
}

async fn dropped(handler: CancelHandler) {
    let result = timeout(DEADLINE, handler).await.expect("resolved in time");
    assert!(result.is_err(), "message should have been dropped");
}

fn message(i: usize) -> Bytes {
    Bytes::from(format!("m{i}"))
}

async fn send_all(
    sender: &mut ReliableSender,
    address: SocketAddr,
    n: usize,
) -> Vec<CancelHandler> {
    let mut handlers = Vec::new();
    for i in 0..n {
        handlers.push(sender.send(address, message(i)).await);
    }
    handlers
}

#[tokio::test]
async fn delivers_and_returns_the_ack() {
    let (handler, mut received) = TestHandler::new();
    let (address, _handle) = Receiver::spawn(free_address().await, DEFAULT_MAX_FRAME_SIZE, handler)
        .await
        .expect("bind");
    let mut sender = ReliableSender::new();
    let handler = sender.send(address, Bytes::from_static(b"hello")).await;
    assert_eq!(&acked(handler).await[..], b"ack:hello");
    let got = timeout(DEADLINE, received.recv()).await.expect("in time");
    assert_eq!(got.as_deref(), Some(&b"hello"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_messages_are_acked_in_order() {
    let (handler, mut received) = TestHandler::new();
    let (address, _handle) = Receiver::spawn(free_address().await, DEFAULT_MAX_FRAME_SIZE, handler)
        .await
        .expect("bind");
    let mut sender = ReliableSender::new();
    let handlers = send_all(&mut sender, address, 2_000).await;
    for (i, handler) in handlers.into_iter().enumerate() {
        let reply = acked(handler).await;
        assert_eq!(reply, Bytes::from(format!("ack:m{i}")));
        let got = timeout(DEADLINE, received.recv()).await.expect("in time");
        assert_eq!(got, Some(message(i)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_arrive_intact() {
    let (handler, mut received) = TestHandler::new();
    let (address, _handle) = Receiver::spawn(free_address().await, DEFAULT_MAX_FRAME_SIZE, handler)
        .await
        .expect("bind");
    let mut sender = ReliableSender::new();
    let batches: Vec<Bytes> = (0..16u8)
        .map(|i| Bytes::from(vec![i; 500_000 + usize::from(i)]))
        .collect();
    let mut handlers = Vec::new();
    for batch in &batches {
        handlers.push(sender.send(address, batch.clone()).await);
    }
    for (batch, handler) in batches.iter().zip(handlers) {
        let reply = acked(handler).await;
        assert_eq!(reply.len(), 4 + batch.len());
        let got = timeout(DEADLINE, received.recv()).await.expect("in time");
        assert_eq!(got.as_ref(), Some(batch));
    }
}

#[test]
fn send_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let mut sender = ReliableSender::new();
    let address: SocketAddr = "127.0.0.1:1".parse().expect("address");
    assert_send(&sender.send(address, Bytes::new()));
    assert_send(&sender.broadcast(vec![address], Bytes::new()));
    assert_send(&sender.lucky_broadcast(vec![address], Bytes::new(), 1));
    let mut simple = crate::SimpleSender::new();
    assert_send(&simple.send(address, Bytes::new()));
    assert_send(&simple.broadcast(vec![address], Bytes::new()));
    assert_send(&simple.lucky_broadcast(vec![address], Bytes::new(), 1));
}

#[tokio::test]
async fn delivers_once_the_peer_starts_listening() {
    let address = free_address().await;
    let mut sender = ReliableSender::new();
    let handler = sender.send(address, Bytes::from_static(b"early")).await;
    // Let a few connection attempts fail before the peer shows up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (handler_impl, mut received) = TestHandler::new();
    let (_, _handle) = Receiver::spawn(address, DEFAULT_MAX_FRAME_SIZE, handler_impl)
        .await
        .expect("bind the same port");
    assert_eq!(&acked(handler).await[..], b"ack:early");
    let got = timeout(DEADLINE, received.recv()).await.expect("in time");
    assert_eq!(got.as_deref(), Some(&b"early"[..]));
}

#[tokio::test]
async fn unacked_messages_are_retransmitted_after_a_restart() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let mut sender = ReliableSender::new();
    let mut handlers = send_all(&mut sender, address, 5).await.into_iter();

    let mut connection = accept(&listener).await;
    for i in 0..5 {
        assert_eq!(next_frame(&mut connection).await, message(i));
    }
    ack(&mut connection, b"a0").await;
    ack(&mut connection, b"a1").await;
    for reply in [&b"a0"[..], b"a1"] {
        let handler = handlers.next().expect("handler");
        assert_eq!(&acked(handler).await[..], reply);
    }

    // The peer crashes: connection and listener go away, then it comes back on the same port.
    drop(connection);
    drop(listener);
    let listener = TcpListener::bind(address).await.expect("rebind");
    let mut connection = accept(&listener).await;
    for i in 2..5 {
        assert_eq!(next_frame(&mut connection).await, message(i));
    }
    ack(&mut connection, b"a2").await;
    ack(&mut connection, b"a3").await;
    ack(&mut connection, b"a4").await;
    for reply in [&b"a2"[..], b"a3", b"a4"] {
        let handler = handlers.next().expect("handler");
        assert_eq!(&acked(handler).await[..], reply);
    }
}

#[tokio::test]
async fn cancelled_messages_are_not_retransmitted() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let mut sender = ReliableSender::new();
    let mut handlers = send_all(&mut sender, address, 3).await;

    let mut connection = accept(&listener).await;
    for i in 0..3 {
        assert_eq!(next_frame(&mut connection).await, message(i));
    }
    let third = handlers.pop().expect("handler");
    drop(handlers.pop()); // Cancel m1.
    let first = handlers.pop().expect("handler");
    drop(connection);

    let mut connection = accept(&listener).await;
    assert_eq!(next_frame(&mut connection).await, message(0));
    assert_eq!(next_frame(&mut connection).await, message(2));
    let later = sender.send(address, message(3)).await;
    assert_eq!(next_frame(&mut connection).await, message(3));
    ack(&mut connection, b"a0").await;
    ack(&mut connection, b"a2").await;
    ack(&mut connection, b"a3").await;
    assert_eq!(&acked(first).await[..], b"a0");
    assert_eq!(&acked(third).await[..], b"a2");
    assert_eq!(&acked(later).await[..], b"a3");
}

#[tokio::test]
async fn a_full_buffer_drops_the_oldest() {
    let address = free_address().await;
    let mut sender = ReliableSender::with_capacity(3);
    let mut handlers = send_all(&mut sender, address, 5).await.into_iter();
    dropped(handlers.next().expect("handler")).await;
    dropped(handlers.next().expect("handler")).await;

    let listener = TcpListener::bind(address)
        .await
        .expect("bind the same port");
    let mut connection = accept(&listener).await;
    for i in 2..5 {
        assert_eq!(next_frame(&mut connection).await, message(i));
    }
    for reply in [&b"a2"[..], b"a3", b"a4"] {
        ack(&mut connection, reply).await;
    }
    for reply in [&b"a2"[..], b"a3", b"a4"] {
        let handler = handlers.next().expect("handler");
        assert_eq!(&acked(handler).await[..], reply);
    }
    // The buffer has room again: nothing more is dropped.
    let later = sender.send(address, message(5)).await;
    assert_eq!(next_frame(&mut connection).await, message(5));
    ack(&mut connection, b"a5").await;
    assert_eq!(&acked(later).await[..], b"a5");
}

#[tokio::test]
async fn a_buffer_full_in_bytes_drops_the_oldest() {
    let address = free_address().await;
    // Room for 1,000 bytes: three messages of 400 keep the last two only.
    let mut sender = ReliableSender::with_capacity(100).with_max_bytes(1_000);
    let big = |i: u8| Bytes::from(vec![i; 400]);
    let first = sender.send(address, big(0)).await;
    let second = sender.send(address, big(1)).await;
    let third = sender.send(address, big(2)).await;
    dropped(first).await;

    let listener = TcpListener::bind(address)
        .await
        .expect("bind the same port");
    let mut connection = accept(&listener).await;
    assert_eq!(next_frame(&mut connection).await, big(1));
    assert_eq!(next_frame(&mut connection).await, big(2));
    ack(&mut connection, b"a1").await;
    ack(&mut connection, b"a2").await;
    assert_eq!(&acked(second).await[..], b"a1");
    assert_eq!(&acked(third).await[..], b"a2");
    // Acknowledged bytes free their room: two more fit without dropping anything.
    let later = [
        sender.send(address, big(3)).await,
        sender.send(address, big(4)).await,
    ];
    for (i, handler) in later.into_iter().enumerate() {
        assert_eq!(next_frame(&mut connection).await, big(3 + i as u8));
        ack(&mut connection, b"ok").await;
        assert_eq!(&acked(handler).await[..], b"ok");
    }
}

#[tokio::test]
async fn ack_of_a_dropped_message_is_ignored() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let mut sender = ReliableSender::with_capacity(2);
    let mut handlers = send_all(&mut sender, address, 2).await.into_iter();
    let mut connection = accept(&listener).await;
    assert_eq!(next_frame(&mut connection).await, message(0));
    assert_eq!(next_frame(&mut connection).await, message(1));

    // m0 is in flight when m2 pushes it out of the buffer; the window is full, so m2 waits.
    let third = sender.send(address, message(2)).await;
    dropped(handlers.next().expect("handler")).await;
    ack(&mut connection, b"a0").await;
    assert_eq!(next_frame(&mut connection).await, message(2));
    ack(&mut connection, b"a1").await;
    ack(&mut connection, b"a2").await;
    assert_eq!(&acked(handlers.next().expect("handler")).await[..], b"a1");
    assert_eq!(&acked(third).await[..], b"a2");
}

#[tokio::test]
async fn oversized_message_is_refused() {
    let mut sender = ReliableSender::with_config(10, 8);
    let handler = sender
        .send(free_address().await, Bytes::from(vec![0u8; 9]))
        .await;
    dropped(handler).await;
}

#[tokio::test]
async fn dropping_the_sender_cancels_pending_messages() {
    let mut sender = ReliableSender::new();
    let handler = sender
        .send(free_address().await, Bytes::from_static(b"nobody"))
        .await;
    drop(sender);
    dropped(handler).await;
}

#[tokio::test]
async fn lucky_broadcast_reaches_the_requested_number_of_peers() {
    let (handler, _received) = TestHandler::new();
    let mut addresses = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..4 {
        let (address, handle) = Receiver::spawn(
            free_address().await,
            DEFAULT_MAX_FRAME_SIZE,
            handler.clone(),
        )
        .await
        .expect("bind");
        addresses.push(address);
        receivers.push(handle);
    }
    let mut sender = ReliableSender::new();
    let handlers = sender
        .lucky_broadcast(addresses.clone(), Bytes::from_static(b"x"), 3)
        .await;
    assert_eq!(handlers.len(), 3);
    for handler in handlers {
        assert_eq!(&acked(handler).await[..], b"ack:x");
    }
    let handlers = sender.broadcast(addresses, Bytes::from_static(b"y")).await;
    assert_eq!(handlers.len(), 4);
    for handler in handlers {
        assert_eq!(&acked(handler).await[..], b"ack:y");
    }
}

/// A member back from an outage dials us before we retry it: its connection to our port is word
/// that it listens again, and our sender retries it at once instead of sleeping out a backoff
/// that had grown while it was down (here a minute, so only the word can explain the delivery).
#[tokio::test]
async fn recovery_a_member_that_connects_to_us_is_retried_at_once() {
    use crate::handshake::{Credentials, Gate, Purpose};
    use crate::{Receiver, ReceiverConfig};
    use crypto::KeyPair;
    let (us, them) = (KeyPair::from_seed(1), KeyPair::from_seed(2));
    let members = [us.name, them.name];
    // Our port: its gate announces members that connect.
    let gate = Gate::new(us.name, Purpose::Mempool, members);
    let presence = gate.presence.clone();
    let (ours, _) = TestHandler::new();
    let (our_address, _ours) = Receiver::spawn_with(
        free_address().await,
        ReceiverConfig::gated(1024, gate),
        ours,
    )
    .await
    .expect("bind ours");
    // Their port, down for now.
    let their_address = free_address().await;
    let credentials = Credentials::new(us.name, us.secret.clone(), Purpose::Mempool)
        .dialling([(their_address, them.name)])
        .hearing(presence);
    let mut sender = ReliableSender::authenticated(8, 1024, credentials)
        .with_backoff(Duration::from_secs(60), Duration::from_secs(60));
    let pending = sender.send(their_address, message(1)).await;
    // The first attempt fails at once (nothing listens); the sender then waits a minute.
    tokio::time::sleep(Duration::from_millis(300)).await;

    // They come back: their port listens, and they dial ours with a message of their own.
    let gate = Gate::new(them.name, Purpose::Mempool, members);
    let (theirs, mut received) = TestHandler::new();
    let _theirs = Receiver::spawn_with(their_address, ReceiverConfig::gated(1024, gate), theirs)
        .await
        .expect("bind theirs");
    let their_credentials = Credentials::new(them.name, them.secret.clone(), Purpose::Mempool)
        .dialling([(our_address, us.name)]);
    let mut theirs = ReliableSender::authenticated(8, 1024, their_credentials);
    acked(theirs.send(our_address, message(2)).await).await;
    // Ours goes out now, not in a minute.
    assert_eq!(&acked(pending).await[..], b"ack:m1");
    let got = timeout(DEADLINE, received.recv()).await.expect("in time");
    assert_eq!(got.as_deref(), Some(&message(1)[..]));
}
