//! A Byzantine member against three honest nodes on loopback, over the real wire format.
//!
//! The stand-in holds one committee key and runs no consensus of its own: it never proposes (its
//! rounds end in TCs), and it answers what it hears with attacks an honest node must shrug off:
//! TCs that claim a high QC of round u64::MAX, honest blocks relayed
//! with their TC stripped or swapped, replayed votes, votes and timeouts far in the future and at
//! round u64::MAX. A second stand-in relays handshakes: it answers every honest node that dials it
//! with another honest node's hello, to enter that node's port as the dialer.

mod common;

use bytes::Bytes;
use common::*;
use config::{Committee, Round};
use crypto::{KeyPair, PublicKey, SignatureService};
use futures::{SinkExt, StreamExt};
use hotstuff::wire;
use hotstuff::{Block, ConsensusMessage, Timeout, Vote, QC, TC};
use network::codec;
use network::handshake::{self, Credentials, Gate, Purpose};
use network::testing::{relay_handshake, Relay};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(300 + i)).collect()
}

/// What the stand-in managed to send, so the test knows each attack really ran.
#[derive(Default)]
struct Attacks {
    forged_tcs: AtomicU64,
    relayed_blocks: AtomicU64,
    replayed_votes: AtomicU64,
    future_messages: AtomicU64,
    /// Honest proposals that adopted a forged TC (one claiming a high QC of round u64::MAX):
    /// every such block is unvotable, a round lost to the attack.
    poisoned_proposals: AtomicU64,
}

struct ByzantineStandIn {
    _actor: Background,
    attacks: Arc<Attacks>,
}

impl ByzantineStandIn {
    fn spawn(keys: KeyPair, committee: Committee) -> Self {
        let attacks = Arc::new(Attacks::default());
        let actor = Background::spawn("the stand-in", {
            let attacks = attacks.clone();
            move |ready| async move {
                let address = committee
                    .authority(&keys.name)
                    .expect("member")
                    .consensus_address;
                let listener = TcpListener::bind(address).await.expect("bind");
                ready.send(()).expect("test waits");
                attack(keys, committee, listener, attacks).await;
            }
        });
        ByzantineStandIn {
            _actor: actor,
            attacks,
        }
    }
}

/// Accepts honest nodes' connections and acknowledges every frame as a node would, passing on
/// whatever decodes. Garbage or a closed connection ends only that connection.
async fn listen(listener: TcpListener, gate: Gate, tx: mpsc::Sender<ConsensusMessage>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let tx = tx.clone();
        let gate = gate.clone();
        tokio::spawn(async move {
            // Honest nodes prove their keys on connect; answer as any member's port does.
            if handshake::accept(&mut stream, &gate).await.is_err() {
                return;
            }
            let mut frames = Framed::new(stream, codec(8 << 20));
            while let Some(Ok(frame)) = frames.next().await {
                if frames.send(Bytes::from_static(b"Ack")).await.is_err() {
                    return;
                }
                if let Ok(message) = wire::decode(&frame) {
                    if tx.send(message).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
}

/// One connection per honest node, re-opened when it breaks; acks are read and dropped.
struct Peers {
    credentials: Credentials,
    addresses: Vec<SocketAddr>,
    connections: HashMap<SocketAddr, mpsc::Sender<Bytes>>,
}

impl Peers {
    async fn send_all(&mut self, message: &ConsensusMessage) -> bool {
        let Ok(bytes) = wire::encode(message) else {
            return false;
        };
        let mut sent = false;
        for address in self.addresses.clone() {
            let alive = self
                .connections
                .get(&address)
                .is_some_and(|tx| !tx.is_closed());
            if !alive {
                let (tx, mut rx) = mpsc::channel::<Bytes>(10_000);
                let credentials = self.credentials.clone();
                tokio::spawn(async move {
                    let Ok(mut stream) = TcpStream::connect(address).await else {
                        return;
                    };
                    let Some(acceptor) = credentials.acceptor_at(&address).copied() else {
                        return;
                    };
                    if handshake::dial(&mut stream, &credentials, &acceptor)
                        .await
                        .is_err()
                    {
                        return;
                    }
                    let (mut sink, mut acks) = Framed::new(stream, codec(8 << 20)).split();
                    tokio::spawn(async move { while let Some(Ok(_)) = acks.next().await {} });
                    while let Some(bytes) = rx.recv().await {
                        if sink.send(bytes).await.is_err() {
                            return;
                        }
                    }
                });
                self.connections.insert(address, tx);
            }
            if let Some(tx) = self.connections.get(&address) {
                sent |= tx.try_send(bytes.clone()).is_ok();
            }
        }
        sent
    }
}

async fn attack(keys: KeyPair, committee: Committee, listener: TcpListener, attacks: Arc<Attacks>) {
    let name = keys.name;
    let service = SignatureService::new(keys.secret.clone());
    let (tx, mut rx) = mpsc::channel(10_000);
    let gate = Gate::new(
        name,
        Purpose::Consensus,
        committee.authorities.keys().copied(),
    );
    tokio::spawn(listen(listener, gate, tx));
    let mut peers = Peers {
        credentials: Credentials::for_committee(
            name,
            keys.secret.clone(),
            Purpose::Consensus,
            &committee,
        ),
        addresses: committee
            .others(&name, |a| a.consensus_address)
            .into_iter()
            .map(|(_, a)| a)
            .collect(),
        connections: HashMap::new(),
    };
    // Honest timeouts heard, per round; the highest round heard of.
    let mut timeouts: BTreeMap<Round, HashMap<PublicKey, Timeout>> = BTreeMap::new();
    let mut round: Round = 1;
    let mut ticker = tokio::time::interval(Duration::from_millis(50));
    let mut far = 0u64;
    loop {
        tokio::select! {
            Some(message) = rx.recv() => match message {
                ConsensusMessage::Timeout(timeout) => {
                    round = round.max(timeout.round);
                    let heard = timeouts.entry(timeout.round).or_default();
                    heard.insert(timeout.author, timeout.clone());
                    if heard.len() == 2 {
                        // Two honest timeouts and our own claiming an absurd high QC: a TC that
                        // verified would make the next proposal unvotable.
                        let honest: Vec<Timeout> = heard.values().cloned().collect();
                        let best = honest
                            .iter()
                            .map(|t| t.high_qc.clone())
                            .max_by_key(|qc| qc.round)
                            .unwrap_or_default();
                        let claimed = QC { round: Round::MAX, ..best.clone() };
                        let ours = Timeout::new(claimed.clone(), timeout.round, name, &service).await;
                        let mut votes: Vec<_> = honest
                            .iter()
                            .map(|t| (t.author, t.signature, t.high_qc.round))
                            .collect();
                        votes.push((name, ours.signature, Round::MAX));
                        for high_qc in [best, claimed] {
                            let forged = TC { round: timeout.round, high_qc, votes: votes.clone() };
                            if peers.send_all(&ConsensusMessage::TC(forged)).await {
                                attacks.forged_tcs.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    timeouts = timeouts.split_off(&round.saturating_sub(5));
                }
                ConsensusMessage::Propose(block) => {
                    round = round.max(block.round);
                    let poisoned = block.tc.as_ref().is_some_and(|tc| {
                        tc.votes.iter().any(|(_, _, r)| *r == Round::MAX)
                    });
                    if poisoned && block.author != name {
                        attacks.poisoned_proposals.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Some(tc) = &block.tc {
                        // The same block, its TC stripped, or swapped for an older one.
                        let mut stripped = block.clone();
                        stripped.tc = None;
                        let mut swapped = block.clone();
                        swapped.tc = Some(TC { round: tc.round.saturating_sub(1), ..tc.clone() });
                        for relayed in [stripped, swapped] {
                            if peers.send_all(&ConsensusMessage::Propose(relayed)).await {
                                attacks.relayed_blocks.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
                ConsensusMessage::Vote(vote) => {
                    round = round.max(vote.round);
                    // Replayed to everyone, several times.
                    for _ in 0..3 {
                        if peers.send_all(&ConsensusMessage::Vote(vote.clone())).await {
                            attacks.replayed_votes.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                _ => {}
            },
            _ = ticker.tick() => {
                // Signed votes and timeouts for rounds far ahead, and at the last round.
                far += 1;
                for r in [round + 10_000 + far, Round::MAX] {
                    let target = Block { round: r, author: name, ..Block::default() };
                    let vote = Vote::new(&target, name, &service).await;
                    let timeout = Timeout::new(QC::genesis(), r, name, &service).await;
                    let a = peers.send_all(&ConsensusMessage::Vote(vote)).await;
                    let b = peers.send_all(&ConsensusMessage::Timeout(timeout)).await;
                    if a && b {
                        attacks.future_messages.fetch_add(1, Ordering::Relaxed);
                    }
                }
            },
        }
    }
}

#[test]
fn byzantine_member_cannot_stall_or_split_three_honest_nodes() {
    let keys = keys(4);
    let committee = committee(&keys);
    let (byzantine, honest) = keys.split_last().expect("four keys");
    let standin = ByzantineStandIn::spawn(byzantine.clone(), committee.clone());
    let nodes: Vec<_> = honest
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), test_parameters()))
        .collect();
    let _loads = Load::on_members(&committee, honest, 1_000);
    let attacks = &standin.attacks;
    wait_until(
        "every attack to reach the honest nodes",
        Duration::from_secs(90),
        || {
            attacks.forged_tcs.load(Ordering::Relaxed) >= 4
                && attacks.relayed_blocks.load(Ordering::Relaxed) >= 4
                && attacks.replayed_votes.load(Ordering::Relaxed) >= 10
                && attacks.future_messages.load(Ordering::Relaxed) >= 10
        },
    );
    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    wait_until(
        "honest nodes to keep committing under attack",
        Duration::from_secs(90),
        || {
            nodes
                .iter()
                .zip(&before)
                .all(|(n, &b)| n.committed_count() >= b + 30)
        },
    );
    assert_prefixes(&nodes.iter().map(|n| n.committed()).collect::<Vec<_>>());
    assert_eq!(
        attacks.poisoned_proposals.load(Ordering::Relaxed),
        0,
        "an honest leader proposed with a forged TC"
    );
    for node in &nodes {
        assert!(
            node.handle.fatal.borrow().is_none(),
            "an honest node halted"
        );
    }
}

/// What the relaying stand-in saw: dialers that refused the hello it passed on, and dialers whose
/// answer got it into another member's port.
#[derive(Default)]
struct Relays {
    refused: AtomicU64,
    entered: AtomicU64,
}

/// Answers every connection to its consensus port with the hello of another honest node's port,
/// and passes the dialer's answer on; if that node lets it in, writes a frame there as the dialer.
async fn relay_handshakes(listener: TcpListener, targets: Vec<SocketAddr>, relays: Arc<Relays>) {
    let mut next = 0;
    while let Ok((dialer, _)) = listener.accept().await {
        let target = targets[next % targets.len()];
        next += 1;
        let relays = relays.clone();
        tokio::spawn(async move {
            match relay_handshake(dialer, target).await {
                // The dialer saw a key that is not the stand-in's and hung up.
                Relay::RefusedByDialer => {
                    relays.refused.fetch_add(1, Ordering::Relaxed);
                }
                Relay::Entered { stream, .. } => {
                    relays.entered.fetch_add(1, Ordering::Relaxed);
                    let mut as_dialer = Framed::new(stream, codec(8 << 20));
                    let _ = as_dialer.send(Bytes::from_static(b"relayed")).await;
                }
                Relay::RefusedByTarget | Relay::Unreachable => {}
            }
        });
    }
}

/// The handshake relay on real nodes: the stand-in answers every honest node that dials it with
/// another honest node's hello. Every dialer refuses it (it names a key other than the one the
/// dialer meant to reach), none of them is ever spoken for, and the honest nodes keep committing.
#[test]
fn byzantine_handshake_relay_by_a_member_gets_it_into_no_port() {
    let keys = keys(4);
    let committee = committee(&keys);
    let (byzantine, honest) = keys.split_last().expect("four keys");
    let relays = Arc::new(Relays::default());
    let _standin = Background::spawn("the relaying stand-in", {
        let (relays, committee, name) = (relays.clone(), committee.clone(), byzantine.name);
        move |ready| async move {
            let address = committee
                .authority(&name)
                .expect("member")
                .consensus_address;
            let listener = TcpListener::bind(address).await.expect("bind");
            let targets = committee
                .others(&name, |a| a.consensus_address)
                .into_iter()
                .map(|(_, a)| a)
                .collect();
            ready.send(()).expect("test waits");
            relay_handshakes(listener, targets, relays).await;
        }
    });
    let nodes: Vec<_> = honest
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), test_parameters()))
        .collect();
    let _loads = Load::on_members(&committee, honest, 1_000);
    let decided =
        || relays.refused.load(Ordering::Relaxed) + relays.entered.load(Ordering::Relaxed);
    wait_until(
        "six dials of the stand-in to be refused or relayed",
        Duration::from_secs(60),
        || decided() >= 6,
    );
    assert_eq!(
        relays.entered.load(Ordering::Relaxed),
        0,
        "the stand-in entered an honest node's port as another"
    );
    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    wait_until(
        "honest nodes to keep committing",
        Duration::from_secs(90),
        || {
            nodes
                .iter()
                .zip(&before)
                .all(|(n, &b)| n.committed_count() >= b + 10)
        },
    );
    assert_eq!(
        relays.entered.load(Ordering::Relaxed),
        0,
        "the stand-in entered an honest node's port as another"
    );
    assert_prefixes(&nodes.iter().map(|n| n.committed()).collect::<Vec<_>>());
}
