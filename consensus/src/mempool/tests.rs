//! Four mempools on loopback: one client's transactions end up in batches every node holds.

use super::batch::Batch;
use super::*;
use crate::config::Authority;
use crate::network::codec;
use bytes::Bytes;
use crypto::KeyPair;
use futures::SinkExt;
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
    store: crate::store::BatchStore,
    metrics: Arc<MempoolMetrics>,
    tx_consensus_messages: mpsc::Sender<ConsensusMempoolMessage>,
    digests: mpsc::Receiver<Digest>,
}

async fn spawn_committee(n: usize, parameters: &Parameters) -> (Committee, Vec<Node>) {
    let keys: Vec<_> = (0..n as u64).map(|i| KeyPair::from_seed(i).name).collect();
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
    for name in keys {
        let store = Store::new();
        let metrics = Arc::new(MempoolMetrics::default());
        let (tx_consensus_messages, rx_consensus) = mpsc::channel(16);
        let (tx_digests, digests) = mpsc::channel(1_000);
        Mempool::spawn(
            name,
            committee.clone(),
            parameters.clone(),
            store.clone(),
            rx_consensus,
            tx_digests,
            metrics.clone(),
            None,
        )
        .await
        .expect("mempool starts");
        nodes.push(Node {
            name,
            store: store.batches(),
            metrics,
            tx_consensus_messages,
            digests,
        });
    }
    (committee, nodes)
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
    let target = committee.authorities[&nodes[0].name].transactions_address;

    let socket = TcpStream::connect(target).await.expect("connect");
    let mut client = FramedWrite::new(socket, codec(MAX_TRANSACTION_SIZE));
    let total = 1_000;
    for i in 0..total {
        client.feed(transaction(i)).await.expect("feed");
    }
    SinkExt::<Bytes>::flush(&mut client).await.expect("flush");

    // Node 0 releases digests until its batches hold every transaction.
    let mut digests = Vec::new();
    let mut sealed = 0;
    timeout(DEADLINE, async {
        while sealed < total {
            let digest = nodes[0].digests.recv().await.expect("mempool alive");
            let bytes = nodes[0]
                .store
                .read(&digest)
                .expect("readable")
                .expect("own batch stored");
            sealed += Batch::parse(bytes).expect("valid").tx_count();
            digests.push(digest);
        }
    })
    .await
    .expect("every transaction sealed and acknowledged by a quorum");
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
    let stranger = KeyPair::from_seed(99).name;
    let result = Mempool::spawn(
        stranger,
        committee,
        Parameters::default(),
        Store::new(),
        rx,
        tx,
        Arc::new(MempoolMetrics::default()),
        None,
    )
    .await;
    assert!(matches!(result, Err(e) if e.kind() == io::ErrorKind::InvalidInput));
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
