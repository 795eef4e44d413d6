use super::*;
use crate::aggregator::AggregatorError;
use crate::commit_proof::CommitProof;
use crate::leader::{LeaderElector, Opening};
use crate::messages::tests::{committee, keys, qc, signed_block, tc, timeout, vote};
use crate::messages::{MessageError, QC, TC};
use crate::state_sync::StateSync;
use crate::wire::CheckpointReply;
use crypto::KeyPair;
use network::handshake::Purpose;
use plumbing::budgeted::{self, BudgetedSender};
use store::Column;
use tokio::time::Instant;

/// A core of `keys[0]` driven by direct calls; its peers' addresses lead nowhere, so what it
/// sends is queued and lost, which these tests do not need.
struct Harness {
    core: Core,
    keys: Vec<KeyPair>,
    rx_commit: mpsc::Receiver<ToCommitter>,
    rx_fatal: watch::Receiver<Option<FatalError>>,
    rx_restore: std::sync::mpsc::Receiver<Arc<Checkpoint>>,
    rx_held_by_all: watch::Receiver<Round>,
    progress: Arc<PipelineProgress>,
    rx_mempool: mpsc::Receiver<ConsensusMempoolMessage>,
    /// The core's input, as the consensus port's handler feeds it.
    tx_message: BudgetedSender<ConsensusMessage>,
    _tx_digests: mpsc::Sender<Digest>,
}

fn harness(parameters: Parameters) -> Harness {
    harness_on(Store::new(), parameters)
}

/// A harness whose commit channel holds `commit_capacity` blocks.
fn harness_committing_into(commit_capacity: usize, parameters: Parameters) -> Harness {
    harness_with(Store::new(), parameters, commit_capacity)
}

/// A GC window of 10 rounds: a chain of a few dozen blocks leaves it.
fn short_gc_window() -> Parameters {
    Parameters {
        gc_depth: 10,
        ..Parameters::default()
    }
}

/// A harness over `store`: a second one over the same store is the node restarted on it.
fn harness_on(store: Store, parameters: Parameters) -> Harness {
    harness_with(store, parameters, 10_000)
}

fn harness_with(store: Store, parameters: Parameters, commit_capacity: usize) -> Harness {
    let keys = keys(4);
    // The core's input as `Consensus::spawn` makes it.
    let (tx_message, rx_message, _) =
        budgeted::channel(parameters.channel_capacity, parameters.queue_budget_bytes());
    let (tx_loopback, rx_loopback) = mpsc::channel(1_000);
    let (tx_digests, rx_digests) = mpsc::channel(1_000);
    let (tx_commit, rx_commit) = mpsc::channel(commit_capacity);
    let (tx_mempool, rx_mempool) = mpsc::channel(10_000);
    let (tx_fatal, rx_fatal) = watch::channel(None);
    let (tx_restore, rx_restore) = std::sync::mpsc::channel();
    let (peer_rounds, rx_held_by_all) = PeerRounds::new(keys[0].name, &committee(&keys));
    let checkpoints = CheckpointSlot::kept_in(&store);
    let progress = Arc::new(PipelineProgress::default());
    let parameters_quota = (
        parameters.max_uncommitted_batches_per_author,
        parameters.gc_depth,
    );
    let senders = CoreSenders::authenticated(
        Credentials::new(keys[0].name, keys[0].secret.clone(), Purpose::Consensus),
        &parameters,
    );
    let core = Core::new(
        keys[0].name,
        committee(&keys),
        parameters,
        store,
        SignatureService::new(keys[0].secret.clone()),
        CoreChannels {
            rx_message,
            rx_loopback,
            tx_loopback,
            rx_digests,
            tx_commit,
            tx_mempool,
            quota: mempool::AuthorQuota::new(parameters_quota.0, parameters_quota.1),
            tx_fatal,
            senders,
            tx_restore,
            peer_rounds,
            direct_commits: DirectCommits::default(),
            checkpoints,
            progress: progress.clone(),
        },
        Arc::new(ConsensusMetrics::default()),
    )
    .expect("core starts");
    Harness {
        core,
        rx_fatal,
        rx_restore,
        rx_held_by_all,
        progress,
        keys,
        rx_commit,
        rx_mempool,
        tx_message,
        _tx_digests: tx_digests,
    }
}

/// Queues `message` for the core as the consensus port's handler does: counted as its encoded
/// size.
async fn deliver(tx_message: &BudgetedSender<ConsensusMessage>, message: ConsensusMessage) {
    let size = wire::encode(&message).expect("encode").len();
    tx_message.send(message, size).await.expect("core listens");
}

impl Harness {
    fn leader(&self, round: Round) -> &KeyPair {
        let name = self.core.committee.leader(round);
        self.keys
            .iter()
            .find(|k| k.name == name)
            .expect("leader is in the committee")
    }

    /// A well-formed block of `round` extending `parent` (genesis if `None`).
    fn block(&self, parent: Option<&Block>, round: Round, payload: Vec<Digest>) -> Block {
        let parent_qc = match parent {
            None => QC::genesis(),
            Some(p) => qc(p.digest(), p.round, &self.keys[..3]),
        };
        signed_block(parent_qc, None, round, payload, self.leader(round))
    }

    /// Puts the core in `round`, opened by a QC of the round before (of a block it need not
    /// hold), as a leader is when it proposes.
    fn enter_round(&mut self, round: Round) {
        self.core.pacemaker.round = round;
        let parent = Digest::of(&(round - 1).to_le_bytes());
        self.core.voting.high_qc = qc(parent, round - 1, &self.keys[..3]);
    }

    /// A block of `round` after a timed-out round: it extends `parent` (genesis if `None`) and
    /// carries a TC of the round before whose highest QC is that of `parent`.
    fn block_after_timeout(&self, parent: Option<&Block>, round: Round) -> Block {
        let parent_qc = match parent {
            None => QC::genesis(),
            Some(p) => qc(p.digest(), p.round, &self.keys[..3]),
        };
        let tc = tc(round - 1, &parent_qc, &self.keys[..3]);
        signed_block(parent_qc, Some(tc), round, vec![], self.leader(round))
    }

    /// Puts a batch under each of `digests` in the core's store, as the mempool would once a
    /// quorum holds them.
    async fn store_batches(&self, digests: &[Digest]) {
        for digest in digests {
            self.core
                .store
                .batches()
                .write(*digest, bytes::Bytes::from_static(b"batch"))
                .await
                .expect("write");
        }
    }

    /// A chain of consecutive rounds `from..=to`, the first extending `parent`.
    fn chain(&self, parent: Option<&Block>, from: Round, to: Round) -> Vec<Block> {
        let mut blocks: Vec<Block> = Vec::new();
        for round in from..=to {
            let block = self.block(blocks.last().or(parent), round, vec![]);
            blocks.push(block);
        }
        blocks
    }

    /// An application whose checkpoints never hold blocks back: only the GC window prunes.
    /// (Before its first checkpoint, a node keeps every block: a restart replays from
    /// genesis.)
    fn application_keeps_up(&self) {
        self.core.adoption.checkpoints.publish(Checkpoint::new(
            Digest::of(b"a block no node stores"),
            Round::MAX,
            bytes::Bytes::new(),
        ));
    }

    /// Rounds of the blocks the committer was told committed below a root we took.
    fn skipped(&mut self) -> Vec<Round> {
        let mut rounds = Vec::new();
        while let Ok(input) = self.rx_commit.try_recv() {
            if let ToCommitter::Skipped(block) = input {
                rounds.push(block.round);
            }
        }
        rounds
    }

    /// Batches the mempool was told committed (released from their authors' quotas).
    fn released(&mut self) -> Vec<Digest> {
        self.settled().0
    }

    /// Batches the mempool was told committed, and ours it was told were abandoned (their fate
    /// unknown here: they leave our backlog).
    fn settled(&mut self) -> (Vec<Digest>, Vec<Digest>) {
        let (mut released, mut abandoned) = (Vec::new(), Vec::new());
        while let Ok(message) = self.rx_mempool.try_recv() {
            match message {
                ConsensusMempoolMessage::Committed(digests) => released.extend(digests),
                ConsensusMempoolMessage::Abandoned(digests) => abandoned.extend(digests),
                _ => {}
            }
        }
        (released, abandoned)
    }

    /// The first round at or after `from` that this core leads.
    fn first_round_led_from(&self, from: Round) -> Round {
        (from..)
            .find(|r| self.core.committee.leader(*r) == self.keys[0].name)
            .expect("leads a round")
    }

    fn committed(&mut self) -> Vec<Round> {
        let mut rounds = Vec::new();
        while let Ok(input) = self.rx_commit.try_recv() {
            if let ToCommitter::Commit(block) = input {
                rounds.push(block.round);
            }
        }
        rounds
    }
}

/// A member signs votes and timeouts for rounds far ahead. Each is a valid
/// message, but none may create an aggregator entry the node keeps until it reaches them.
#[tokio::test]
async fn byzantine_far_future_votes_and_timeouts_are_not_buffered() {
    let mut h = harness(Parameters::default());
    let byzantine = h.keys[3].clone();
    for round in 1_000..1_500 {
        let _ = h
            .core
            .handle_vote(vote(Digest::of(b"x"), round, &byzantine))
            .await;
        let _ = h
            .core
            .handle_timeout(timeout(round, QC::genesis(), &byzantine))
            .await;
    }
    assert_eq!(h.core.aggregator.rounds(), 0);
}

/// While the application is more than `max_unexecuted_bytes` behind, the blocks this node
/// leads carry no batches (they stay queued); once it caught up, they go in.
#[tokio::test]
async fn a_leader_whose_application_is_behind_proposes_no_batches() {
    let mut h = harness(Parameters::default());
    let ours: Vec<Round> = (1..20)
        .filter(|r| h.core.committee.leader(*r) == h.keys[0].name)
        .take(2)
        .collect();
    let batch = Digest::of(b"batch");
    h.core.proposals.buffer.push(batch);
    h.progress
        .delivered(h.core.parameters.max_unexecuted_bytes + 1);
    h.enter_round(ours[0]);
    h.core.propose(None).await.expect("propose");
    let withheld = h.core.proposals.own_blocks.pop_front().expect("a block");
    assert!(withheld.payload.is_empty());
    assert_eq!(h.core.metrics.withheld_proposals.load(Ordering::Relaxed), 1);
    // The application catches up: the queued batch goes into the next block we lead.
    h.progress
        .applied(h.core.parameters.max_unexecuted_bytes + 1);
    h.enter_round(ours[1]);
    h.core.propose(None).await.expect("propose");
    let block = h.core.proposals.own_blocks.pop_front().expect("a block");
    assert_eq!(block.payload, vec![batch]);
}

/// A safety write that fails in a timeout (a full disk) still resets the round timer: the
/// next attempt comes a timeout delay later. Left expired, the timer fired again at once and
/// the core spun on the failing write, a warning per turn.
#[tokio::test(start_paused = true)]
async fn recovery_a_failed_safety_write_in_a_timeout_resets_the_timer() {
    let backend = store::testing::FailingBackend::default();
    let failing = backend.failing.clone();
    let mut h = harness_on(Store::with_backend(backend), Parameters::default());
    let delay = Duration::from_millis(h.core.parameters.timeout_delay);
    tokio::time::advance(delay * 2).await;
    assert!(
        h.core.pacemaker.timer.deadline() <= Instant::now(),
        "the timer expired"
    );
    failing.lock().expect("lock").push(Column::Safety);
    assert!(matches!(
        h.core.local_timeout_round().await,
        Err(ConsensusError::SafetyState(_))
    ));
    assert!(
        h.core.pacemaker.timer.deadline() >= Instant::now() + delay,
        "the timer was left expired: it fires again at once"
    );
}

/// `max_block_digests` holds for received proposals, not only our own.
#[tokio::test]
async fn byzantine_oversized_proposal_is_rejected_on_receipt() {
    let parameters = Parameters {
        max_block_digests: 4,
        ..Parameters::default()
    };
    let mut h = harness(parameters);
    let payload: Vec<Digest> = (0..5u8).map(|i| Digest::of(&[i])).collect();
    let block = h.block(None, 1, payload);
    assert!(matches!(
        h.core.handle_proposal(block).await,
        Err(ConsensusError::Message(MessageError::Malformed(_)))
    ));
    let fits = h.block(None, 1, (0..4u8).map(|i| Digest::of(&[i])).collect());
    assert!(h.core.handle_proposal(fits).await.is_ok());
}

/// A member floods the consensus port with large proposals while the core is stalled: blocked
/// on a full commit channel (its committer waits for an application that takes nothing). Each
/// proposal is acknowledged as it is read and waits in the core's input queue. Counted in
/// messages alone, that queue took up to `channel_capacity` of them (1,000 of up to 4 MB); now
/// it holds at most its byte budget, the port stops reading the connection, and once the core
/// moves again every proposal still reaches it: back-pressure, nothing dropped.
#[tokio::test]
async fn byzantine_large_proposals_wait_within_the_core_input_budget() {
    use crate::handler::ConsensusHandler;
    use futures::{SinkExt, StreamExt};
    use network::{codec, Receiver};
    use std::sync::atomic::AtomicUsize;

    let parameters = Parameters {
        max_frame_size: 1 << 20,
        ..Parameters::default()
    };
    let budget = parameters.queue_budget_bytes();
    let max_frame_size = parameters.max_frame_size;
    let h = harness_committing_into(1, parameters);
    let Harness {
        core,
        keys,
        mut rx_commit,
        tx_message,
        ..
    } = h;
    // The committer is behind: the commit channel is full before anything commits.
    core.tx_commit
        .send(ToCommitter::Commit(Block::genesis()))
        .await
        .expect("room for one");
    let (tx_helper, _rx_helper) = mpsc::channel(8);
    let handler = ConsensusHandler {
        tx_core: tx_message.clone(),
        tx_helper,
        peer: None,
    };
    let (address, _port) = Receiver::spawn(
        "127.0.0.1:0".parse().expect("address"),
        max_frame_size,
        handler,
    )
    .await
    .expect("bind");
    let metrics = core.metrics.clone();
    let committee = core.committee.clone();
    let leader = |round: Round| {
        keys.iter()
            .find(|k| k.name == committee.leader(round))
            .expect("a member leads")
            .clone()
    };
    let _core = tokio::spawn(core.run());

    // A chain of three rounds commits round 1: the core blocks handing it to the committer.
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (mut sink, mut acks) =
        tokio_util::codec::Framed::new(stream, codec(max_frame_size)).split();
    let mut parent: Option<Block> = None;
    for round in 1..=3 {
        let qc = match &parent {
            None => QC::genesis(),
            Some(p) => qc(p.digest(), p.round, &keys[..3]),
        };
        let block = signed_block(qc, None, round, vec![], &leader(round));
        let frame = wire::encode(&ConsensusMessage::Propose(block.clone())).expect("encode");
        sink.send(frame).await.expect("send");
        parent = Some(block);
    }
    for _ in 0..3 {
        acks.next().await.expect("open").expect("ack");
    }
    let deadline = Duration::from_secs(20);
    tokio::time::timeout(deadline, async {
        while metrics.committed_blocks.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("round 1 commits");

    // Now the flood: proposals of 18,000 digests, 576 KB each, far more than the budget holds.
    let count = 40;
    let flood: Vec<bytes::Bytes> = (0..count)
        .map(|i| {
            let block = Block {
                round: 100 + i as Round,
                payload: (0..18_000u32)
                    .map(|d| Digest::of(&d.to_le_bytes()))
                    .collect(),
                ..Block::default()
            };
            wire::encode(&ConsensusMessage::Propose(block)).expect("encode")
        })
        .collect();
    let size = flood[0].len();
    let input = tx_message.metrics().clone();
    let acked = Arc::new(AtomicUsize::new(0));
    let _writer = tokio::spawn(async move {
        for frame in flood {
            if sink.send(frame).await.is_err() {
                return;
            }
        }
    });
    let _reader = tokio::spawn({
        let acked = acked.clone();
        async move {
            while let Some(Ok(_)) = acks.next().await {
                acked.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // Until the port stops reading (the handler waits for room in the core's input, its last
    // proposal acknowledged), or it took them all.
    tokio::time::timeout(deadline, async {
        loop {
            let taken = acked.load(Ordering::Relaxed);
            if taken == count || (input.full() > 0 && taken > tx_message.len()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the port takes every proposal or stops reading");
    let taken = acked.load(Ordering::Relaxed);
    assert!(
        taken <= budget / size + 1,
        "{taken} proposals of {size} bytes taken while the core was stalled; budget {budget}"
    );
    assert!(tx_message.queued_bytes() <= budget);
    assert_eq!(
        tx_message.len(),
        taken - 1,
        "one waits in the handler for room"
    );

    // The committer takes a block: the core moves on, and takes every proposal in turn (and
    // rejects it: too many digests). The port read them all, none was dropped.
    let _ = rx_commit.recv().await;
    tokio::time::timeout(deadline, async {
        while acked.load(Ordering::Relaxed) < count || !tx_message.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every proposal reaches the core once it moves");
    assert_eq!(input.snapshot().sent, 3 + count as u64);
}

/// A core with a GC window of 10 rounds and `gc_retention_ms`, fed a chain of 100 blocks
/// (rounds 1 to 100, so 98 commits).
async fn committed_chain(gc_retention_ms: u64) -> (Harness, Vec<Block>) {
    let mut h = harness(Parameters {
        gc_depth: 10,
        gc_retention_ms,
        ..Parameters::default()
    });
    h.application_keeps_up();
    let chain = h.chain(None, 1, 100);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed().last(), Some(&98));
    (h, chain)
}

/// Blocks far below the committed round are deleted, not kept forever.
#[tokio::test]
async fn blocks_below_the_gc_window_are_pruned() {
    // Rounds alone decide here; the time half of the window has its own test.
    let (mut h, chain) = committed_chain(0).await;
    let blocks = h.core.store.blocks();
    // Kept: the last committed block, `gc_depth` rounds below it, and the two uncommitted.
    let kept = blocks.len();
    assert!(kept <= 10 + 3, "{kept} blocks");
    assert!(blocks.contains(&chain[99].digest()).expect("read"));
    assert!(!blocks.contains(&chain[0].digest()).expect("read"));
    // Nor is a late block of a pruned round stored again.
    let stale = h.block(Some(&chain[9]), 11, vec![]);
    let _ = h.core.handle_proposal(stale.clone()).await;
    assert!(!blocks.contains(&stale.digest()).expect("read"));
}

/// Blocks stay as long as their batches (`GcWindow`: rounds *and* time), so a node that
/// lagged more than `gc_depth` rounds but came back within the time can still fetch both.
#[tokio::test]
async fn blocks_within_the_retention_time_are_kept() {
    let (h, chain) = committed_chain(60_000).await;
    let blocks = h.core.store.blocks();
    assert!(blocks.contains(&chain[0].digest()).expect("read"));
    assert_eq!(blocks.len(), 100);
}

/// With more than f Byzantine members (here the test signs with three of
/// the four keys) two conflicting blocks can both get a commit certificate. The node must
/// notice, refuse to commit the second and halt, not log and carry on.
#[tokio::test]
async fn byzantine_quorum_fork_halts_the_node() {
    let mut h = harness(Parameters::default());
    for block in h.chain(None, 1, 3) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    assert_eq!(h.committed(), vec![1]);
    // Rounds 4..=6 restart from genesis (after a TC of round 3 that reports no QC, which only
    // a Byzantine quorum can sign): round 6 certifies 5, which certifies 4, so 4 "commits"
    // although it does not extend the committed block of round 1.
    let fork_start = h.block_after_timeout(None, 4);
    let mut fork = vec![fork_start.clone()];
    fork.extend(h.chain(Some(&fork_start), 5, 6));
    let mut outcome = Ok(());
    for block in fork.clone() {
        outcome = outcome.and(h.core.handle_proposal(block).await);
    }
    assert_eq!(h.committed(), Vec::<Round>::new(), "the fork was committed");
    assert!(matches!(
        outcome,
        Err(ConsensusError::Fatal(FatalError::Fork { round: 4, .. }))
    ));
    // The run loop stops on it and publishes it for the node binary to exit on.
    let fork = h.block(Some(&fork[2]), 7, vec![]);
    let tx_message = h.tx_message.clone();
    let mut fatal = h.rx_fatal.clone();
    let core = tokio::spawn(h.core.run());
    deliver(&tx_message, ConsensusMessage::Propose(fork)).await;
    tokio::time::timeout(Duration::from_secs(5), fatal.wait_for(Option::is_some))
        .await
        .expect("fatal error published")
        .expect("sender alive until then");
    tokio::time::timeout(Duration::from_secs(5), core)
        .await
        .expect("the core stopped")
        .expect("no panic");
}

/// `round + 1` must never overflow. A single vote of round u64::MAX is
/// outside any window; even with the window open all the way, a quorum of such votes (f+1
/// Byzantine signers are not needed for the QC check, only for this test) must not panic.
#[tokio::test]
async fn byzantine_votes_at_round_max_are_rejected() {
    let mut h = harness(Parameters::default());
    let hash = Digest::of(b"x");
    let byzantine = h.keys[3].clone();
    assert!(h
        .core
        .handle_vote(vote(hash, Round::MAX, &byzantine))
        .await
        .is_err());

    let mut h = harness(Parameters {
        max_rounds_ahead: Round::MAX,
        ..Parameters::default()
    });
    let signers = h.keys[1..].to_vec();
    for k in &signers {
        let _ = h.core.handle_vote(vote(hash, Round::MAX, k)).await;
    }
    assert_eq!(h.core.pacemaker.round, 1);
}

/// A replayed vote or timeout is recognised as a duplicate before its
/// signature is checked (a corrupted signature shows the order), so replays cost no
/// signature verification.
#[tokio::test]
async fn byzantine_replayed_votes_and_timeouts_cost_no_signature_check() {
    let mut h = harness(Parameters::default());
    let voter = h.keys[1].clone();
    let original = vote(Digest::of(b"x"), 1, &voter);
    h.core
        .handle_vote(original.clone())
        .await
        .expect("first vote");
    let mut replay = original;
    replay.signature = vote(Digest::of(b"y"), 1, &voter).signature;
    assert!(matches!(
        h.core.handle_vote(replay).await,
        Err(ConsensusError::Aggregator(AggregatorError::AuthorityReuse(
            _
        )))
    ));

    let first = timeout(1, QC::genesis(), &voter);
    h.core
        .handle_timeout(first.clone())
        .await
        .expect("first timeout");
    let mut replay = first;
    replay.signature = timeout(2, QC::genesis(), &voter).signature;
    assert!(matches!(
        h.core.handle_timeout(replay).await,
        Err(ConsensusError::Aggregator(AggregatorError::AuthorityReuse(
            _
        )))
    ));
    // A forged vote in someone's name does not use up that member's vote either.
    let honest = h.keys[2].clone();
    let mut forged = vote(Digest::of(b"x"), 1, &honest);
    forged.signature = vote(Digest::of(b"y"), 1, &honest).signature;
    assert!(h.core.handle_vote(forged).await.is_err());
    h.core
        .handle_vote(vote(Digest::of(b"x"), 1, &honest))
        .await
        .expect("the real vote still counts");
}

/// The leader gets every member's vote and needs 2f+1: a vote for a block whose QC is already
/// made is dropped before its signature is checked (a corrupted signature shows the order).
#[tokio::test]
async fn a_vote_after_the_qc_costs_no_signature_check() {
    let mut h = harness(Parameters::default());
    let hash = Digest::of(b"x");
    for voter in &h.keys[..3] {
        h.core
            .handle_vote(vote(hash, 1, voter))
            .await
            .expect("valid");
    }
    assert_eq!(h.core.voting.high_qc.round, 1);
    let mut late = vote(hash, 1, &h.keys[3]);
    late.signature = vote(Digest::of(b"y"), 1, &h.keys[3]).signature;
    h.core.handle_vote(late).await.expect("dropped unchecked");
    // A vote for another block of the round is still checked.
    let mut other = vote(Digest::of(b"z"), 1, &h.keys[3]);
    other.signature = vote(Digest::of(b"y"), 1, &h.keys[3]).signature;
    assert!(matches!(
        h.core.handle_vote(other).await,
        Err(ConsensusError::Message(MessageError::InvalidSignature))
    ));
}

/// Rejoin rule 1: a timeout beyond the round window is not stored, but the QC it carries
/// still moves the node (DiemBFT v4 processes every certificate it sees). Without this a node
/// restarted at round 1 drops the survivors' timeouts for round R > window forever.
#[tokio::test]
async fn timeout_beyond_the_window_moves_the_node_by_its_qc() {
    let mut h = harness(Parameters::default());
    let signers = h.keys[..3].to_vec();
    let high = qc(Digest::of(b"b299"), 299, &signers);
    let sender = h.keys[1].clone();
    h.core
        .handle_timeout(timeout(300, high.clone(), &sender))
        .await
        .expect("the QC moves us to round 300, where the timeout fits");
    assert_eq!(h.core.pacemaker.round, 300);
    assert_eq!(h.core.voting.high_qc, high);
    assert_eq!(h.core.aggregator.rounds(), 1, "the timeout is counted now");

    // Still beyond the window after its QC: the QC counts, the timeout is not stored.
    let other = h.keys[2].clone();
    assert!(matches!(
        h.core
            .handle_timeout(timeout(1_000, high.clone(), &other))
            .await,
        Err(ConsensusError::TooFarAhead { .. })
    ));
    assert_eq!(h.core.pacemaker.round, 300);
    assert_eq!(h.core.aggregator.rounds(), 1);

    // A replay of a certificate we are past costs no signature check (a corrupted one
    // shows it is not even looked at).
    let mut replay = high.clone();
    replay.votes[0].1 = vote(Digest::of(b"other"), 299, &signers[0]).signature;
    assert!(matches!(
        h.core.handle_timeout(timeout(1_000, replay, &other)).await,
        Err(ConsensusError::TooFarAhead { .. })
    ));

    // A forged QC above ours moves nothing.
    let mut forged = qc(Digest::of(b"b600"), 600, &signers);
    forged.votes[0].1 = vote(Digest::of(b"other"), 600, &signers[0]).signature;
    assert!(h
        .core
        .handle_timeout(timeout(601, forged, &other))
        .await
        .is_err());
    assert_eq!(h.core.pacemaker.round, 300);
    assert_eq!(h.core.voting.high_qc, high);
}

/// Rejoin rule 1 for blocks: a block's certificates move us before its own signature is
/// checked: a certificate proves itself whoever relays it. (A block's round is the round after
/// its certificate's, so once they moved us the block is never beyond the window.)
#[tokio::test]
async fn a_blocks_certificates_move_the_node_before_its_signature_is_checked() {
    let mut h = harness(Parameters::default());
    let high = qc(Digest::of(b"b299"), 299, &h.keys[..3]);
    let timed_out = tc(999, &high, &h.keys[..3]);
    let mut block = signed_block(
        high.clone(),
        Some(timed_out),
        1_000,
        vec![],
        h.leader(1_000),
    );
    block.signature = h.block(None, 1, vec![]).signature;
    assert!(matches!(
        h.core.handle_proposal(block).await,
        Err(ConsensusError::Message(MessageError::InvalidSignature))
    ));
    assert_eq!(h.core.pacemaker.round, 1_000);
    assert_eq!(h.core.voting.high_qc, high);
}

/// Rejoin rule 1 for TC messages: a TC far ahead moves the round, and its QC the high QC.
#[tokio::test]
async fn tc_far_ahead_moves_the_node() {
    let mut h = harness(Parameters::default());
    let high = qc(Digest::of(b"b299"), 299, &h.keys[..3]);
    let tc = TC {
        round: 500,
        high_qc: high.clone(),
        votes: h.keys[..3]
            .iter()
            .map(|k| (k.name, timeout(500, high.clone(), k).signature, 299))
            .collect(),
    };
    h.core.handle_tc(tc.clone()).await.expect("valid TC");
    assert_eq!(h.core.pacemaker.round, 501);
    assert_eq!(h.core.voting.high_qc, high);
    // A replay is stale: nothing to verify.
    let mut replay = tc;
    replay.votes[0].1 = replay.votes[1].1;
    assert!(h.core.handle_tc(replay).await.is_ok());
}

/// Rejoin rule 2 (Bracha-style amplification): timeouts of a higher round from f+1 distinct
/// members (so at least one honest member is there) make the node join that round and time
/// out of it too; one member alone (maybe Byzantine) moves nothing.
#[tokio::test]
async fn f_plus_one_timeouts_of_a_higher_round_make_the_node_join_it() {
    let mut h = harness(Parameters::default());
    let (a, b) = (h.keys[1].clone(), h.keys[2].clone());
    h.core
        .handle_timeout(timeout(5, QC::genesis(), &a))
        .await
        .expect("valid");
    assert_eq!(h.core.pacemaker.round, 1, "one member may be Byzantine");
    h.core
        .handle_timeout(timeout(5, QC::genesis(), &b))
        .await
        .expect("valid");
    // We joined round 5 and timed out of it: with the two others that is a quorum, so the
    // TC of round 5 formed and moved us to round 6.
    assert_eq!(h.core.metrics.timeouts.load(Ordering::Relaxed), 1);
    assert_eq!(h.core.pacemaker.round, 6);
    // Having timed out of round 5, we never vote in it.
    let late = signed_block(
        qc(Digest::of(b"b4"), 4, &h.keys[..3]),
        None,
        5,
        vec![],
        h.leader(5),
    );
    assert!(!h.core.voting.rules.vote(&late));
}

/// Rejoin rule 2's state is bounded: one Byzantine member timing out of every round ahead
/// moves nothing, and leaves one pending timeout, not one per round.
#[tokio::test]
async fn byzantine_timeouts_of_one_member_do_not_make_the_node_join() {
    let mut h = harness(Parameters::default());
    let byzantine = h.keys[3].clone();
    for round in 2..=100 {
        let _ = h
            .core
            .handle_timeout(timeout(round, QC::genesis(), &byzantine))
            .await;
    }
    assert_eq!(h.core.pacemaker.round, 1);
    assert_eq!(h.core.metrics.timeouts.load(Ordering::Relaxed), 0);
    assert_eq!(h.core.pacemaker.timeout_rounds.len(), 1);
    assert_eq!(
        h.core.pacemaker.timeout_rounds.get(&byzantine.name),
        Some(&100)
    );
}

/// A replica restarted mid-round on its store never votes twice in that round. An
/// equivocating leader's second block of round 1 gets no vote after the restart, while a
/// replica that lost its state (a fresh store) would vote for it.
#[tokio::test]
async fn a_restarted_core_never_votes_twice_in_a_round() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    let first = h.block(None, 1, vec![]);
    h.core.handle_proposal(first).await.expect("valid");
    assert_eq!(h.core.voting.last_vote.as_ref().map(|v| v.round), Some(1));

    let batch = Digest::of(b"batch");
    let equivocation = h.block(None, 1, vec![batch]);
    drop(h);
    let mut restarted = harness_on(store.clone(), Parameters::default());
    store
        .batches()
        .write(batch, bytes::Bytes::from_static(b"batch"))
        .await
        .expect("write");
    assert_eq!(restarted.core.pacemaker.round, 1);
    assert_does_not_vote_for(
        &mut restarted,
        equivocation.clone(),
        "voted twice in round 1",
    )
    .await;

    let forgetful = Store::new();
    forgetful
        .batches()
        .write(batch, bytes::Bytes::from_static(b"batch"))
        .await
        .expect("write");
    let mut fresh = harness_on(forgetful, Parameters::default());
    fresh
        .core
        .handle_proposal(equivocation)
        .await
        .expect("valid");
    assert!(fresh.core.voting.last_vote.is_some());
}

/// A replica that timed out of a round and restarts does not vote in it either, and resumes
/// with the high QC it reported (the TC safety argument counts on it).
#[tokio::test]
async fn a_restarted_core_keeps_its_timeouts_and_high_qc() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    let chain = h.chain(None, 1, 2);
    // Round 1 times out before its block arrives.
    h.core.local_timeout_round().await.expect("timeout");
    drop(h);
    let mut restarted = harness_on(store, Parameters::default());
    assert_eq!(restarted.core.pacemaker.round, 1);
    assert_does_not_vote_for(
        &mut restarted,
        chain[0].clone(),
        "voted in a round it timed out of",
    )
    .await;

    // Round 2's block carries the QC of round 1; the replica times out of round 2.
    restarted
        .core
        .handle_proposal(chain[1].clone())
        .await
        .expect("valid");
    restarted.core.local_timeout_round().await.expect("timeout");
    let high_qc = restarted.core.voting.high_qc.clone();
    assert_eq!(high_qc.round, 1);
    let store = restarted.core.store.clone();
    drop(restarted);
    let again = harness_on(store, Parameters::default());
    assert_eq!(again.core.pacemaker.round, 2);
    assert!(again.core.voting.high_qc == high_qc);
}

/// A leader restarted after proposing does not propose a second block in the round.
#[tokio::test]
async fn a_restarted_leader_does_not_propose_twice() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    // Find a round this core leads and get there.
    let own = h.first_round_led_from(1);
    if own > 1 {
        for block in h.chain(None, 1, own - 1) {
            h.core.handle_proposal(block).await.expect("valid");
        }
    }
    h.enter_round(own);
    h.core.propose(None).await.expect("proposed");
    assert_eq!(h.core.proposals.own_blocks.len(), 1);
    drop(h);
    let mut restarted = harness_on(store, Parameters::default());
    restarted.enter_round(own);
    assert_proposes_nothing(&mut restarted, own).await;
}

/// `restarted` takes `block` as valid and does not vote for it (`why` it would be wrong to).
async fn assert_does_not_vote_for(restarted: &mut Harness, block: Block, why: &str) {
    restarted.core.handle_proposal(block).await.expect("valid");
    assert!(restarted.core.voting.last_vote.is_none(), "{why}");
}

/// A restarted leader of `round`, asked to propose, proposes nothing: it did before the restart.
async fn assert_proposes_nothing(restarted: &mut Harness, round: Round) {
    restarted.core.propose(None).await.expect("no error");
    assert!(
        restarted.core.proposals.own_blocks.is_empty(),
        "proposed twice in round {round}"
    );
}

/// On a durable store every safety write is an fsync, several a round at speed: the leader's
/// round costs it one, its proposal and its own vote written together. A restart after it
/// neither proposes nor votes again in the round.
#[tokio::test]
async fn a_leaders_proposal_and_its_own_vote_are_one_safety_write() {
    let backend = store::testing::RecordingBackend::default();
    let writes = backend.writes.clone();
    let safety_writes = move || {
        let writes = writes.lock().expect("lock");
        writes.iter().filter(|(c, _)| *c == Column::Safety).count()
    };
    let store = Store::with_backend(backend);
    let mut h = harness_on(store.clone(), Parameters::default());
    let own = h.first_round_led_from(2);
    let chain = h.chain(None, 1, own - 1);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // Two more votes for the last block make its QC (with ours): the round we lead.
    let last = chain.last().expect("a block");
    for voter in &h.keys[1..3] {
        let vote = vote(last.digest(), last.round, voter);
        h.core.handle_vote(vote).await.expect("valid");
    }
    assert_eq!(
        (h.core.pacemaker.round, h.core.voting.high_qc.round),
        (own, own - 1)
    );
    let before = safety_writes();
    h.core.propose(None).await.expect("proposed");
    let block = h.core.proposals.own_blocks.pop_front().expect("a proposal");
    h.core.process_block(&block).await.expect("own block");
    assert_eq!(h.core.voting.last_vote.as_ref().map(|v| v.round), Some(own));
    assert_eq!(safety_writes() - before, 1);

    drop(h);
    let mut restarted = harness_on(store, Parameters::default());
    assert_eq!(restarted.core.pacemaker.round, own);
    assert_proposes_nothing(&mut restarted, own).await;
    assert_does_not_vote_for(
        &mut restarted,
        block,
        &format!("voted twice in round {own}"),
    )
    .await;
}

/// Blocks a durable store kept across a restart are pruned like the ones stored in this life.
#[tokio::test]
async fn blocks_from_before_a_restart_are_pruned_too() {
    let store = Store::new();
    let parameters = Parameters {
        gc_retention_ms: 0,
        ..short_gc_window()
    };
    // The first life keeps every block (its retention time has not passed)...
    let mut h = harness_on(
        store.clone(),
        Parameters {
            gc_retention_ms: 60_000,
            ..parameters.clone()
        },
    );
    h.application_keeps_up();
    let chain = h.chain(None, 1, 30);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(store.blocks().len(), 30);
    drop(h);
    // ...the second one knows them without having stored them.
    let mut restarted = harness_on(store.clone(), parameters);
    restarted.application_keeps_up();
    // A restarted node replays from genesis: it commits the stored chain again, then
    // prunes below the window, old blocks included.
    let more = restarted.chain(Some(&chain[29]), 31, 60);
    for block in more {
        restarted.core.handle_proposal(block).await.expect("valid");
    }
    assert!(!store.blocks().contains(&chain[0].digest()).expect("read"));
    assert!(
        store.blocks().len() <= 10 + 3,
        "{} blocks",
        store.blocks().len()
    );
}

/// Under leader reputation, a node restarted on its store tells who leads the round after its
/// high QC from the blocks it stored, as a node that saw them arrive does. Before, it knew no
/// block until new ones came: the others elected it to rounds it could not tell it led, and
/// each of them timed out.
#[tokio::test]
async fn a_restarted_core_tells_the_reputation_leader_from_its_stored_blocks() {
    let store = Store::new();
    let chain = harness_on(store.clone(), Parameters::default()).chain(None, 1, 12);
    for block in &chain {
        let bytes = wire::encode_block(block).expect("encode");
        store
            .blocks()
            .write(block.digest(), bytes)
            .await
            .expect("write");
    }
    let parameters = Parameters {
        leader: config::LeaderRule::Reputation,
        ..Parameters::default()
    };
    let restarted = harness_on(store, parameters.clone());
    let mut elector = LeaderElector::new(
        config::LeaderRule::Reputation,
        &restarted.core.committee,
        parameters.leader_window,
    );
    for block in &chain {
        elector.record(block);
    }
    let anchor = chain[11].digest();
    let leader = elector.leader(13, Opening::Qc(&anchor));
    assert!(leader.is_some(), "the whole window is there");
    assert_eq!(restarted.core.leader(13, Opening::Qc(&anchor)), leader);
}

/// A member's report of the checkpoint after `root` (of `chain`, consecutive rounds), with
/// the proof that it committed: its child in `chain` and that child's QC.
fn report(
    keys: &[KeyPair],
    member: usize,
    chain: &[Block],
    root: usize,
    state: &'static [u8],
) -> CheckpointReply {
    let child = &chain[root + 1];
    CheckpointReply {
        author: keys[member].name,
        block: chain[root].clone(),
        proof: CommitProof {
            descendants: vec![child.clone()],
            qc: qc(child.digest(), child.round, &keys[..3]),
        },
        state: bytes::Bytes::from_static(state),
    }
}

/// State sync: a node that has nothing (a restart on an empty store) and asked for a
/// checkpoint adopts one once f+1 members report it, hands its state to the application,
/// and from then on commits the blocks after it, and only those, without any block below it.
#[tokio::test]
async fn a_checkpoint_reported_by_f_plus_one_members_becomes_the_root() {
    let mut h = harness(short_gc_window());
    // The committee's chain, rounds 1 to 60; this node saw none of it.
    let chain = h.chain(None, 1, 60);
    assert!(
        h.core.adoption.state_sync.should_request(),
        "a request goes out"
    );
    h.core
        .handle_checkpoint(report(&h.keys, 1, &chain, 49, b"state after round 50"))
        .await
        .expect("valid");
    assert!(h.rx_restore.try_recv().is_err(), "one member is not enough");
    h.core
        .handle_checkpoint(report(&h.keys, 2, &chain, 49, b"state after round 50"))
        .await
        .expect("valid");
    let restored = h.rx_restore.try_recv().expect("f+1 members agree");
    let root = chain[49].clone();
    assert_eq!(restored.round, 50);
    assert_eq!(restored.block, root.digest());
    assert_eq!(restored.state.as_ref(), b"state after round 50");
    assert_eq!(h.core.committed.last_round, 50);

    // The blocks after the root arrive (as sync replies would bring them): those two rounds
    // behind the tip commit, nothing at or below the root does.
    for block in &chain[50..] {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed(), (51..=58).collect::<Vec<Round>>());
}

/// Members push reports of a real checkpoint, each with a valid proof, that this node never
/// asked for: however many agree, it does not adopt one (it would hand the application a
/// state in the middle of its own replay). Before, unrequested replies counted as any other.
#[tokio::test]
async fn byzantine_checkpoint_replies_nobody_asked_for_are_ignored() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 60);
    for member in 1..4 {
        let pushed = report(&h.keys, member, &chain, 49, b"pushed state");
        h.core.handle_checkpoint(pushed).await.expect("ignored");
    }
    assert!(
        h.rx_restore.try_recv().is_err(),
        "adopted unrequested reports"
    );
    assert_eq!(h.core.committed.last_round, 0);
    assert_eq!(
        h.core.adoption.state_sync.held(),
        0,
        "unrequested reports were kept"
    );
}

/// A node that asked for a checkpoint and then caught up by replaying the chain no longer
/// looks at replies: reports pushed after it caught up, however many agree, are not adopted
/// (the application would get a state in the middle of its own replay). Before, the request
/// stayed open until some checkpoint was adopted.
#[tokio::test]
async fn byzantine_reports_pushed_after_replay_caught_up_are_ignored() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 70);
    assert!(h.core.adoption.state_sync.should_request(), "a request");
    for block in &chain[..62] {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.core.committed.last_round, 60, "replay caught up");
    for member in 1..4 {
        let pushed = report(&h.keys, member, &chain, 64, b"pushed state");
        h.core.handle_checkpoint(pushed).await.expect("ignored");
    }
    assert!(
        h.rx_restore.try_recv().is_err(),
        "adopted reports pushed after the node caught up"
    );
    assert_eq!(h.core.committed.last_round, 60);
    assert_eq!(h.core.adoption.state_sync.held(), 0);
}

/// Reports of a block the chain never committed (certified, but its child is two rounds
/// later), or of a block with a forged certificate, are refused however many members send
/// them: the block would become the node's root. Before, the block's structure was all that
/// was checked.
#[tokio::test]
async fn byzantine_a_checkpoint_of_an_uncommitted_block_is_not_adopted() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 60);
    // Round 50's block, then a child of round 52 certified by a QC: 50 is not committed.
    let orphan_child = h.block(Some(&chain[49]), 52, vec![]);
    let keys = h.keys.clone();
    let uncommitted = |member: usize| CheckpointReply {
        proof: CommitProof {
            descendants: vec![orphan_child.clone()],
            qc: qc(orphan_child.digest(), 52, &keys[..3]),
        },
        ..report(&keys, member, &chain, 49, b"forged state")
    };
    // A committed block whose certificate was swapped for one with too few signers (the
    // block digest does not cover the signatures).
    let forged_qc = |member: usize| {
        let mut reply = report(&keys, member, &chain, 49, b"forged state");
        reply.block.qc.votes.truncate(1);
        reply
    };
    assert!(h.core.adoption.state_sync.should_request());
    for member in 1..4 {
        assert!(h.core.handle_checkpoint(uncommitted(member)).await.is_err());
    }
    h.core.adoption.state_sync = StateSync::new(h.core.committee.clone(), Duration::from_secs(1));
    assert!(h.core.adoption.state_sync.should_request());
    for member in 1..4 {
        assert!(h.core.handle_checkpoint(forged_qc(member)).await.is_err());
    }
    assert!(
        h.rx_restore.try_recv().is_err(),
        "adopted an unproven block"
    );
    assert_eq!(h.core.committed.last_round, 0);
}

/// A checkpoint not past what the node committed is ignored, however many report it.
#[tokio::test]
async fn a_checkpoint_behind_the_last_commit_is_ignored() {
    let (mut h, chain) = committed_chain(0).await;
    assert!(h.core.adoption.state_sync.should_request());
    for member in 1..4 {
        let reply = report(&h.keys, member, &chain, 49, b"old");
        h.core.handle_checkpoint(reply).await.expect("valid");
    }
    assert!(h.rx_restore.try_recv().is_err());
    assert_eq!(h.core.committed.last_round, 98);
}

/// What the helper builds its proofs from: every direct commit's child QC, pruned with the
/// blocks.
#[tokio::test]
async fn direct_commits_are_recorded_and_pruned_with_the_blocks() {
    let (h, chain) = committed_chain(0).await;
    let commits = &h.core.committed.direct;
    let qc = commits.first_at_or_above(98).expect("round 98 committed");
    assert_eq!((qc.hash, qc.round), (chain[98].digest(), 99));
    assert!(commits.first_at_or_above(99).is_none());
    let floor = h.core.prune_floor();
    assert!(floor > 1);
    let oldest = commits.first_at_or_above(0).expect("some kept");
    assert_eq!(oldest.round, floor + 1);
}

/// The committer frees a batch early only for rounds every peer signed a QC of: the core
/// must report the signers of the QCs it processes, and a member that never signs (behind,
/// or down) must hold the round back.
#[tokio::test]
async fn reports_the_round_every_peer_certified() {
    let mut h = harness(Parameters::default());
    // QCs of rounds 1 to 4 signed by members 0, 1 and 2: member 3 holds nothing we know of.
    let chain = h.chain(None, 1, 5);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(*h.rx_held_by_all.borrow(), 0);
    // Members 1, 2 and 3 certify round 5.
    let parent = &chain[4];
    let qc = qc(parent.digest(), parent.round, &h.keys[1..]);
    let block = signed_block(qc, None, 6, vec![], h.leader(6));
    h.core.handle_proposal(block).await.expect("valid");
    assert_eq!(*h.rx_held_by_all.borrow(), 5);
}

/// A node restarted on its store holds old blocks, but not necessarily their batches (its
/// own GC deleted them, and peers freed them too): far behind, it asks for a checkpoint
/// even when the block's parent is stored.
#[tokio::test]
async fn far_behind_asks_for_a_checkpoint_even_with_the_parent_stored() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 61);
    for block in &chain[..60] {
        h.core
            .store
            .blocks()
            .write(block.digest(), wire::encode_block(block).expect("encode"))
            .await
            .expect("write");
    }
    assert!(
        h.core.adoption.state_sync.should_request(),
        "nothing asked yet"
    );
    h.core.adoption.state_sync = StateSync::new(h.core.committee.clone(), Duration::from_secs(60));
    h.core
        .handle_proposal(chain[60].clone())
        .await
        .expect("valid");
    assert!(
        !h.core.adoption.state_sync.should_request(),
        "a checkpoint request went out"
    );
}

/// A node restarted on its durable store resumes from its own last checkpoint: the whole
/// committee may have restarted, and then no peer has one to give.
#[tokio::test]
async fn a_restart_on_a_store_resumes_from_the_own_checkpoint() {
    let store = Store::new();
    let parameters = Parameters {
        gc_retention_ms: 0,
        ..short_gc_window()
    };
    let mut h = harness_on(store.clone(), parameters.clone());
    let chain = h.chain(None, 1, 40);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // The application checkpointed the state after round 35.
    let checkpoint = Checkpoint::new(
        chain[34].digest(),
        35,
        bytes::Bytes::from_static(b"state after 35"),
    );
    h.core.adoption.checkpoints.publish(checkpoint.clone());
    // Its block stays however far commits go: a restart needs it.
    let more = h.chain(Some(&chain[39]), 41, 80);
    for block in &more {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert!(store.blocks().contains(&chain[34].digest()).expect("read"));
    drop(h);

    let restarted = harness_on(store, parameters);
    let restored = restarted.rx_restore.try_recv().expect("restored at start");
    assert_eq!(*restored, checkpoint);
    assert_eq!(restarted.core.committed.last_round, 35);
    assert_eq!(
        restarted.core.adoption.checkpoints.latest().as_deref(),
        Some(&checkpoint)
    );
}

/// A node restarted on its store hands its committer the blocks of the round window below its
/// checkpoint, not only the checkpoint's: whether a batch proposed again is delivered or
/// skipped depends on what those blocks committed (see `RecentlyCommitted::record`), and must
/// be decided as by the peers that never restarted. Before, blocks below the checkpoint were
/// pruned once the window passed them, and the restarted node delivered batches its peers
/// skipped.
#[tokio::test]
async fn recovery_a_restart_knows_what_the_round_window_below_its_checkpoint_committed() {
    let store = Store::new();
    let parameters = Parameters {
        gc_retention_ms: 0,
        ..short_gc_window()
    };
    let gc_depth = parameters.gc_depth;
    let mut h = harness_on(store.clone(), parameters.clone());
    let chain = h.chain(None, 1, 80);
    h.core.adoption.checkpoints.publish(Checkpoint::new(
        chain[34].digest(),
        35,
        bytes::Bytes::from_static(b"state after 35"),
    ));
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.core.prune_floor(), 35 - gc_depth);
    drop(h);

    let restarted = harness_on(store, parameters);
    let skipped: Vec<Round> = restarted
        .core
        .adoption
        .skipped
        .iter()
        .map(|block| block.round)
        .collect();
    let window: Vec<Round> = (35 - gc_depth..=35).collect();
    assert_eq!(skipped, window);
}

/// A node restarted on its store times out of the round it resumes in as it starts: its
/// timeout tells the others it is back (see `start_round`). A node on a new store starts its
/// first round as usual.
#[tokio::test]
async fn recovery_a_restarted_node_times_out_of_its_round_as_it_starts() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    for block in h.chain(None, 1, 5) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    let round = h.core.pacemaker.round;
    drop(h);

    let mut fresh = harness(Parameters::default());
    fresh.core.start_round().await.expect("starts");
    assert!(fresh.core.pacemaker.last_timeout.is_none());

    let mut restarted = harness_on(store, Parameters::default());
    assert_eq!(restarted.core.pacemaker.round, round);
    restarted.core.start_round().await.expect("starts");
    let timeout = restarted.core.pacemaker.last_timeout.clone();
    assert_eq!(timeout.map(|t| t.round), Some(round));
    assert_eq!(restarted.core.voting.rules.last_voted_round(), round);
}

/// A member that times out of a round below ours while we are stuck in ours (we timed out of
/// it) gets our timeout, once per round of ours however often it asks; a member not behind, a
/// stranger, or a round we have not timed out of gets nothing.
#[tokio::test]
async fn recovery_a_member_behind_gets_our_timeout_once_per_round() {
    let mut h = harness(Parameters::default());
    h.core.advance_round(4).await;
    let behind = timeout(3, QC::genesis(), &h.keys[1]);
    h.core.handle_timeout(behind.clone()).await.expect("stale");
    assert!(
        h.core.pacemaker.helped.is_empty(),
        "not stuck: nothing to help with"
    );

    h.core.local_timeout_round().await.expect("timeout");
    h.core.handle_timeout(behind.clone()).await.expect("stale");
    h.core.handle_timeout(behind).await.expect("stale");
    let stranger = KeyPair::from_seed(9_999);
    h.core
        .handle_timeout(timeout(3, QC::genesis(), &stranger))
        .await
        .expect("stale");
    let helped: Vec<(PublicKey, Round)> = h.core.pacemaker.helped.clone().into_iter().collect();
    assert_eq!(helped, vec![(h.keys[1].name, 5)]);
}

/// A chain of consecutive rounds `from..=to` extending `parent` whose block of `mine` is
/// the one this node proposed (`own`, of that round).
fn chain_through(h: &Harness, own: &Block, to: Round) -> Vec<Block> {
    let mut chain = vec![own.clone()];
    chain.extend(h.chain(Some(own), own.round + 1, to));
    chain
}

/// This node proposes a block carrying a batch, is cut off while the others commit it, and
/// comes back by adopting a checkpoint above it: the batch is committed, so it must not be
/// proposed again (peers refuse it as committed for the GC window, so every round this node
/// leads times out, and once they forget it the batch commits a second time). The mempool
/// hears that the block committed (its batches no longer count against their author) and
/// the committer gets it to collect its batches. Before, `take_root` queued the batch again.
#[tokio::test]
async fn recovery_a_checkpoint_above_our_own_block_does_not_make_us_propose_it_again() {
    let mut h = harness(short_gc_window());
    let mine = h.first_round_led_from(2);
    let before = h.chain(None, 1, mine - 1);
    for block in &before {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    let batch = Digest::of(b"our batch");
    h.core.proposals.buffer.push(batch);
    // Our round, entered by the QC of the block before it.
    h.core.pacemaker.round = mine;
    h.core.voting.high_qc = qc(before[before.len() - 1].digest(), mine - 1, &h.keys[..3]);
    h.core.propose(None).await.expect("proposes");
    let own = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(own.payload, vec![batch]);
    // Cut off: the others commit our block and go on; the node asks for a checkpoint.
    let chain = chain_through(&h, &own, 60);
    assert!(h.core.adoption.state_sync.should_request());
    for member in [1, 2] {
        h.core
            .handle_checkpoint(report(&h.keys, member, &chain, 40, b"state"))
            .await
            .expect("valid");
    }
    assert_eq!(h.core.committed.last_round, own.round + 40);
    assert!(
        h.core.proposals.buffer.is_empty(),
        "the committed batch is queued to be proposed again"
    );
    let (released, abandoned) = h.settled();
    assert!(
        released.is_empty(),
        "our block is not stored: not known committed"
    );
    assert_eq!(
        abandoned,
        vec![batch],
        "our batch leaves our mempool's backlog all the same, or the backlog fills for good"
    );
    let skipped = h.skipped();
    assert_eq!(
        skipped,
        vec![own.round + 40],
        "the root goes to the committer"
    );
}

/// The same with our block stored (we saw it and its successors before the cut): the blocks
/// between our last commit and the root are known committed, so their batches are released
/// from their authors' quotas and handed to the committer for collection. Before, they
/// counted against their authors for good.
#[tokio::test]
async fn recovery_blocks_below_an_adopted_checkpoint_release_their_batches() {
    let mut h = harness(short_gc_window());
    let batch = Digest::of(b"a peer's batch");
    let first = h.block(None, 1, vec![batch]);
    let mut chain = vec![first.clone()];
    chain.extend(h.chain(Some(&first), 2, 60));
    // Stored as sync would store them, without committing (no QC of their children here).
    for block in &chain[..3] {
        h.core.store_block(block).await.expect("stored");
    }
    h.core.payload.committed(&Block::genesis());
    assert!(h.core.adoption.state_sync.should_request());
    // Root at round 3: its ancestors 1 and 2 are stored.
    for member in [1, 2] {
        h.core
            .handle_checkpoint(report(&h.keys, member, &chain, 2, b"state"))
            .await
            .expect("valid");
    }
    assert_eq!(h.core.committed.last_round, 3);
    let released = h.released();
    assert_eq!(released, vec![batch]);
    let skipped = h.skipped();
    assert_eq!(skipped, vec![1, 2, 3]);
}

/// Under leader reputation the leader of round r + 1 is drawn from the chain ending in the
/// block of round r, and the votes for that block (small, from many members) can reach that
/// leader before the block itself does. Their QC opens the round while the leader cannot yet
/// tell it leads; once the block arrives it must propose, as the core's loop has it do after
/// every message. Before, it never did: the round timed out, on fault-free committees too.
#[tokio::test]
async fn a_reputation_leader_that_got_the_votes_before_the_block_proposes_once_it_arrives() {
    let parameters = Parameters {
        leader: config::LeaderRule::Reputation,
        ..Parameters::default()
    };
    let mut h = harness(parameters.clone());
    // The committee's chain, each block by the leader its parent elects, up to a block after
    // which this core leads.
    let mut elector = LeaderElector::new(
        config::LeaderRule::Reputation,
        &h.core.committee,
        parameters.leader_window,
    );
    let mut chain: Vec<Block> = Vec::new();
    let us = h.keys[0].name;
    loop {
        let round = chain.len() as Round + 1;
        let (parent, parent_qc) = match chain.last() {
            None => (Digest::default(), QC::genesis()),
            Some(p) => (p.digest(), qc(p.digest(), p.round, &h.keys[..3])),
        };
        let author = elector.leader(round, Opening::Qc(&parent)).expect("window");
        let author = h.keys.iter().find(|k| k.name == author).expect("member");
        let block = signed_block(parent_qc, None, round, vec![], author);
        elector.record(&block);
        let digest = block.digest();
        chain.push(block);
        if round >= 3 && elector.leader(round + 1, Opening::Qc(&digest)) == Some(us) {
            break;
        }
        assert!(round < 100, "this core is never elected");
    }
    let (last, before) = chain.split_last().expect("a chain");
    for block in before {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // The votes for the last block arrive first: they open the round after it.
    for voter in &h.keys[1..] {
        let vote = vote(last.digest(), last.round, voter);
        h.core.handle_vote(vote).await.expect("valid");
    }
    assert_eq!(h.core.pacemaker.round, last.round + 1);
    assert_eq!(h.core.pacemaker.round_leader, None, "cannot tell yet");
    assert!(h.core.proposals.own_blocks.is_empty());
    h.core.proposals.buffer.push(Digest::of(b"a batch of ours"));

    h.core.handle_proposal(last.clone()).await.expect("valid");
    h.core.lead_once_known().await;
    assert_eq!(h.core.pacemaker.round_leader, Some(us));
    let proposed = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(proposed.round, last.round + 1);
    assert_eq!(proposed.qc.hash, last.digest());
    // Once: more messages do not make it propose again.
    h.core.lead_once_known().await;
    assert!(h.core.proposals.own_blocks.is_empty());
}

/// Timeout joining moves us to a round that no certificate we hold opened: we must not keep
/// the old round's leader nor its opening. Before, `join_timeouts` left both in place: the
/// timeout of the joined round blamed the old round's leader in the metrics, and under
/// reputation `lead_once_known` could propose in the new round from the old opening. Under
/// round-robin the joined round's leader is known from the round alone; under reputation it
/// is not known until a certificate of the round before arrives.
#[tokio::test]
async fn byzantine_joining_timeouts_keeps_no_stale_opening() {
    for rule in [
        config::LeaderRule::RoundRobin,
        config::LeaderRule::Reputation,
    ] {
        let mut h = harness(Parameters {
            leader: rule,
            ..Parameters::default()
        });
        h.core
            .enter_round_opened_by(Opening::Qc(&QC::genesis().hash));
        let old_leader = h
            .core
            .pacemaker
            .round_leader
            .expect("genesis names a leader");
        // A round whose round-robin leader is another member.
        let join = (10..)
            .find(|r| h.core.committee.leader(*r) != old_leader)
            .expect("a round");
        for member in [1, 2] {
            let timeout = timeout(join, QC::genesis(), &h.keys[member]);
            h.core.handle_timeout(timeout).await.expect("valid");
        }
        // f + 1 timeouts of `join` moved us there; our own completed the TC of `join`.
        assert_eq!(h.core.pacemaker.round, join + 1, "{rule:?}");
        let blamed: Vec<(String, u64)> = h
            .core
            .metrics
            .snapshot()
            .timed_out_leaders
            .into_iter()
            .collect();
        let expected = match rule {
            config::LeaderRule::RoundRobin => h.core.committee.leader(join).to_string(),
            config::LeaderRule::Reputation => "?".to_string(),
        };
        assert_eq!(
            blamed,
            vec![(expected, 1)],
            "{rule:?}: whom the timeout blames"
        );
    }
}

/// Batch theft: a leader puts our acknowledged digests into its own block, which commits.
/// They must leave our queue, and our in-flight blocks too, or we propose them again: peers
/// refuse such a block as naming a committed batch (every round we lead times out), and once
/// they forget the commit the batch commits a second time. Before, only our own committed
/// blocks cleared our buffer.
#[tokio::test]
async fn byzantine_a_batch_committed_by_another_leader_is_not_proposed_again() {
    let mut h = harness(Parameters::default());
    let (queued, in_flight, ours) = (
        Digest::of(b"queued"),
        Digest::of(b"in flight"),
        Digest::of(b"ours alone"),
    );
    h.store_batches(&[queued, in_flight, ours]).await;
    // Our block of round `mine` carries `in_flight` and `ours`, and is never certified.
    let mine = h.first_round_led_from(2);
    h.core.proposals.buffer.push(in_flight);
    h.core.proposals.buffer.push(ours);
    h.enter_round(mine);
    h.core.propose(None).await.expect("proposes");
    let orphan = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(orphan.payload, vec![in_flight, ours]);
    h.core.proposals.buffer.push(queued);
    // Another leader's block, after a timeout of our round, steals `queued` and `in_flight`;
    // it and its two successors commit it.
    let thief_round = mine + 1;
    let thief = h.leader(thief_round).clone();
    assert_ne!(thief.name, h.keys[0].name);
    let timed_out = tc(mine, &QC::genesis(), &h.keys[..3]);
    let stolen = signed_block(
        QC::genesis(),
        Some(timed_out),
        thief_round,
        vec![queued, in_flight],
        &thief,
    );
    let mut chain = vec![stolen.clone()];
    chain.extend(h.chain(Some(&stolen), thief_round + 1, thief_round + 2));
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed(), vec![thief_round]);
    // Our next proposal carries what is still ours alone, once.
    let next = h.first_round_led_from(thief_round + 3);
    h.enter_round(next);
    h.core.propose(None).await.expect("proposes");
    let block = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(
        block.payload,
        vec![ours],
        "a committed batch proposed again"
    );
    assert!(h.core.proposals.buffer.is_empty());
}

/// Whether a block's batches are fresh (none committed before) is this node's view: another
/// honest node that had not committed the earlier block yet votes for it, and the block may be
/// certified. A certified block must then be stored and committed by every honest node, or
/// those that refused it stall behind it for good (every later block extends it). Freshness
/// may only decide a node's vote, and a batch committed again within the window is skipped at
/// delivery, by every node alike. The Twins generator found an honest node stuck so: a
/// Byzantine leader's twin proposed a batch its other twin's block had just committed.
#[tokio::test]
async fn byzantine_a_certified_block_naming_a_committed_batch_is_stored_and_committed() {
    let mut h = harness(Parameters::default());
    let (again, fresh) = (Digest::of(b"again"), Digest::of(b"fresh"));
    h.store_batches(&[again, fresh]).await;
    let first = h.block(None, 1, vec![]);
    let second = h.block(Some(&first), 2, vec![again]);
    let mut chain = vec![first, second.clone()];
    chain.extend(h.chain(Some(&second), 3, 4));
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed(), vec![1, 2], "round 2 committed `again`");
    // Round 5 names `again` once more; a quorum that had not committed round 2 yet certified
    // it, and rounds 6 and 7 extend it.
    let repeat = h.block(Some(&chain[3]), 5, vec![again, fresh]);
    h.core
        .handle_proposal(repeat.clone())
        .await
        .expect("a block a quorum may certify is taken");
    assert!(
        h.core
            .voting
            .last_vote
            .as_ref()
            .is_none_or(|v| v.round != 5),
        "no vote of ours for a block naming a batch we saw commit"
    );
    for block in h.chain(Some(&repeat), 6, 7) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    assert_eq!(
        h.committed(),
        vec![3, 4, 5],
        "the certified chain commits through it"
    );
}

/// Blocks a peer sends back for our request come newest first; taken oldest first, each finds
/// its parent stored, so the stretch is stored and committed at once, none left waiting parked
/// for the next.
#[tokio::test]
async fn a_chain_of_missing_blocks_is_taken_oldest_first() {
    let mut h = harness(Parameters::default());
    let chain = h.chain(None, 1, 10);
    let newest_first: Vec<Block> = chain.iter().rev().cloned().collect();
    h.core.handle_chain(newest_first).await.expect("valid");
    assert_eq!(h.committed(), (1..=8).collect::<Vec<Round>>());
    assert_eq!(
        h.core
            .synchronizer
            .counters
            .parked
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// Batches a member sent that never commit (a Byzantine member's, or ones that committed in a
/// stretch this node skipped and were resent at the heal) counted against their sender for
/// good, and stayed stored for good. The core drains them as it commits: one that has waited
/// `gc_depth` rounds of commits is deleted and no longer counts, unless a block this node
/// stored that may still commit names it. Decided by the core, which checks blocks' batches,
/// so no batch is deleted between that check and its block's commit.
#[tokio::test]
async fn byzantine_batches_that_never_commit_leave_the_quota_and_the_store() {
    let mut h = harness(short_gc_window());
    let sender = h.keys[1].name;
    let (orphan, named) = (Digest::of(b"orphan"), Digest::of(b"named"));
    for digest in [orphan, named] {
        assert_eq!(
            h.core.quota.admit(sender, digest),
            mempool::Admission::Store
        );
        h.core
            .store
            .batches()
            .write(digest, bytes::Bytes::from_static(b"batch"))
            .await
            .expect("write");
    }
    // A block of round 40 this node stored names `named`.
    let later = h.block(None, 40, vec![named]);
    h.core.payload.named(&later);
    let chain = h.chain(None, 1, 20);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed().last(), Some(&18));
    let held =
        |h: &Harness, digest: &Digest| h.core.store.batches().contains(digest).expect("read");
    assert!(!held(&h, &orphan), "a batch nobody names is still stored");
    assert!(
        held(&h, &named),
        "a batch a block may still commit was deleted"
    );
    // Round 40 passed without it: it waits its rounds once more, then goes.
    for block in h.chain(Some(&chain[19]), 21, 60) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    assert!(!held(&h, &named));
    // Both left their sender's count: it may send as many again.
    for i in 0..h.core.parameters.max_uncommitted_batches_per_author {
        let fresh = Digest::of(&(i as u64).to_le_bytes());
        assert_eq!(h.core.quota.admit(sender, fresh), mempool::Admission::Store);
    }
}
