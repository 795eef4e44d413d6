//! A hostile member beside real node processes: it holds a member's real key and ports, and
//! attacks the honest nodes as a Byzantine member can, over the real wire format and handshake.
//!
//! It keeps the committee live and nothing more: it votes for every proposal and joins a round's
//! timeout once two honest members sent theirs, so the honest nodes commit while one of them is
//! away (a member that stalls the chain is another test's subject); it never proposes. Its
//! attacks:
//! - handshake relays: the first dials of its consensus and mempool ports are answered with the
//!   hello of another honest member's port of the same purpose, and the dialer's answer is passed
//!   on. A relay let in speaks as the dialer: it reports the forged checkpoint below in the
//!   dialer's name, which with its own report would be the f+1 that adopt it;
//! - forged checkpoint reports nobody asked for, to every honest member that has not asked it for
//!   one: the latest proposal (a block above every member's last commit, which the chain has not
//!   committed) with a state the chain never produced;
//! - answers to real checkpoint requests with a block that has no valid commit proof: a recent
//!   proposal, "proven" by its child and a QC of the child made of its own vote alone;
//! - answers to vote record requests (a node whose store holds no record asks what its key
//!   signed) that show none of the requester's signatures, whatever it holds: a lie low.
//!
//! Every frame it accepts it acknowledges as a node does; batches it acknowledges and drops.

use bytes::Bytes;
use config::{Committee, Round};
use crypto::{Hash, KeyPair, PublicKey, SignatureService};
use futures::{SinkExt, StreamExt};
use hotstuff::commit_proof::CommitProof;
use hotstuff::wire;
use hotstuff::{Block, CheckpointReply, ConsensusMessage, RecordReply, Timeout, Vote, QC};
use network::handshake::{self, Credentials, Gate, Purpose};
use network::testing::{relay_handshake, Relay};
use network::SimpleSender;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;

/// Dials of each port answered with a relay before the member answers as itself.
const RELAYED_DIALS: usize = 6;

/// How often it pushes forged reports.
const ATTACK_INTERVAL: Duration = Duration::from_millis(100);

/// A member that asked for a checkpoint this recently may still be waiting for replies: a forged
/// report sent to it now would not be one nobody asked for.
const ASKED_RECENTLY: Duration = Duration::from_secs(3);

/// What a forged report claims the state is.
const NEVER_PRODUCED: &[u8] = b"a state the chain never produced";

const MAX_FRAME_SIZE: usize = 8 << 20;

/// What the hostile member did, so a test knows each attack really ran.
#[derive(Default)]
pub struct Attacks {
    /// Relayed dials whose dialer hung up on the hello it was passed.
    pub relays_refused: AtomicU64,
    /// Relayed dials that got it into another member's port as the dialer.
    pub relays_entered: AtomicU64,
    pub votes: AtomicU64,
    pub timeouts: AtomicU64,
    /// Forged reports sent to members that had not asked for one.
    pub unasked_reports: AtomicU64,
    /// Checkpoint requests of honest members answered with a block lacking a valid commit proof.
    pub unproven_answers: AtomicU64,
    /// Vote record requests answered with none of the requester's signatures.
    pub record_answers: AtomicU64,
}

pub struct HostileMember {
    pub attacks: Arc<Attacks>,
    /// Dropping it stops every task of the member and closes its ports.
    _runtime: Runtime,
}

impl HostileMember {
    /// Takes `keys`' ports in `committee` and starts attacking.
    pub fn spawn(keys: KeyPair, committee: Committee) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let attacks = Arc::new(Attacks::default());
        let me = committee.authority(&keys.name).expect("a member").clone();
        let forged = Forged::default();
        let (tx, rx) = mpsc::channel(10_000);
        for purpose in [Purpose::Consensus, Purpose::Mempool] {
            let listener = runtime
                .block_on(TcpListener::bind(purpose.address_of(&me)))
                .expect("bind");
            let port = Port {
                gate: Gate::for_committee(keys.name, purpose, &committee),
                targets: committee
                    .others(&keys.name, |a| purpose.address_of(a))
                    .into_iter()
                    .map(|(_, address)| address)
                    .collect(),
                attacks: attacks.clone(),
                forged: forged.clone(),
                // Only the consensus port's messages matter to it; batches are dropped.
                tx: (purpose == Purpose::Consensus).then(|| tx.clone()),
            };
            runtime.spawn(port.serve(listener));
        }
        let member_attacks = attacks.clone();
        // Built on the runtime: its signature service and sender spawn tasks there.
        runtime.spawn(async move {
            Member::new(keys, committee, member_attacks, forged)
                .run(rx)
                .await
        });
        HostileMember {
            attacks,
            _runtime: runtime,
        }
    }
}

/// The forged report: the latest proposal heard, a block the chain has not committed yet, with
/// a state it never produced and no commit proof.
#[derive(Clone, Default)]
struct Forged {
    latest: Arc<Mutex<Option<Block>>>,
}

impl Forged {
    fn heard(&self, block: &Block) {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if latest.as_ref().is_none_or(|b| b.round < block.round) {
            *latest = Some(block.clone());
        }
    }

    /// The forged report in `author`'s name, once a proposal was heard.
    fn report(&self, author: PublicKey) -> Option<Bytes> {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let forged = CheckpointReply {
            author,
            block: latest.clone()?,
            proof: CommitProof {
                descendants: Vec::new(),
                qc: QC::genesis(),
            },
            state: Bytes::from_static(NEVER_PRODUCED),
        };
        wire::encode(&ConsensusMessage::Checkpoint(forged)).ok()
    }
}

/// One of its ports: relays the first dials, answers the later ones as itself.
struct Port {
    gate: Gate,
    /// The same port of every other member, where dials are relayed to.
    targets: Vec<SocketAddr>,
    attacks: Arc<Attacks>,
    forged: Forged,
    /// Where decoded consensus messages go (`None`: frames are only acknowledged).
    tx: Option<mpsc::Sender<ConsensusMessage>>,
}

impl Port {
    async fn serve(self, listener: TcpListener) {
        let port = Arc::new(self);
        let mut dials = 0;
        while let Ok((stream, _)) = listener.accept().await {
            dials += 1;
            let port = port.clone();
            if dials <= RELAYED_DIALS {
                let target = port.targets[dials % port.targets.len()];
                tokio::spawn(async move { port.relay(stream, target).await });
            } else {
                tokio::spawn(async move { port.receive(stream).await });
            }
        }
    }

    async fn relay(&self, dialer: TcpStream, target: SocketAddr) {
        match relay_handshake(dialer, target).await {
            Relay::RefusedByDialer => {
                self.attacks.relays_refused.fetch_add(1, Ordering::Relaxed);
            }
            Relay::Entered { dialer, stream } => {
                self.attacks.relays_entered.fetch_add(1, Ordering::Relaxed);
                // In as the dialer on a consensus port: report the forged checkpoint in its name.
                let report = self.tx.as_ref().and_then(|_| self.forged.report(dialer));
                if let Some(report) = report {
                    let mut as_dialer = Framed::new(stream, network::codec(MAX_FRAME_SIZE));
                    let _ = as_dialer.send(report).await;
                }
            }
            Relay::RefusedByTarget | Relay::Unreachable => {}
        }
    }

    /// A dial answered as a node answers it: the handshake, then an ack for every frame.
    async fn receive(&self, mut stream: TcpStream) {
        if handshake::accept(&mut stream, &self.gate).await.is_err() {
            return;
        }
        let mut frames = Framed::new(stream, network::codec(MAX_FRAME_SIZE));
        while let Some(Ok(frame)) = frames.next().await {
            if frames.send(Bytes::from_static(b"Ack")).await.is_err() {
                return;
            }
            if let (Some(tx), Ok(message)) = (&self.tx, wire::decode(&frame)) {
                if tx.send(message).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Its part in consensus, and its checkpoint attacks.
struct Member {
    name: PublicKey,
    signer: SignatureService,
    /// The honest members' consensus ports.
    honest: Vec<(PublicKey, SocketAddr)>,
    sender: SimpleSender,
    attacks: Arc<Attacks>,
    forged: Forged,
    high_qc: QC,
    /// Who timed out in each recent round, and the rounds it timed out in itself.
    timeouts: BTreeMap<Round, HashSet<PublicKey>>,
    timed_out: HashSet<Round>,
    /// The proposals of the last rounds, and the round it last voted in.
    proposals: BTreeMap<Round, Block>,
    voted: Round,
    /// Its answer to the next checkpoint request, ready before the request comes.
    answer: Option<Bytes>,
    /// When each member last asked it for a checkpoint.
    asked: HashMap<PublicKey, Instant>,
}

impl Member {
    fn new(keys: KeyPair, committee: Committee, attacks: Arc<Attacks>, forged: Forged) -> Self {
        let credentials = Credentials::for_committee(
            keys.name,
            keys.secret.clone(),
            Purpose::Consensus,
            &committee,
        );
        Member {
            name: keys.name,
            signer: SignatureService::new(keys.secret),
            honest: committee.others(&keys.name, |a| a.consensus_address),
            sender: SimpleSender::authenticated(10_000, MAX_FRAME_SIZE, credentials),
            attacks,
            forged,
            high_qc: QC::genesis(),
            timeouts: BTreeMap::new(),
            timed_out: HashSet::new(),
            proposals: BTreeMap::new(),
            voted: 0,
            answer: None,
            asked: HashMap::new(),
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<ConsensusMessage>) {
        let mut ticker = tokio::time::interval(ATTACK_INTERVAL);
        loop {
            tokio::select! {
                Some(message) = rx.recv() => self.handle(message).await,
                _ = ticker.tick() => self.push_unasked_reports().await,
            }
        }
    }

    async fn handle(&mut self, message: ConsensusMessage) {
        match message {
            ConsensusMessage::Propose(block) => {
                self.raise(&block.qc);
                if block.round > self.voted {
                    self.voted = block.round;
                    let vote = Vote::new(&block, self.name, &self.signer).await;
                    self.send_all(&ConsensusMessage::Vote(vote)).await;
                    self.attacks.votes.fetch_add(1, Ordering::Relaxed);
                }
                self.forged.heard(&block);
                self.proposals.insert(block.round, block);
                while self.proposals.len() > 10 {
                    self.proposals.pop_first();
                }
                self.answer = self.unproven_answer().await;
            }
            ConsensusMessage::Timeout(timeout) => {
                self.raise(&timeout.high_qc);
                let round = timeout.round;
                let heard = self.timeouts.entry(round).or_default();
                heard.insert(timeout.author);
                if heard.len() >= 2 && self.timed_out.insert(round) {
                    let ours = Timeout::new(self.high_qc.clone(), round, self.name, &self.signer);
                    let ours = ours.await;
                    self.send_all(&ConsensusMessage::Timeout(ours)).await;
                    self.attacks.timeouts.fetch_add(1, Ordering::Relaxed);
                }
                let oldest_kept = round.saturating_sub(10);
                self.timeouts = self.timeouts.split_off(&oldest_kept);
                self.timed_out.retain(|r| *r >= oldest_kept);
            }
            ConsensusMessage::TC(tc) => self.raise(&tc.high_qc),
            ConsensusMessage::RecordRequest(requester) => {
                let reply = RecordReply {
                    author: self.name,
                    act: None,
                    high_qc: self.high_qc.clone(),
                    high_tc: None,
                };
                let address = self.honest.iter().find(|(m, _)| *m == requester);
                let bytes = wire::encode(&ConsensusMessage::RecordReply(reply));
                if let (Ok(bytes), Some((_, address))) = (bytes, address) {
                    self.sender.send(*address, bytes).await;
                    self.attacks.record_answers.fetch_add(1, Ordering::Relaxed);
                }
            }
            ConsensusMessage::CheckpointRequest(requester) => {
                self.asked.insert(requester, Instant::now());
                let address = self.honest.iter().find(|(m, _)| *m == requester);
                if let (Some(answer), Some((_, address))) = (self.answer.clone(), address) {
                    self.sender.send(*address, answer).await;
                    self.attacks
                        .unproven_answers
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }

    /// Pushes the forged report to every honest member that has not asked for a checkpoint.
    async fn push_unasked_reports(&mut self) {
        let Some(report) = self.forged.report(self.name) else {
            return;
        };
        for (member, address) in self.honest.clone() {
            let waiting = self
                .asked
                .get(&member)
                .is_some_and(|at| at.elapsed() < ASKED_RECENTLY);
            if !waiting {
                self.sender.send(address, report.clone()).await;
                self.attacks.unasked_reports.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A report of a recent proposal with a state never produced, and a commit proof that does not
    /// hold: the proposal's child in the next round, if it heard one, with a QC of the child that
    /// holds only its own vote; else (the latest proposal's) a proof of no block at all.
    async fn unproven_answer(&self) -> Option<Bytes> {
        let pair = self
            .proposals
            .values()
            .zip(self.proposals.values().skip(1))
            .rfind(|(block, child)| {
                child.round == block.round + 1 && child.qc.hash == block.digest()
            });
        let (block, proof) = match pair {
            Some((block, child)) => {
                let vote = Vote::new(child, self.name, &self.signer).await;
                let qc = QC {
                    hash: vote.hash,
                    round: vote.round,
                    votes: vec![(self.name, vote.signature)],
                };
                let descendants = vec![child.clone()];
                (block, CommitProof { descendants, qc })
            }
            None => {
                let (_, latest) = self.proposals.last_key_value()?;
                let descendants = Vec::new();
                (
                    latest,
                    CommitProof {
                        descendants,
                        qc: QC::genesis(),
                    },
                )
            }
        };
        let answer = CheckpointReply {
            author: self.name,
            block: block.clone(),
            proof,
            state: Bytes::from_static(NEVER_PRODUCED),
        };
        wire::encode(&ConsensusMessage::Checkpoint(answer)).ok()
    }

    fn raise(&mut self, qc: &QC) {
        if qc.round > self.high_qc.round {
            self.high_qc = qc.clone();
        }
    }

    async fn send_all(&mut self, message: &ConsensusMessage) {
        let Ok(bytes) = wire::encode(message) else {
            return;
        };
        for (_, address) in self.honest.clone() {
            self.sender.send(address, bytes.clone()).await;
        }
    }
}
