use super::*;
use bytes::Bytes;
use futures::SinkExt;
use network::codec;
use tokio_util::codec::FramedWrite;

fn txs(chunk: &TxChunk) -> Vec<Bytes> {
    chunk.transactions().map(Bytes::copy_from_slice).collect()
}

#[tokio::test]
async fn forwards_every_transaction_and_drops_oversized_frames() {
    let (tx, mut rx) = mpsc::channel(16);
    let metrics = Arc::new(MempoolMetrics::default());
    let (address, _handle) = TxReceiver::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        64,
        16,
        Duration::from_secs(60),
        tx,
        metrics.clone(),
    )
    .await
    .expect("bind");
    let socket = TcpStream::connect(address).await.expect("connect");
    let mut client = FramedWrite::new(socket, codec(1024));
    for i in 0..500u32 {
        client
            .feed(Bytes::from(i.to_be_bytes().to_vec()))
            .await
            .expect("feed");
    }
    SinkExt::<Bytes>::flush(&mut client).await.expect("flush");

    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while received.len() < 500 {
            received.extend(txs(&rx.recv().await.expect("chunk")));
        }
    })
    .await
    .expect("all transactions forwarded");
    let expected: Vec<Bytes> = (0..500u32)
        .map(|i| Bytes::from(i.to_be_bytes().to_vec()))
        .collect();
    assert_eq!(received, expected);
    let counted = metrics
        .received_txs
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(counted, 500);

    // An oversized transaction closes the connection: the client sees end of stream.
    client.send(Bytes::from(vec![0u8; 65])).await.expect("send");
    let mut socket = client.into_inner();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut socket, &mut buf),
    )
    .await
    .expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)));
    assert!(rx.try_recv().is_err());
}

/// Frames read in the same go as an oversized one are complete transactions: they are
/// forwarded, and then the connection is closed on the oversized frame's prefix, without its
/// body being waited for.
#[tokio::test]
async fn frames_before_an_oversized_one_are_forwarded_then_the_connection_closes() {
    let (tx, mut rx) = mpsc::channel(16);
    let (address, _handle) = TxReceiver::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        8,
        16,
        Duration::from_secs(60),
        tx,
        Arc::default(),
    )
    .await
    .expect("bind");
    let mut socket = TcpStream::connect(address).await.expect("connect");
    let mut stream = batch::TxFrames::from_transactions(&[&b"one"[..], b"two"])
        .bytes()
        .to_vec();
    stream.extend_from_slice(&9u32.to_be_bytes());
    tokio::io::AsyncWriteExt::write_all(&mut socket, &stream)
        .await
        .expect("write");
    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while received.len() < 2 {
            received.extend(txs(&rx.recv().await.expect("chunk")));
        }
    })
    .await
    .expect("the complete frames are forwarded");
    assert_eq!(
        received,
        vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")]
    );
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut socket, &mut buf),
    )
    .await
    .expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)));
    assert!(rx.try_recv().is_err(), "nothing after the oversized frame");
}

/// The clients' port is open to anyone, so connections are capped; a
/// connection over the cap is closed at once, and a slot frees when a client leaves or
/// stays silent past the idle timeout.
#[tokio::test]
async fn byzantine_connection_flood_is_capped_and_idle_clients_leave() {
    let (tx, mut rx) = mpsc::channel(16);
    let (address, _handle) = TxReceiver::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        64,
        2,
        Duration::from_millis(300),
        tx,
        Arc::default(),
    )
    .await
    .expect("bind");
    let mut clients = Vec::new();
    for i in 0..2u8 {
        let socket = TcpStream::connect(address).await.expect("connect");
        let mut client = FramedWrite::new(socket, codec(1024));
        client.send(Bytes::from(vec![i])).await.expect("send");
        let chunk = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("served in time");
        assert_eq!(chunk.as_ref().map(txs), Some(vec![Bytes::from(vec![i])]));
        clients.push(client);
    }
    // The third is closed without being served.
    let mut third = TcpStream::connect(address).await.expect("connect");
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut third, &mut buf),
    )
    .await
    .expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)));
    // The silent clients are closed after the idle timeout...
    for client in clients {
        let mut socket = client.into_inner();
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::io::AsyncReadExt::read(&mut socket, &mut buf),
        )
        .await
        .expect("idle client closed in time");
        assert!(matches!(read, Ok(0) | Err(_)));
    }
    // ...which frees their slots.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let socket = TcpStream::connect(address).await.expect("connect");
            let mut client = FramedWrite::new(socket, codec(1024));
            if client.send(Bytes::from_static(b"z")).await.is_ok() {
                if let Ok(Some(chunk)) =
                    tokio::time::timeout(Duration::from_millis(200), rx.recv()).await
                {
                    assert_eq!(txs(&chunk), vec![Bytes::from_static(b"z")]);
                    return;
                }
            }
        }
    })
    .await
    .expect("a new client is served once the idle ones left");
}

/// A batch maker that takes nothing (its backlog is full) must not make the port buffer
/// without bound: chunks wait within MAX_QUEUED_BYTES, the connection stops reading and the
/// client's writes block; once chunks are taken, every transaction arrives, in order.
#[tokio::test]
async fn an_idle_batch_maker_stops_the_port_reading() {
    let (tx, mut rx) = mpsc::channel(100_000);
    let tx_size = 1_000;
    let (address, _handle) = TxReceiver::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        tx_size,
        16,
        Duration::from_secs(60),
        tx,
        Arc::default(),
    )
    .await
    .expect("bind");
    // Four times the queue, more than the kernel's socket buffers on loopback can take too.
    let count = 4 * MAX_QUEUED_BYTES / tx_size;
    let client = tokio::spawn(async move {
        let socket = TcpStream::connect(address).await.expect("connect");
        let mut client = FramedWrite::new(socket, codec(2 * tx_size));
        for i in 0..count as u32 {
            let mut tx = vec![0u8; tx_size];
            tx[..4].copy_from_slice(&i.to_be_bytes());
            client.feed(Bytes::from(tx)).await.expect("feed");
        }
        SinkExt::<Bytes>::flush(&mut client).await.expect("flush");
    });
    // Wait until the queue is as full as it gets: less room left than one chunk needs.
    let queued = |rx: &mpsc::Receiver<TxChunk>| rx.len();
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = queued(&rx);
            if now > 0 && now == last {
                break;
            }
            last = now;
        }
    })
    .await
    .expect("the queue fills");
    let mut chunks = Vec::new();
    while let Ok(chunk) = rx.try_recv() {
        chunks.push(chunk);
    }
    let bytes: usize = chunks
        .iter()
        .flat_map(TxChunk::transactions)
        .map(<[u8]>::len)
        .sum();
    assert!(bytes <= MAX_QUEUED_BYTES, "{bytes} bytes queued");
    assert!(!client.is_finished(), "the client's writes never blocked");
    // Taking the chunks gives their room back: the rest arrives, in order.
    fn check(next: &mut u32, chunk: TxChunk) {
        for tx in chunk.transactions() {
            assert_eq!(tx[..4], next.to_be_bytes());
            *next += 1;
        }
    }
    let mut next = 0u32;
    for chunk in chunks {
        check(&mut next, chunk);
    }
    tokio::time::timeout(Duration::from_secs(60), async {
        while (next as usize) < count {
            check(&mut next, rx.recv().await.expect("chunk"));
        }
    })
    .await
    .expect("every transaction arrives once the queue drains");
    client.await.expect("client");
}

/// The node stops while its batch maker takes nothing: the client wrote several times what
/// the port queues and left. Draining reads every connection to its end: what the batch
/// maker got (received) and what was left in the connection (unread) are every transaction
/// written, each once. Whether the connection waits for room in the queue (bytes) or in the
/// channel (chunks).
#[tokio::test]
async fn a_drain_at_the_stop_counts_what_the_batch_maker_never_got() {
    for channel in [100_000, 1] {
        drain_counts_every_transaction(channel).await;
    }
}

async fn drain_counts_every_transaction(channel: usize) {
    let (tx, mut rx) = mpsc::channel(channel);
    let tx_size = 1_000;
    let metrics = Arc::new(MempoolMetrics::default());
    let (address, handle) = TxReceiver::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        tx_size,
        16,
        Duration::from_secs(60),
        tx,
        metrics.clone(),
    )
    .await
    .expect("bind");
    let count = 4 * MAX_QUEUED_BYTES / tx_size;
    let client = tokio::spawn(async move {
        let socket = TcpStream::connect(address).await.expect("connect");
        let mut client = FramedWrite::new(socket, codec(2 * tx_size));
        for _ in 0..count {
            client
                .feed(Bytes::from(vec![7u8; tx_size]))
                .await
                .expect("feed");
        }
        // Flushed and closed: the rest of what it wrote waits in the socket buffers.
        SinkExt::<Bytes>::close(&mut client).await.expect("close");
    });
    // The queue fills and the client's writes block: no more is read.
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = rx.len();
            if now > 0 && now == last {
                break;
            }
            last = now;
        }
    })
    .await
    .expect("the queue fills");
    assert!(!client.is_finished(), "the client's writes never blocked");
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    // The node stops: the drain unblocks the client by reading on, and counts the rest.
    assert!(
        handle.drain(Duration::from_secs(20)).await,
        "drained in time"
    );
    let (received, unread) = (load(&metrics.received_txs), load(&metrics.unread_txs));
    assert_eq!(received + unread, count as u64, "{received} + {unread}");
    assert!(unread > 0);
    client.await.expect("the client wrote everything");
    // Nothing was forwarded past the stop: what the batch maker holds is what was received.
    let mut forwarded = 0;
    while let Ok(chunk) = rx.try_recv() {
        forwarded += chunk.tx_count();
    }
    assert_eq!(forwarded, received);
}
