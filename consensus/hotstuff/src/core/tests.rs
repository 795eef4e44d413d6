//! The core driven by direct calls, one file per part of it; the harness and the helpers
//! the parts share are here.

use super::*;
use crate::aggregator::AggregatorError;
use crate::liveness::leader::{LeaderElector, Opening};
use crate::messages::commit_proof::CommitProof;
use crate::messages::tests::{committee, keys, qc, signed_block, tc, timeout, vote};
use crate::messages::{MessageError, QC, TC};
use crate::sync::state_sync::StateSync;
use crate::wire::CheckpointReply;
use crypto::KeyPair;
use network::handshake::Purpose;
use plumbing::budgeted::{self, BudgetedSender};
use plumbing::clock::Instant;
use store::Column;

mod on_block;
mod on_checkpoint;
mod on_record;
mod on_timeout;
mod proposing;
mod restarts;
mod storage;
mod walls;

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
        self.core.pacemaker.set_round(round);
        let parent = Digest::of(&(round - 1).to_le_bytes());
        self.core
            .voting
            .set_high_qc(qc(parent, round - 1, &self.keys[..3]));
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
        self.core.adoption.checkpoints().publish(Checkpoint::new(
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
