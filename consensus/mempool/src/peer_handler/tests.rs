//! The mempool port: batches, batch requests and statements, over loopback connections.

use super::*;
use crate::attest::{CheckQueue, Sequences};
use crate::attester::AttesterInput;
use batch::{BatchBuilder, SampleIndex};
use crypto::{Digest, KeyPair};
use futures::StreamExt;
use network::{codec, Receiver, ReliableSender, DEFAULT_MAX_FRAME_SIZE};
use plumbing::budgeted::{self, BudgetedReceiver};
use plumbing::metered::ChannelMetrics;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

const DEADLINE: Duration = Duration::from_secs(10);

/// The helper's input as the node makes it: its capacity and two maximum frames.
fn helper_queue(
    budget: usize,
) -> (
    BudgetedSender<HelperRequest>,
    BudgetedReceiver<HelperRequest>,
    Arc<ChannelMetrics>,
) {
    budgeted::channel(1_000, budget)
}

/// A handler on an open port (no author yet) over a fresh store, handing requests to
/// `tx_helper`.
fn handler(tx_helper: BudgetedSender<HelperRequest>) -> PeerHandler {
    PeerHandler {
        store: store::Store::new().batches(),
        metrics: Arc::new(MempoolMetrics::default()),
        tx_helper,
        max_request_digests: 1_024,
        quota: AuthorQuota::new(1_000, 50),
        author: None,
        attesting: None,
        samples: None,
    }
}

async fn start() -> (
    SocketAddr,
    BatchStore,
    Arc<MempoolMetrics>,
    BudgetedReceiver<HelperRequest>,
) {
    let (address, store, metrics, rx_helper, _) =
        start_with_budget(2 * DEFAULT_MAX_FRAME_SIZE).await;
    (address, store, metrics, rx_helper)
}

async fn start_with_budget(
    budget: usize,
) -> (
    SocketAddr,
    BatchStore,
    Arc<MempoolMetrics>,
    BudgetedReceiver<HelperRequest>,
    Arc<ChannelMetrics>,
) {
    let (tx_helper, rx_helper, queue) = helper_queue(budget);
    let handler = handler(tx_helper);
    let (store, metrics) = (handler.store.clone(), handler.metrics.clone());
    (serve(handler).await, store, metrics, rx_helper, queue)
}

/// `handler` on a loopback port; returns its address.
async fn serve(handler: PeerHandler) -> SocketAddr {
    let (address, _) = Receiver::spawn(
        "127.0.0.1:0".parse().expect("addr"),
        DEFAULT_MAX_FRAME_SIZE,
        handler,
    )
    .await
    .expect("bind");
    address
}

/// Sends the handler at `address` a batch of `txs` and waits for its ack; returns the batch.
async fn send_acked_batch(address: SocketAddr, txs: &[&[u8]]) -> Batch {
    let mut builder = BatchBuilder::with_frame_prefix(&[super::super::message::BATCH_TAG], 64);
    for tx in txs {
        builder.push(tx);
    }
    let (batch, frame) = builder.seal_framed(1, 64);
    let mut sender = ReliableSender::new();
    let ack = sender.send(address, frame).await;
    let ack = tokio::time::timeout(DEADLINE, ack)
        .await
        .expect("acked in time")
        .expect("acked");
    assert_eq!(&ack[..], ACK);
    batch
}

/// Connects to the handler at `address` and sends it a request for `digests` on behalf of
/// `requestor`; returns the open connection.
async fn send_request(
    address: SocketAddr,
    digests: &[Digest],
    requestor: PublicKey,
) -> Framed<TcpStream, LengthDelimitedCodec> {
    let stream = TcpStream::connect(address).await.expect("connect");
    let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
    client
        .send(MempoolMessage::encode_request(digests, &requestor))
        .await
        .expect("send");
    client
}

async fn assert_closed(mut stream: TcpStream) {
    let mut buf = [0u8; 16];
    loop {
        match tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("closed in time")
        {
            Ok(0) | Err(_) => return,
            Ok(_) => continue,
        }
    }
}

#[tokio::test]
async fn stores_and_acks_a_valid_batch() {
    let (address, store, metrics, _rx) = start().await;
    let batch = send_acked_batch(address, &[b"tx"]).await;
    assert_eq!(
        store.read(&batch.digest()).expect("read").as_ref(),
        Some(batch.bytes())
    );
    assert_eq!(metrics.received_batches.load(Ordering::Relaxed), 1);
    assert_eq!(metrics.rejected_frames.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_stored_batch_has_its_samples_noted_for_the_commit() {
    let index = SampleIndex::default();
    let (tx_helper, _rx_helper, _) = helper_queue(2 * DEFAULT_MAX_FRAME_SIZE);
    let handler = PeerHandler {
        samples: Some(SampleHooks {
            detect: Arc::new(|tx: &[u8]| {
                let id = tx.strip_prefix(b"sample ")?;
                Some(String::from_utf8_lossy(id).into_owned())
            }),
            report: Arc::new(|_, _, _| {}),
            index: Some(index.clone()),
        }),
        ..handler(tx_helper)
    };
    let address = serve(handler).await;
    let batch = send_acked_batch(address, &[b"tx", b"sample 9"]).await;
    assert_eq!(index.take(&batch.digest()), Some(vec!["9".to_string()]));
}

#[tokio::test]
async fn rejects_malformed_messages_and_closes_the_connection() {
    let (address, store, metrics, _rx) = start().await;
    let malformed: [&'static [u8]; 3] = [
        &[0, 1, 2, 3],    // a batch shorter than its header
        &[1, 0xff, 0xff], // an undecodable batch request
        &[7],             // an unknown tag
    ];
    for (i, frame) in malformed.into_iter().enumerate() {
        let stream = TcpStream::connect(address).await.expect("connect");
        let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
        client.send(Bytes::from_static(frame)).await.expect("send");
        assert!(
            tokio::time::timeout(DEADLINE, client.next())
                .await
                .expect("answered in time")
                .is_none_or(|reply| reply.is_err()),
            "no ack for a malformed message"
        );
        assert_closed(client.into_inner()).await;
        assert_eq!(
            metrics.rejected_frames.load(Ordering::Relaxed),
            i as u64 + 1
        );
    }
    assert!(store.is_empty());
    assert_eq!(metrics.received_batches.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn passes_batch_requests_to_the_helper() {
    let (address, _store, _metrics, mut rx) = start().await;
    let digests = vec![Digest::of(b"wanted")];
    let requestor = KeyPair::from_seed(3).name;
    let client = send_request(address, &digests, requestor).await;
    let got = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("in time");
    assert_eq!(got, Some((digests, requestor)));
    drop(client);
}

/// A request may name at most `max_request_digests` digests (a reply is a
/// batch per digest); a longer one is refused, counted and closes the connection.
#[tokio::test]
async fn byzantine_request_over_the_digest_cap_is_refused() {
    let (address, _store, metrics, mut rx) = start().await;
    let digests = vec![Digest::of(b"wanted"); 1_025];
    let requestor = KeyPair::from_seed(3).name;
    let client = send_request(address, &digests, requestor).await;
    assert_closed(client.into_inner()).await;
    assert_eq!(metrics.rejected_frames.load(Ordering::Relaxed), 1);
    assert!(rx.try_recv().is_none(), "the request reached the helper");
}

/// A member sends batch requests faster than the helper takes them (here it takes none).
/// Counted in messages, up to `channel_capacity` (1,000) requests of 32 KB waited; now they
/// wait within the queue's byte budget, the connection is not read meanwhile, and once the
/// helper takes them every request arrives, in order: back-pressure, nothing dropped.
#[tokio::test]
async fn byzantine_batch_requests_wait_within_the_helper_budget() {
    let requestor = KeyPair::from_seed(3).name;
    let request = move |i: u32| {
        let digests: Vec<Digest> = (0..1_024u32)
            .map(|d| Digest::of(&[i.to_le_bytes(), d.to_le_bytes()].concat()))
            .collect();
        MempoolMessage::encode_request(&digests, &requestor)
    };
    let size = request(0).len();
    let budget = 3 * size;
    let (address, _store, _metrics, mut rx, queue) = start_with_budget(budget).await;
    let stream = TcpStream::connect(address).await.expect("connect");
    let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
    let count = 20;
    let writer = tokio::spawn(async move {
        for i in 0..count {
            client.send(request(i)).await.expect("send");
        }
        client
    });
    // The handler waits for room once three requests are queued.
    tokio::time::timeout(DEADLINE, async {
        while queue.full() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the helper's queue fills");
    assert_eq!(rx.len(), 3, "requests queued beyond the byte budget");
    let seen = queue.snapshot();
    assert_eq!(seen.budget_bytes, budget as u64);
    for i in 0..count {
        let (digests, from) = tokio::time::timeout(DEADLINE, rx.recv())
            .await
            .expect("in time")
            .expect("the handler is alive");
        assert_eq!(from, requestor);
        assert_eq!(MempoolMessage::encode_request(&digests, &from), request(i));
    }
    let _client = writer.await.expect("every request was written");
}

/// A member may ask for batches for itself only: replies go to the named requestor, so a
/// request naming another member would aim the replies at it.
#[tokio::test]
async fn byzantine_request_on_behalf_of_another_member_is_refused() {
    use network::handshake::{self, Credentials, Gate, Purpose};
    use network::ReceiverConfig;
    let members: Vec<_> = (0..3).map(KeyPair::from_seed).collect();
    let (tx_helper, mut rx, _) = helper_queue(2 * DEFAULT_MAX_FRAME_SIZE);
    let handler = handler(tx_helper);
    let metrics = handler.metrics.clone();
    let gate = Gate::new(
        members[0].name,
        Purpose::Mempool,
        members.iter().map(|k| k.name),
    );
    let (address, _) = Receiver::spawn_with(
        "127.0.0.1:0".parse().expect("addr"),
        ReceiverConfig::gated(DEFAULT_MAX_FRAME_SIZE, gate),
        handler,
    )
    .await
    .expect("bind");
    let credentials =
        Credentials::new(members[1].name, members[1].secret.clone(), Purpose::Mempool);
    let digests = vec![Digest::of(b"wanted")];
    for (requestor, honest) in [(members[1].name, true), (members[2].name, false)] {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        handshake::dial(&mut stream, &credentials, &members[0].name)
            .await
            .expect("member");
        let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
        client
            .send(MempoolMessage::encode_request(&digests, &requestor))
            .await
            .expect("send");
        if honest {
            let got = tokio::time::timeout(DEADLINE, rx.recv())
                .await
                .expect("in time");
            assert_eq!(got, Some((digests.clone(), requestor)));
        } else {
            assert_closed(client.into_inner()).await;
            assert_eq!(metrics.rejected_frames.load(Ordering::Relaxed), 1);
            assert!(rx.try_recv().is_none());
        }
    }
}

/// A handler of member 0 of a committee of four, attesting, on a gated loopback port, its
/// attester's queue, and the members' keys.
struct Attesting {
    address: SocketAddr,
    members: Vec<KeyPair>,
    rx_attester: BudgetedReceiver<AttesterInput>,
    quota: AuthorQuota,
    metrics: Arc<MempoolMetrics>,
}

async fn attesting_handler(quota: AuthorQuota) -> Attesting {
    use config::{Authority, Committee};
    use network::handshake::{Gate, Purpose};
    use network::ReceiverConfig;
    let members: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
    let address = "127.0.0.1:1".parse().expect("address");
    let authorities = members
        .iter()
        .map(|k| {
            let authority = Authority {
                stake: 1,
                consensus_address: address,
                mempool_address: address,
                transactions_address: address,
            };
            (k.name, authority)
        })
        .collect();
    let committee = Committee { authorities };
    let me = members[0].name;
    let (tx_helper, _, _) = helper_queue(2 * DEFAULT_MAX_FRAME_SIZE);
    let (tx_attester, rx_attester, _) = budgeted::channel(1_000, 2 * DEFAULT_MAX_FRAME_SIZE);
    let handler = PeerHandler {
        quota: quota.clone(),
        attesting: Some(PeerAttesting {
            table: Attestations::new(me, committee.clone(), Default::default()),
            tx_attester,
            queue: CheckQueue::new(u64::MAX),
            sequences: Sequences::new(&committee),
        }),
        ..handler(tx_helper)
    };
    let metrics = handler.metrics.clone();
    let gate = Gate::new(me, Purpose::Mempool, members.iter().map(|k| k.name));
    let (address, _) = Receiver::spawn_with(
        "127.0.0.1:0".parse().expect("addr"),
        ReceiverConfig::gated(DEFAULT_MAX_FRAME_SIZE, gate),
        handler,
    )
    .await
    .expect("bind");
    Attesting {
        address,
        members,
        rx_attester,
        quota,
        metrics,
    }
}

impl Attesting {
    fn committee(&self) -> config::Committee {
        let address = "127.0.0.1:1".parse().expect("address");
        let authorities = self
            .members
            .iter()
            .map(|k| {
                let authority = config::Authority {
                    stake: 1,
                    consensus_address: address,
                    mempool_address: address,
                    transactions_address: address,
                };
                (k.name, authority)
            })
            .collect();
        config::Committee { authorities }
    }

    /// Member `from` sends `frame` (made of `batch`); waits for the reply.
    async fn send(&self, from: usize, frame: Bytes) -> Bytes {
        use network::handshake::{Credentials, Purpose};
        let member = &self.members[from];
        let mut network = ReliableSender::authenticated(
            16,
            DEFAULT_MAX_FRAME_SIZE,
            Credentials::new(member.name, member.secret.clone(), Purpose::Mempool)
                .dialling([(self.address, self.members[0].name)]),
        );
        tokio::time::timeout(DEADLINE, network.send(self.address, frame).await)
            .await
            .expect("a reply in time")
            .expect("a reply")
    }
}

fn one_batch(i: u32, size: usize) -> Batch {
    let mut builder = BatchBuilder::with_capacity(size + 16);
    let mut tx = i.to_le_bytes().to_vec();
    tx.resize(size, 7);
    builder.push(&tx);
    builder.seal(1, size + 16)
}

/// A batch fetched by a batch request arrives from whoever answered, not from its author: it
/// was attested under the responder's name when the responder's key named this node. Now a
/// batch is attested only when its author sends it, with its number (`Authored`): a plain
/// batch (a reply) is stored and acknowledged, never attested.
#[tokio::test]
async fn byzantine_a_fetched_batch_is_not_attested_under_the_responders_name() {
    let mut node = attesting_handler(AuthorQuota::new(1_000, 50)).await;
    let committee = node.committee();
    let (me, responder) = (node.members[0].name, node.members[1].name);
    let seq = (0u64..)
        .find(|seq| crate::attest::attesters(&committee, &responder, *seq).contains(&me))
        .expect("a number naming us");
    let reply = one_batch(1, 100);
    let frame = MempoolMessage::encode_batch(reply.bytes());
    assert_eq!(&node.send(1, frame).await[..], ACK);
    assert!(
        node.rx_attester.try_recv().is_none(),
        "a reply was attested"
    );
    // The same member's own batches, numbered in turn up to one that names us: that one is.
    let mut own = None;
    for number in 0..=seq {
        let batch = one_batch(2 + number as u32, 100);
        let frame = MempoolMessage::encode_authored(number, batch.bytes());
        assert_eq!(&node.send(1, frame).await[..], ACK);
        own = Some(batch);
    }
    let queued = node
        .rx_attester
        .try_recv()
        .expect("its own batch is attested");
    assert_eq!((queued.author, queued.seq), (responder, seq));
    assert_eq!(Some(queued.batch.digest()), own.map(|b| b.digest()));
    assert!(node.rx_attester.try_recv().is_none());
}

/// An author whose batches never commit made each attester check its share of as many as the
/// batch quota lets it store, again every `gc_depth` rounds. Now what a node checks of one
/// author's uncommitted batches is bounded in bytes; the rest are stored and acknowledged, and
/// checked by every node if they ever commit. Commits free room again.
#[tokio::test]
async fn byzantine_attesting_work_per_author_is_bounded_by_its_uncommitted_bytes() {
    let size = 1_000;
    let budget = 3 * (size as u64 + 64);
    let mut node = attesting_handler(AuthorQuota::new(1_000, 50).attesting(budget)).await;
    let committee = node.committee();
    let me = node.members[0].name;
    let author = node.members[1].name;
    let mut named = Vec::new();
    for seq in 0u64..30 {
        let batch = one_batch(seq as u32, size);
        let frame = MempoolMessage::encode_authored(seq, batch.bytes());
        assert_eq!(&node.send(1, frame).await[..], ACK, "stored all the same");
        if crate::attest::attesters(&committee, &author, seq).contains(&me) {
            named.push(batch.digest());
        }
    }
    assert_eq!(
        named.len(),
        10,
        "batches of member 1 that name member 0, in turn"
    );
    let mut attested = Vec::new();
    while let Some(input) = node.rx_attester.try_recv() {
        attested.push(input.batch.digest());
    }
    assert_eq!(
        attested,
        named[..3].to_vec(),
        "three batches fill its bytes"
    );
    assert_eq!(node.metrics.attesting_refused.load(Ordering::Relaxed), 7);
    // Two commit: two more of its batches are checked.
    node.quota.committed(&attested[..2], 1);
    for seq in 30u64..36 {
        let batch = one_batch(seq as u32, size);
        let frame = MempoolMessage::encode_authored(seq, batch.bytes());
        node.send(1, frame).await;
    }
    let mut more = 0;
    while node.rx_attester.try_recv().is_some() {
        more += 1;
    }
    assert_eq!(more, 2);
}
