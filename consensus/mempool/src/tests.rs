//! Four mempools on loopback: one client's transactions end up in batches every node holds.

use super::*;
use batch::Batch;
use bytes::Bytes;
use config::Authority;
use crypto::KeyPair;
use futures::SinkExt;
use network::codec;
use network::handshake::{Credentials, Purpose};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_util::codec::FramedWrite;

const DEADLINE: Duration = Duration::from_secs(30);

/// Free loopback ports: bound to port 0 to get them, released for the mempools to bind.
fn free_addresses(n: usize) -> Vec<SocketAddr> {
    let listeners: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("address"))
        .collect()
}

struct Node {
    name: PublicKey,
    store: store::BatchStore,
    metrics: Arc<MempoolMetrics>,
    tx_consensus_messages: mpsc::Sender<ConsensusMempoolMessage>,
    digests: mpsc::Receiver<Digest>,
    quota: AuthorQuota,
    /// The statements it holds, when it attests.
    table: Option<attest::Attestations>,
    /// The batches it sealed from checked transactions, when it checks its clients'.
    checked: Option<CheckedBatches>,
}

async fn spawn_committee(n: usize, parameters: &Parameters) -> (Committee, Vec<Node>) {
    spawn_attesting_committee(n, parameters, None).await
}

/// A committee whose members attest batches (`--verify=attested`), member i with `members[i]`:
/// its check, and how it behaves as an attester.
async fn spawn_attesting_committee(
    n: usize,
    parameters: &Parameters,
    members: Option<Vec<(Arc<attest::CheckBatch>, attest::Conduct)>>,
) -> (Committee, Vec<Node>) {
    spawn_checking_committee(n, parameters, members, None).await
}

/// As [`spawn_attesting_committee`], every member checking its clients' transactions with
/// `ingress` before it seals them.
async fn spawn_checking_committee(
    n: usize,
    parameters: &Parameters,
    members: Option<Vec<(Arc<attest::CheckBatch>, attest::Conduct)>>,
    ingress: Option<Arc<CheckTransactions>>,
) -> (Committee, Vec<Node>) {
    let pairs: Vec<_> = (0..n as u64).map(KeyPair::from_seed).collect();
    let keys: Vec<_> = pairs.iter().map(|k| k.name).collect();
    let addresses = free_addresses(3 * n);
    let authorities: BTreeMap<_, _> = keys
        .iter()
        .zip(addresses.chunks(3))
        .map(|(name, a)| {
            let authority = Authority {
                stake: 1,
                consensus_address: a[0],
                mempool_address: a[1],
                transactions_address: a[2],
            };
            (*name, authority)
        })
        .collect();
    let committee = Committee { authorities };
    let mut nodes = Vec::new();
    for (i, pair) in pairs.into_iter().enumerate() {
        let name = pair.name;
        let attesting = members.as_ref().map(|members| attest::Attesting {
            check: members[i].0.clone(),
            table: attest::Attestations::new(name, committee.clone(), attest_limits(parameters)),
            conduct: members[i].1,
        });
        let table = attesting.as_ref().map(|a| a.table.clone());
        let ingress = ingress.as_ref().map(|check| Ingress {
            check: check.clone(),
            checked: CheckedBatches::default(),
        });
        let checked = ingress.as_ref().map(|i| i.checked.clone());
        let store = Store::new();
        let metrics = Arc::new(MempoolMetrics::default());
        let (tx_consensus_messages, rx_consensus) = mpsc::channel(16);
        let (tx_digests, digests) = mpsc::channel(1_000);
        let handle = Mempool::spawn(
            name,
            pair.secret,
            committee.clone(),
            parameters.clone(),
            store.clone(),
            rx_consensus,
            tx_digests,
            metrics.clone(),
            None,
            None,
            attesting,
            ingress,
        )
        .await
        .expect("mempool starts");
        nodes.push(Node {
            name,
            store: store.batches(),
            metrics,
            tx_consensus_messages,
            digests,
            quota: handle.quota,
            table,
            checked,
        });
    }
    (committee, nodes)
}

/// A client writes `txs` to node 0's transactions port.
async fn send_to_first(committee: &Committee, nodes: &[Node], txs: impl Iterator<Item = Bytes>) {
    let target = committee.authorities[&nodes[0].name].transactions_address;
    let socket = TcpStream::connect(target).await.expect("connect");
    let mut client = FramedWrite::new(socket, codec(MAX_TRANSACTION_SIZE));
    for tx in txs {
        client.feed(tx).await.expect("feed");
    }
    SinkExt::<Bytes>::flush(&mut client).await.expect("flush");
}

/// The batches `node` hands consensus, in order, until they hold `total` transactions.
async fn released(node: &mut Node, total: u32) -> Vec<Batch> {
    let mut batches = Vec::new();
    let mut sealed = 0;
    timeout(DEADLINE, async {
        while sealed < total {
            let digest = node.digests.recv().await.expect("mempool alive");
            let bytes = node
                .store
                .read(&digest)
                .expect("readable")
                .expect("own batch stored");
            let batch = Batch::parse(bytes).expect("valid");
            sealed += batch.tx_count();
            batches.push(batch);
        }
    })
    .await
    .expect("every transaction sealed and acknowledged by a quorum");
    batches
}

fn transaction(i: u32) -> Bytes {
    let mut tx = i.to_be_bytes().to_vec();
    tx.resize(100, 1);
    Bytes::from(tx)
}

#[tokio::test]
async fn one_client_four_mempools() {
    let parameters = Parameters {
        batch_size: 10_000,
        max_batch_delay: 50,
        sync_retry_delay: 500,
        ..Parameters::default()
    };
    let (committee, mut nodes) = spawn_committee(4, &parameters).await;
    let total = 1_000;
    send_to_first(&committee, &nodes, (0..total).map(transaction)).await;

    // Node 0 releases digests until its batches hold every transaction.
    let batches = released(&mut nodes[0], total).await;
    let digests: Vec<Digest> = batches.iter().map(Batch::digest).collect();
    let sealed: u32 = batches.iter().map(Batch::tx_count).sum();
    assert_eq!(sealed, total);
    assert!(
        digests.len() > 1,
        "10 KB batches: 100 KB of transactions span several"
    );
    assert_eq!(
        nodes[0].metrics.sealed_txs.load(Ordering::Relaxed),
        u64::from(total)
    );

    // As the core would on seeing node 0's blocks: the others fetch what the broadcast did not
    // bring them (a quorum needed only two of the three peers).
    let author = nodes[0].name;
    for node in &nodes[1..] {
        node.tx_consensus_messages
            .send(ConsensusMempoolMessage::Synchronize(
                digests.clone(),
                author,
                1,
            ))
            .await
            .expect("synchronizer alive");
    }
    let mut received = BTreeSet::new();
    for node in &nodes {
        timeout(DEADLINE, async {
            for digest in &digests {
                let bytes = node.store.notify_read(*digest).await.expect("stored");
                let batch = Batch::parse(bytes).expect("valid");
                received.extend(batch.transactions());
            }
        })
        .await
        .expect("every node holds every batch");
    }
    let expected: BTreeSet<_> = (0..total).map(transaction).collect();
    assert_eq!(received, expected);

    // Each batch reached a quorum: at least two peers got it from the broadcast itself.
    let direct: u64 = nodes[1..]
        .iter()
        .map(|n| n.metrics.received_batches.load(Ordering::Relaxed))
        .sum();
    assert!(direct >= 2 * digests.len() as u64);
    // Only node 0 had clients.
    for node in &mut nodes[1..] {
        assert!(node.digests.try_recv().is_err());
    }
}

#[tokio::test]
async fn refuses_to_start_for_a_stranger() {
    let (committee, _nodes) = spawn_committee(1, &Parameters::default()).await;
    let (_tx, rx) = mpsc::channel(1);
    let (tx, _rx) = mpsc::channel(1);
    let stranger = KeyPair::from_seed(99);
    let result = Mempool::spawn(
        stranger.name,
        stranger.secret,
        committee,
        Parameters::default(),
        Store::new(),
        rx,
        tx,
        Arc::new(MempoolMetrics::default()),
        None,
        None,
        None,
        None,
    )
    .await;
    assert!(matches!(result, Err(e) if e.kind() == io::ErrorKind::InvalidInput));
}

/// A member may have at most `max_uncommitted_batches_per_author` batches
/// stored and uncommitted on a node; more are refused (a reply that is not an ack, counted) until
/// some commit. Node 1's key plays the Byzantine member against node 0's mempool port.
#[tokio::test]
async fn byzantine_member_over_its_uncommitted_quota_is_refused() {
    let parameters = Parameters {
        max_uncommitted_batches_per_author: 3,
        ..Parameters::default()
    };
    let (committee, nodes) = spawn_committee(2, &parameters).await;
    let target = committee.authorities[&nodes[0].name].mempool_address;
    let byzantine = KeyPair::from_seed(1);
    let mut network = ReliableSender::authenticated(
        16,
        parameters.max_frame_size,
        Credentials::for_committee(
            byzantine.name,
            byzantine.secret,
            Purpose::Mempool,
            &committee,
        ),
    );
    let mut next = 0u32;
    let mut send = |network: &mut ReliableSender| {
        next += 1;
        let mut builder = batch::BatchBuilder::with_capacity(256);
        builder.push(&transaction(1_000 + next));
        let batch = builder.seal(1, 256);
        let frame = MempoolMessage::encode_batch(batch.bytes());
        let mut network = network.clone();
        async move {
            let reply = timeout(DEADLINE, network.send(target, frame).await)
                .await
                .expect("a reply in time")
                .expect("a reply");
            (batch.digest(), &reply[..] == message::ACK)
        }
    };
    let mut sent = Vec::new();
    for _ in 0..5 {
        sent.push(send(&mut network).await);
    }
    let acked: Vec<bool> = sent.iter().map(|(_, acked)| *acked).collect();
    assert_eq!(acked, [true, true, true, false, false]);
    assert_eq!(nodes[0].metrics.refused_batches.load(Ordering::Relaxed), 2);
    assert!(nodes[0].store.contains(&sent[2].0).expect("read"));
    assert!(!nodes[0].store.contains(&sent[3].0).expect("read"));

    // Two of the stored batches commit (the consensus core tells the quota): room for two
    // more.
    let committed = vec![sent[0].0, sent[1].0];
    nodes[0].quota.committed(&committed, 1);
    timeout(DEADLINE, async { while !send(&mut network).await.1 {} })
        .await
        .expect("a batch is taken again after commits");
}

#[test]
fn transactions_fit_in_a_frame_with_their_batch() {
    let defaults = Parameters::default();
    assert_eq!(max_transaction_size(&defaults), MAX_TRANSACTION_SIZE);
    let tight = Parameters {
        batch_size: 1_000,
        max_frame_size: 2_000,
        ..Parameters::default()
    };
    let max = max_transaction_size(&tight);
    assert!(1 + HEADER_LEN + tight.batch_size + TX_PREFIX_LEN + max <= tight.max_frame_size);
}

mod attested;
mod ingress;
