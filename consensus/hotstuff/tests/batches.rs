//! Batch availability against hostile leaders and lagging nodes:
//! real nodes on loopback ports, a Byzantine stand-in that signs with a committee key and speaks
//! the real wire format, and a test-only TCP proxy that partitions one node.

mod common;

use batch::BatchBuilder;
use bytes::Bytes;
use common::*;
use config::Authority;
use config::{Committee, Parameters, Round};
use crypto::{Digest, Hash, KeyPair, PublicKey, Signature, SignatureService};
use futures::SinkExt;
use hotstuff::wire;
use hotstuff::{Block, ConsensusMessage, Vote, QC};
use mempool::MempoolMessage;
use network::handshake::{Credentials, Gate, Purpose};
use network::{
    CancelHandler, HandlerError, MessageHandler, Receiver, ReceiverConfig, ReliableSender, Writer,
    DEFAULT_RELIABLE_CAPACITY,
};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(300 + i)).collect()
}

fn transactions_address(committee: &Committee, name: &PublicKey) -> SocketAddr {
    committee
        .authority(name)
        .expect("member")
        .transactions_address
}

fn assert_no_batch_twice(node: usize, sequence: &[Digest]) {
    let mut seen = HashSet::new();
    for digest in sequence {
        assert!(
            seen.insert(*digest),
            "node {node} committed batch {digest} twice"
        );
    }
}

// ---- the Byzantine stand-in -------------------------------------------------------------------

/// Acknowledges every consensus frame (the honest senders are reliable senders and count acks)
/// and forwards what decodes to the stand-in's loop.
#[derive(Clone)]
struct ConsensusPort {
    tx: mpsc::UnboundedSender<ConsensusMessage>,
}

impl MessageHandler for ConsensusPort {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        writer.send(Bytes::from_static(b"Ack")).await?;
        if let Ok(message) = wire::decode(&message) {
            let _ = self.tx.send(message);
        }
        Ok(())
    }
}

/// Acknowledges batches (so honest quorum waiters count the stand-in) and withholds everything:
/// batch requests go unanswered.
#[derive(Clone)]
struct MempoolPort;

impl MessageHandler for MempoolPort {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        if let Ok(MempoolMessage::Batch(_)) = MempoolMessage::decode(message) {
            writer.send(Bytes::from_static(b"Ack")).await?;
        }
        Ok(())
    }
}

enum Attack {
    /// Sign a block for an old round of ours, show it to two honest nodes (they store
    /// it, then see the round is old), then propose a block whose payload names that block.
    BlockAsBatch { held: Option<QC> },
    /// Propose a batch committed a few rounds ago, then a fresh batch twice in one block.
    Repropose {
        committed: Arc<Mutex<Vec<Digest>>>,
        fresh: Digest,
        step: usize,
    },
}

/// A committee member run by the test. It aggregates the votes sent to it as the next leader
/// into QCs (the honest votes are real, so the QCs verify) and, once armed, uses its leader
/// rounds for the attack; otherwise it stays silent and its rounds end by timeout.
struct StandIn {
    armed: Arc<AtomicBool>,
    attacks: Arc<AtomicUsize>,
    _actor: Background,
}

struct StandInLoop {
    keys: KeyPair,
    committee: Committee,
    service: SignatureService,
    network: ReliableSender,
    honest: Vec<PublicKey>,
    attack: Attack,
    armed: Arc<AtomicBool>,
    attacks: Arc<AtomicUsize>,
    votes: HashMap<(Digest, Round), Vec<(PublicKey, Signature)>>,
    /// A reliable sender cancels a message whose handler is dropped: keep them all (the
    /// stand-in sends a handful of messages).
    handlers: Vec<CancelHandler>,
}

impl StandIn {
    fn spawn(keys: KeyPair, committee: Committee, attack: Attack) -> Self {
        let armed = Arc::new(AtomicBool::new(false));
        let attacks = Arc::new(AtomicUsize::new(0));
        let actor = Background::spawn("the stand-in", {
            let (armed, attacks) = (armed.clone(), attacks.clone());
            move |ready| async move {
                let me = committee.authority(&keys.name).expect("member").clone();
                let (tx, mut rx) = mpsc::unbounded_channel();
                // Honest nodes prove their keys on connect: the stand-in's ports take part in
                // the handshake as any member's do.
                let members: Vec<PublicKey> = committee.authorities.keys().copied().collect();
                let name = keys.name;
                let gated = |purpose| {
                    ReceiverConfig::gated(1 << 23, Gate::new(name, purpose, members.clone()))
                };
                Receiver::spawn_with(
                    me.consensus_address,
                    gated(Purpose::Consensus),
                    ConsensusPort { tx },
                )
                .await
                .expect("consensus port");
                Receiver::spawn_with(me.mempool_address, gated(Purpose::Mempool), MempoolPort)
                    .await
                    .expect("mempool port");
                let honest = committee
                    .authorities
                    .keys()
                    .filter(|k| **k != keys.name)
                    .copied()
                    .collect();
                let network = ReliableSender::authenticated(
                    DEFAULT_RELIABLE_CAPACITY,
                    1 << 23,
                    Credentials::for_committee(
                        keys.name,
                        keys.secret.clone(),
                        Purpose::Consensus,
                        &committee,
                    ),
                );
                let mut actor = StandInLoop {
                    service: SignatureService::new(keys.secret.clone()),
                    keys,
                    committee,
                    network,
                    honest,
                    attack,
                    armed,
                    attacks,
                    votes: HashMap::new(),
                    handlers: Vec::new(),
                };
                ready.send(()).expect("test waits");
                while let Some(message) = rx.recv().await {
                    actor.handle(message).await;
                }
            }
        });
        StandIn {
            armed,
            attacks,
            _actor: actor,
        }
    }

    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn attacks(&self) -> usize {
        self.attacks.load(Ordering::SeqCst)
    }
}

impl StandInLoop {
    async fn handle(&mut self, message: ConsensusMessage) {
        let ConsensusMessage::Vote(vote) = message else {
            return;
        };
        if self.committee.leader(vote.round + 1) != self.keys.name {
            return;
        }
        let signers = self.votes.entry((vote.hash, vote.round)).or_default();
        if signers.iter().any(|(name, _)| *name == vote.author) {
            return;
        }
        signers.push((vote.author, vote.signature));
        let stake = signers
            .iter()
            .map(|(n, _)| self.committee.stake(n))
            .sum::<u32>();
        if stake != self.committee.quorum_threshold() {
            return;
        }
        let qc = QC {
            hash: vote.hash,
            round: vote.round,
            votes: signers.clone(),
        };
        if self.armed.load(Ordering::SeqCst) {
            self.lead(qc).await;
        }
    }

    async fn send(&mut self, to: &[PublicKey], message: &ConsensusMessage) {
        let bytes = wire::encode(message).expect("encode");
        for name in to {
            let address = self
                .committee
                .authority(name)
                .expect("member")
                .consensus_address;
            let handler = self.network.send(address, bytes.clone()).await;
            self.handlers.push(handler);
        }
    }

    async fn block(&self, qc: QC, round: Round, payload: Vec<Digest>) -> Block {
        Block::new(qc, None, self.keys.name, round, payload, &self.service).await
    }

    /// Proposes `block` to every honest node and votes for it (to the next leader), so the
    /// block needs only two honest votes to be certified.
    async fn propose(&mut self, block: Block) {
        let honest = self.honest.clone();
        self.send(&honest, &ConsensusMessage::Propose(block.clone()))
            .await;
        let vote = Vote::new(&block, self.keys.name, &self.service).await;
        let next = self.committee.leader(block.round + 1);
        self.send(&[next], &ConsensusMessage::Vote(vote)).await;
        self.attacks.fetch_add(1, Ordering::SeqCst);
    }

    async fn lead(&mut self, qc: QC) {
        let round = qc.round + 1;
        match &mut self.attack {
            Attack::BlockAsBatch { held } => match held.take() {
                // Our first round as leader once armed: stay silent, keep the QC.
                None if self.attacks.load(Ordering::SeqCst) == 0 => *held = Some(qc),
                None => {}
                Some(old_qc) => {
                    // A block for the round we let pass: valid signature, valid QC, an old round.
                    let old = self.block(old_qc.clone(), old_qc.round + 1, vec![]).await;
                    let digest = old.digest();
                    let some = self.honest[..2].to_vec();
                    self.send(&some, &ConsensusMessage::Propose(old)).await;
                    let block = self.block(qc, round, vec![digest]).await;
                    self.propose(block).await;
                }
            },
            Attack::Repropose {
                committed,
                fresh,
                step,
            } => {
                let payload = match *step {
                    0 => match committed.lock().expect("lock").last() {
                        Some(digest) => vec![*digest],
                        None => return,
                    },
                    1 => vec![*fresh, *fresh],
                    _ => return,
                };
                *step += 1;
                let block = self.block(qc, round, payload).await;
                self.propose(block).await;
            }
        }
    }
}

/// Seals one batch and hands it to every honest mempool; returns its digest once all acked.
fn seal_and_spread(committee: &Committee, stand_in: &KeyPair) -> Digest {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut builder = BatchBuilder::with_capacity(256);
        builder.push(b"a transaction only the stand-in ever sealed");
        let batch = builder.seal(1, 256);
        let frame = MempoolMessage::encode_batch(batch.bytes());
        let mut network = ReliableSender::authenticated(
            DEFAULT_RELIABLE_CAPACITY,
            1 << 23,
            Credentials::for_committee(
                stand_in.name,
                stand_in.secret.clone(),
                Purpose::Mempool,
                committee,
            ),
        );
        let addresses = committee.others(&stand_in.name, |a| a.mempool_address);
        for (_, address) in addresses {
            let ack = network.send(address, frame.clone()).await;
            tokio::time::timeout(Duration::from_secs(30), ack)
                .await
                .expect("acked in time")
                .expect("acked");
        }
        batch.digest()
    })
}

/// Three honest nodes under load and a stand-in for the fourth member.
fn honest_nodes(keys: &[KeyPair], committee: &Committee) -> (Vec<TestNode>, Vec<Load>) {
    let nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), test_parameters()))
        .collect();
    let loads = keys
        .iter()
        .map(|k| Load::start(transactions_address(committee, &k.name), 1_000, 200))
        .collect();
    (nodes, loads)
}

/// A block digest in a payload must not count as an available batch, and peers must
/// never serve block bytes as a batch. Before the fix the two nodes that stored the old block
/// vote, the third waits forever for a "batch" peers serve as block bytes, and with the stand-in
/// voting no further QC can form: the committee stalls.
#[test]
fn byzantine_block_digest_named_as_a_batch_does_not_stall() {
    let keys = keys(4);
    let committee = committee(&keys);
    let byzantine = keys[3].clone();
    let (nodes, _loads) = honest_nodes(&keys[..3], &committee);
    let stand_in = StandIn::spawn(
        byzantine,
        committee.clone(),
        Attack::BlockAsBatch { held: None },
    );
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 5)
    });
    stand_in.arm();
    wait_until("the attack", Duration::from_secs(60), || {
        stand_in.attacks() >= 1
    });
    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    wait_until(
        "every honest node to keep committing",
        Duration::from_secs(60),
        || {
            nodes
                .iter()
                .zip(&before)
                .all(|(n, &b)| n.committed_count() >= b + 20)
        },
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
    for (i, sequence) in sequences.iter().enumerate() {
        assert_no_batch_twice(i, sequence);
    }
}

/// A leader that re-proposes a batch committed a few rounds ago, or names one batch
/// twice in a block, must get no votes. Before the fix both blocks commit and every node
/// delivers those batches twice.
#[test]
fn byzantine_reproposed_and_repeated_batches_are_rejected() {
    let keys = keys(4);
    let committee = committee(&keys);
    let byzantine = keys[3].clone();
    let (nodes, _loads) = honest_nodes(&keys[..3], &committee);
    let fresh = seal_and_spread(&committee, &byzantine);
    let stand_in = StandIn::spawn(
        byzantine,
        committee.clone(),
        Attack::Repropose {
            committed: nodes[0].committed.clone(),
            fresh,
            step: 0,
        },
    );
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 5)
    });
    stand_in.arm();
    wait_until("both attacks", Duration::from_secs(60), || {
        stand_in.attacks() >= 2
    });
    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    wait_until(
        "every honest node to keep committing",
        Duration::from_secs(60),
        || {
            nodes
                .iter()
                .zip(&before)
                .all(|(n, &b)| n.committed_count() >= b + 20)
        },
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
    for (i, sequence) in sequences.iter().enumerate() {
        assert_no_batch_twice(i, sequence);
    }
}

// ---- a partition through test-only proxies ----------------------------------------------------

/// TCP proxies in front of every port one node uses to talk to the others (both directions).
/// While cut, every connection through them is closed and new ones are closed at once, as a
/// network partition would make them fail.
struct Partition {
    cut: watch::Sender<bool>,
    _proxies: Background,
}

impl Partition {
    /// `routes`: (listen port, target address).
    fn spawn(routes: Vec<(u16, SocketAddr)>) -> Self {
        let (cut, cut_rx) = watch::channel(false);
        let proxies = Background::spawn("the proxies", move |ready| async move {
            for (port, target) in routes {
                let listener = TcpListener::bind(("127.0.0.1", port))
                    .await
                    .expect("proxy port");
                tokio::spawn(proxy(listener, target, cut_rx.clone()));
            }
            ready.send(()).expect("test waits");
            std::future::pending::<()>().await;
        });
        Partition {
            cut,
            _proxies: proxies,
        }
    }

    fn set(&self, cut: bool) {
        let _ = self.cut.send(cut);
    }
}

async fn proxy(listener: TcpListener, target: SocketAddr, cut: watch::Receiver<bool>) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        if *cut.borrow() {
            continue; // dropped: closed at once
        }
        let mut cut = cut.clone();
        tokio::spawn(async move {
            let Ok(mut outbound) = TcpStream::connect(target).await else {
                return;
            };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                _ = cut.wait_for(|cut| *cut) => {}
            }
        });
    }
}

/// One node is cut off for well over `gc_depth` rounds while the others commit; each
/// peer's reliable buffer towards it overflows, so the batches it missed must come through
/// batch sync. Before the fix the peers have deleted them (`gc_depth` rounds after commit) and
/// the node never commits again.
#[test]
fn partitioned_node_catches_up_on_every_batch_it_missed() {
    let keys = keys(4);
    let parameters = Parameters {
        gc_depth: 10,
        // Also the per-peer buffer of unacknowledged batches: small, so a partition of a few
        // seconds overflows it and the missed batches must be synchronised.
        channel_capacity: 50,
        batch_size: 5_000,
        ..test_parameters()
    };
    let real = committee(&keys);
    let lagging = keys[3].name;
    // Every link between the lagging node and another goes through a proxy: the others see
    // proxy addresses for it, it sees proxy addresses for them.
    let mut routes = Vec::new();
    let mut proxied = |authority: &Authority| {
        let mut through = authority.clone();
        for (field, target) in [
            (&mut through.consensus_address, authority.consensus_address),
            (&mut through.mempool_address, authority.mempool_address),
        ] {
            let port = free_port();
            routes.push((port, target));
            *field = SocketAddr::from(([127, 0, 0, 1], port));
        }
        through
    };
    let mut view_of_others = real.clone();
    let mut view_of_lagging = real.clone();
    for (name, authority) in &real.authorities {
        if *name == lagging {
            view_of_others.authorities.insert(*name, proxied(authority));
        } else {
            view_of_lagging
                .authorities
                .insert(*name, proxied(authority));
        }
    }
    let partition = Partition::spawn(routes);
    let nodes: Vec<_> = keys
        .iter()
        .map(|k| {
            let view = if k.name == lagging {
                &view_of_lagging
            } else {
                &view_of_others
            };
            TestNode::spawn(k.clone(), view.clone(), parameters.clone())
        })
        .collect();
    let _loads: Vec<_> = keys[..3]
        .iter()
        .map(|k| Load::start(transactions_address(&real, &k.name), 1_000, 200))
        .collect();
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 5)
    });

    partition.set(true);
    let round = nodes[0].round();
    let sealed = |n: &TestNode| n.mempool.sealed_batches.load(Ordering::Relaxed);
    let sealed_before: Vec<u64> = nodes[..3].iter().map(sealed).collect();
    wait_until(
        "the others to run far past the GC depth",
        Duration::from_secs(90),
        || {
            nodes[0].round() > round + 4 * parameters.gc_depth
                && nodes[..3]
                    .iter()
                    .zip(&sealed_before)
                    .all(|(n, &b)| sealed(n) > b + 2 * parameters.channel_capacity as u64)
        },
    );
    let missed = nodes[0]
        .committed_count()
        .saturating_sub(nodes[3].committed_count());
    partition.set(false);

    let target = nodes[0].committed();
    wait_until(
        "the lagging node to commit every batch it missed",
        Duration::from_secs(90),
        || nodes[3].committed_count() >= target.len(),
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
    assert_eq!(&sequences[3][..target.len()], &target[..]);
    assert!(
        missed > 0,
        "the partition should have made the node miss batches"
    );
    for (i, sequence) in sequences.iter().enumerate() {
        assert_no_batch_twice(i, sequence);
    }
}
