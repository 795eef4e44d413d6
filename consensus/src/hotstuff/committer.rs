//! Turns committed blocks into committed batches: the crate's one output.

use super::checkpoint::CheckpointSlot;
use super::core::FatalError;
use super::messages::Block;
use super::metrics::ConsensusMetrics;
use super::progress::PipelineProgress;
use crate::config::{Parameters, Round};
use crate::mempool::batch::{now_ms, Batch, BatchBuilder};
use crate::metered::MeteredSender;
use crate::store::{BatchStore, Store};
use crypto::{Digest, Hash};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{error, info, warn};

/// A batch of a committed block, in commit order.
///
/// Every committed block reaches the application, also one that delivers no batch (an idle
/// chain's blocks, or a block whose batches were all committed before): it comes as an empty
/// batch, marked `last_of_block` (see [`CommittedBatch::is_empty_block`]). The application
/// checkpoints after blocks it sees, so without these an idle chain would get no new checkpoint
/// while its peers prune blocks, and a node restarted then would adopt a root whose successors
/// nobody keeps any more.
#[derive(Clone, Debug)]
pub struct CommittedBatch {
    pub round: Round,
    /// The block that committed it.
    pub block: Digest,
    /// Whether it is the last batch of its block this committer delivers: once it is executed,
    /// the application's state is the state after the block (what a checkpoint captures).
    pub last_of_block: bool,
    pub batch: Batch,
    pub committed_at_ms: u64,
}

impl CommittedBatch {
    /// The stand-in for a block that delivers no batch: no transactions, last of its block.
    pub fn empty_block(round: Round, block: Digest, committed_at_ms: u64) -> Self {
        CommittedBatch {
            round,
            block,
            last_of_block: true,
            batch: BatchBuilder::with_capacity(0).seal(committed_at_ms, 0),
            committed_at_ms,
        }
    }

    /// Whether this stands for a block that delivered no batch ([`CommittedBatch::empty_block`]).
    pub fn is_empty_block(&self) -> bool {
        self.last_of_block && self.batch.tx_count() == 0
    }
}

/// What the core hands the committer, in commit order.
#[derive(Debug)]
pub enum ToCommitter {
    /// A block that committed: its batches go to the application.
    Commit(Block),
    /// A block that committed at or below a checkpoint the core took as its root (adopted from
    /// peers, or our own after a restart): the application has its effects in the checkpoint's
    /// state. Its batches are recorded as committed and collected like delivered ones, never
    /// delivered; otherwise they would stay in the store for good.
    Skipped(Block),
}

/// How long committed batches stay in the store: until they are both `rounds` rounds and
/// `time` old.
///
/// Why both. A peer that misses a batch (partitioned, restarting, or withheld from by the
/// batch's author) fetches it from the others, and needs it kept until it gets there. Rounds
/// alone run out in a few seconds at speed (50 rounds < 10 s), well under the time it takes such
/// a peer to be back. Keeping batches until the slowest peer acknowledged them would fix that,
/// but one dead peer would then hold memory without bound. A time window is what a lagging peer
/// actually needs (its recovery is measured in seconds, whatever the rounds do), and it bounds
/// memory by commit throughput times the window (about 50 MB for 30 s at 8,000 tx/s of 200 B).
/// The round window still applies on an idle chain, where 30 s may be a handful of rounds. A
/// peer that is behind by more than the window cannot fetch the batches anymore and needs state
/// sync.
///
/// The time window is what a peer that is behind may need; a healthy committee needs none of it.
/// So the committer frees a batch's bytes as soon as the round window has passed and every other
/// member has signed a QC at or above the batch's round (`PeerRounds`): none of them can still
/// be fetching it. Only a peer that stops signing makes batches stay for the whole time window.
/// Keeping every batch for the whole time window whatever the peers did would make a node's
/// memory grow by its commit throughput times the window, and every new batch would land in
/// fresh memory the kernel must fault in and zero first: at speed that costs more CPU than the
/// node's own work (see `docs/overload.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcWindow {
    pub rounds: Round,
    pub time: Duration,
    /// The most bytes of committed batches kept for peers: past it, the oldest go even inside
    /// the window. A peer that stops signing (slow, partitioned, or one the QCs keep leaving
    /// out) would otherwise make a node keep everything committed in the time window: at
    /// hundreds of MB/s that is gigabytes, and fresh pages for every new batch cost more CPU
    /// than the batch itself, which kept an overloaded committee slow for good. A peer that
    /// needs a batch gone everywhere catches up by state sync.
    pub bytes: u64,
}

impl GcWindow {
    pub fn new(parameters: &Parameters) -> Self {
        GcWindow {
            rounds: parameters.gc_depth,
            time: Duration::from_millis(parameters.gc_retention_ms),
            bytes: parameters.max_retained_bytes,
        }
    }
}

/// The batches committed recently, each with the block that committed it, remembered for the
/// whole GC window (digests only: a few bytes per batch). The core checks proposals against it
/// (a leader that names an already committed batch gets no vote) and the committer against its
/// own copy (a batch is delivered once, and a batch missing from the store is known to be one it
/// delivered and collected). Both copies forget on the same rule, and the committer deletes a
/// batch's bytes at the latest then (sooner once every peer holds it, or when the bytes kept
/// exceed the window's budget: see `free`), so what one has forgotten the store no longer holds
/// either.
pub struct RecentlyCommitted {
    window: GcWindow,
    /// Batch digest -> digest of the block that committed it.
    by_batch: HashMap<Digest, Digest>,
    /// The committed blocks, oldest first.
    order: VecDeque<CommittedBlock>,
    /// Batches of the block being recorded, until `close_block`.
    open: Vec<Digest>,
    /// How many blocks at the front of `order` had their batches handed out by `free` already.
    freed: usize,
    /// Bytes of the batches not handed out yet (by `free` or `expire`).
    kept_bytes: u64,
    /// Blocks above this round are kept whatever the window says (see `hold_above`).
    floor: Round,
}

/// One committed block's batches, as remembered.
struct CommittedBlock {
    round: Round,
    at: Instant,
    batches: Vec<Digest>,
    /// Their bytes (0 where they are not counted: the core's copy).
    bytes: u64,
}

impl RecentlyCommitted {
    pub fn new(window: GcWindow) -> Self {
        RecentlyCommitted {
            window,
            by_batch: HashMap::new(),
            order: VecDeque::new(),
            open: Vec::new(),
            freed: 0,
            kept_bytes: 0,
            floor: Round::MAX,
        }
    }

    /// Keeps the batches of blocks above `round` however old they are: the application's last
    /// checkpoint is of that round, and a node restarted on its store replays the blocks after
    /// it, which needs their batches. An executor that lags its commits by more than the GC
    /// window otherwise finds them deleted.
    pub fn hold_above(&mut self, round: Round) {
        self.floor = round;
    }

    /// The block that committed `batch`, if it is still remembered.
    pub fn committed_by(&self, batch: &Digest) -> Option<Digest> {
        self.by_batch.get(batch).copied()
    }

    /// Records the batches of a committed block (only those not already recorded: a batch
    /// belongs to the first block that committed it).
    pub fn insert(&mut self, block: &Block) {
        let digest = block.digest();
        for batch in &block.payload {
            self.insert_one(*batch, digest);
        }
        self.close_block(block.round, 0);
    }

    /// Records one batch of the block being committed; false if it was already recorded.
    pub fn insert_one(&mut self, batch: Digest, block: Digest) -> bool {
        match self.by_batch.entry(batch) {
            Entry::Occupied(_) => false,
            Entry::Vacant(entry) => {
                entry.insert(block);
                self.open.push(batch);
                true
            }
        }
    }

    /// Ends the block whose batches `insert_one` recorded, `bytes` in all: they expire with
    /// its round.
    pub fn close_block(&mut self, round: Round, bytes: u64) {
        let batches = std::mem::take(&mut self.open);
        self.kept_bytes += bytes;
        self.order.push_back(CommittedBlock {
            round,
            at: Instant::now(),
            batches,
            bytes,
        });
    }

    /// Forgets the batches committed outside the GC window (more than `rounds` rounds before
    /// `round` and more than `time` ago) and returns those `free` has not returned already: the
    /// committer deletes them from the store.
    pub fn expire(&mut self, round: Round) -> Vec<Digest> {
        let now = Instant::now();
        let mut expired = Vec::new();
        while let Some(front) = self.order.front() {
            let recent_round = front.round.saturating_add(self.window.rounds) >= round;
            let recent_time = now.saturating_duration_since(front.at) < self.window.time;
            if recent_round || recent_time || front.round > self.floor {
                break;
            }
            if let Some(block) = self.order.pop_front() {
                for batch in &block.batches {
                    self.by_batch.remove(batch);
                }
                if self.freed > 0 {
                    self.freed -= 1;
                } else {
                    self.kept_bytes -= block.bytes;
                    expired.extend(block.batches);
                }
            }
        }
        expired
    }

    /// Returns, once each, the batches (still remembered) that may go before the window ends:
    /// those of blocks outside the round window that every peer holds (round at most
    /// `held_by_all`, see `PeerRounds`), as no peer can still need them from us; and, oldest
    /// first, those over the window's byte budget.
    pub fn free(&mut self, round: Round, held_by_all: Round) -> Vec<Digest> {
        let mut freed = Vec::new();
        while let Some(block) = self.order.get(self.freed) {
            if block.round > self.floor {
                break;
            }
            let held = block.round.saturating_add(self.window.rounds) < round
                && block.round <= held_by_all;
            if !held && self.kept_bytes <= self.window.bytes {
                break;
            }
            self.kept_bytes -= block.bytes;
            freed.extend_from_slice(&block.batches);
            self.freed += 1;
        }
        freed
    }
}

pub struct Committer {
    store: BatchStore,
    rx_commit: mpsc::Receiver<ToCommitter>,
    tx_output: MeteredSender<CommittedBatch>,
    metrics: Arc<ConsensusMetrics>,
    /// Batches delivered and not yet garbage-collected.
    delivered: RecentlyCommitted,
    /// The round up to which every peer holds the committed chain (see `PeerRounds`).
    held_by_all: watch::Receiver<Round>,
    /// Counts the bytes handed out, against what the application applied.
    progress: Arc<PipelineProgress>,
    /// The application's latest checkpoint: batches after it are kept (see `hold_above`).
    /// `None`: an application that never checkpoints (tests of the committer alone).
    checkpoints: Option<CheckpointSlot>,
    /// Where a batch the committer cannot read stops the node (see `FatalError::LostBatch`).
    tx_fatal: watch::Sender<Option<FatalError>>,
}

/// What the committer needs besides its channels.
pub struct CommitterLinks {
    pub held_by_all: watch::Receiver<Round>,
    pub progress: Arc<PipelineProgress>,
    pub checkpoints: Option<CheckpointSlot>,
    pub tx_fatal: watch::Sender<Option<FatalError>>,
}

impl Committer {
    pub fn spawn(
        store: Store,
        window: GcWindow,
        rx_commit: mpsc::Receiver<ToCommitter>,
        tx_output: MeteredSender<CommittedBatch>,
        metrics: Arc<ConsensusMetrics>,
        links: CommitterLinks,
    ) {
        let committer = Committer {
            store: store.batches(),
            rx_commit,
            tx_output,
            metrics,
            delivered: RecentlyCommitted::new(window),
            held_by_all: links.held_by_all,
            progress: links.progress,
            checkpoints: links.checkpoints,
            tx_fatal: links.tx_fatal,
        };
        tokio::spawn(committer.run());
    }

    async fn run(mut self) {
        while let Some(input) = self.rx_commit.recv().await {
            let block = match input {
                ToCommitter::Commit(block) => block,
                ToCommitter::Skipped(block) => {
                    self.skip(&block);
                    continue;
                }
            };
            let digest = block.digest();
            // Each batch leaves once the next one is ready, so the last can carry `last_of_block`.
            let mut ready: Option<CommittedBatch> = None;
            // Bytes of the batches delivered for this block, for the window's budget.
            let mut block_bytes = 0;
            for batch in &block.payload {
                // Delivered once: by an earlier block, or earlier in this one. The core rejects
                // such proposals; this guards blocks it accepted before it knew (a node that
                // catches up checks against what it has committed so far).
                if !self.delivered.insert_one(*batch, digest) {
                    warn!(
                        "batch {batch} of {:?} was already committed; skipped",
                        block
                    );
                    continue;
                }
                // Never `notify_read`: the core stores a block only once its batches are
                // stored, and batches are deleted only after they were delivered and the
                // application checkpointed past them. A batch missing here was lost (a machine
                // crash loses batch records not yet written back). Skipping it would make this
                // node's state differ from its peers' for good, and waiting would hang: the node
                // stops, saying why.
                let lost = |reason: String| FatalError::LostBatch {
                    batch: *batch,
                    block: digest,
                    round: block.round,
                    reason,
                };
                let read = match self.store.read(batch) {
                    Ok(Some(bytes)) => Batch::parse_with_digest(bytes, *batch)
                        .map_err(|e| lost(format!("its stored copy is malformed: {e}"))),
                    Ok(None) => Err(lost("it is not in the store".into())),
                    Err(e) => Err(lost(format!("it cannot be read: {e}"))),
                };
                let batch = match read {
                    Ok(batch) => batch,
                    Err(fatal) => {
                        error!("{fatal}");
                        let _ = self.tx_fatal.send(Some(fatal));
                        return;
                    }
                };
                let now = now_ms();
                block_bytes += batch.bytes().len() as u64;
                self.progress.delivered(batch.bytes().len() as u64);
                self.metrics
                    .record_batch_latency(now.saturating_sub(batch.sealed_at_ms()) as f64);
                self.metrics
                    .committed_batches
                    .fetch_add(1, Ordering::Relaxed);
                self.metrics
                    .committed_txs
                    .fetch_add(batch.tx_count() as u64, Ordering::Relaxed);
                self.metrics
                    .committed_bytes
                    .fetch_add(batch.bytes().len() as u64, Ordering::Relaxed);
                let committed = CommittedBatch {
                    round: block.round,
                    block: digest,
                    last_of_block: false,
                    batch,
                    committed_at_ms: now,
                };
                if let Some(previous) = ready.replace(committed) {
                    if self.tx_output.send(previous).await.is_err() {
                        info!("committed-batch consumer is gone; committer stops");
                        return;
                    }
                }
            }
            let last = match ready {
                Some(mut last) => {
                    last.last_of_block = true;
                    last
                }
                None => CommittedBatch::empty_block(block.round, digest, now_ms()),
            };
            if self.tx_output.send(last).await.is_err() {
                info!("committed-batch consumer is gone; committer stops");
                return;
            }
            self.delivered.close_block(block.round, block_bytes);
            self.garbage_collect(block.round);
        }
    }

    /// Records the batches of a block the application got through a checkpoint, for collection.
    fn skip(&mut self, block: &Block) {
        let digest = block.digest();
        for batch in &block.payload {
            self.delivered.insert_one(*batch, digest);
        }
        // Their bytes are not counted: they were never delivered, and reading them to count
        // would cost a read of each from disk.
        self.delivered.close_block(block.round, 0);
        self.garbage_collect(block.round);
    }

    /// Drops batches committed outside the GC window, or outside its round window once every
    /// peer holds them: every stage behind consensus got them already, and lagging peers had
    /// the window to fetch them.
    fn garbage_collect(&mut self, round: Round) {
        if let Some(checkpoints) = &self.checkpoints {
            let floor = checkpoints.latest().map_or(0, |c| c.round);
            self.delivered.hold_above(floor);
        }
        let mut expired = self.delivered.expire(round);
        let held_by_all = *self.held_by_all.borrow();
        expired.extend(self.delivered.free(round, held_by_all));
        if expired.is_empty() {
            return;
        }
        self.store.remove_in_background(&expired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotstuff::messages::tests::{keys, signed_block};
    use crate::hotstuff::messages::QC;
    use crate::mempool::batch::BatchBuilder;
    use crate::metered;
    use std::time::Duration;

    fn batch(tag: &[u8]) -> Batch {
        let mut builder = BatchBuilder::with_capacity(64);
        builder.push(tag);
        builder.seal(1, 64)
    }

    /// A running committer and its ends: blocks in, batches out, and the round every peer holds
    /// (see `PeerRounds`).
    struct Running {
        store: Store,
        tx_commit: mpsc::Sender<ToCommitter>,
        rx_output: metered::MeteredReceiver<CommittedBatch>,
        tx_held: watch::Sender<Round>,
        rx_fatal: watch::Receiver<Option<FatalError>>,
    }

    /// Starts a committer with `window` over a store that holds `batches`.
    async fn committer_over(batches: &[&Batch], window: GcWindow) -> Running {
        committer_with(batches, window, None).await
    }

    /// As `committer_over`, for an application that checkpoints into `checkpoints`.
    async fn committer_with(
        batches: &[&Batch],
        window: GcWindow,
        checkpoints: Option<CheckpointSlot>,
    ) -> Running {
        let store = Store::new();
        for b in batches {
            store
                .batches()
                .write(b.digest(), b.bytes().clone())
                .await
                .expect("write");
        }
        let (tx_commit, rx_commit) = mpsc::channel(8);
        let (tx_output, rx_output, _) = metered::channel(8);
        let (tx_held, rx_held) = watch::channel(0);
        let (tx_fatal, rx_fatal) = watch::channel(None);
        Committer::spawn(
            store.clone(),
            window,
            rx_commit,
            tx_output,
            Arc::new(ConsensusMetrics::default()),
            CommitterLinks {
                held_by_all: rx_held,
                progress: Arc::default(),
                checkpoints,
                tx_fatal,
            },
        );
        Running {
            store,
            tx_commit,
            rx_output,
            tx_held,
            rx_fatal,
        }
    }

    /// A block that names a batch it committed before, or names one batch twice, delivers it
    /// once.
    #[tokio::test]
    async fn never_delivers_a_batch_twice() {
        let keys = keys(4);
        let (old, fresh) = (batch(b"old"), batch(b"fresh"));
        let window = GcWindow {
            rounds: 100,
            time: Duration::from_secs(3_600),
            bytes: u64::MAX,
        };
        let Running {
            tx_commit,
            mut rx_output,
            ..
        } = committer_over(&[&old, &fresh], window).await;
        let block = |round, payload| signed_block(QC::genesis(), None, round, payload, &keys[0]);
        tx_commit
            .send(ToCommitter::Commit(block(1, vec![old.digest()])))
            .await
            .expect("send");
        // A Byzantine leader re-proposes it, and names `fresh` twice.
        tx_commit
            .send(ToCommitter::Commit(block(
                9,
                vec![old.digest(), fresh.digest(), fresh.digest()],
            )))
            .await
            .expect("send");
        tx_commit
            .send(ToCommitter::Commit(block(10, vec![])))
            .await
            .expect("send");
        let mut delivered = Vec::new();
        for _ in 0..3 {
            let committed = tokio::time::timeout(Duration::from_secs(5), rx_output.recv())
                .await
                .expect("delivered in time")
                .expect("committer alive");
            let digest = (!committed.is_empty_block()).then(|| committed.batch.digest());
            delivered.push((committed.round, digest));
        }
        assert_eq!(
            delivered,
            vec![
                (1, Some(old.digest())),
                (9, Some(fresh.digest())),
                (10, None)
            ]
        );
    }

    /// A batch of a committed block that the store lost (a machine crash loses batch records
    /// not yet written back) stops the node with an error naming it. Before, the committer
    /// skipped it ("was collected; skipped") and the node's state silently left its peers'.
    #[tokio::test]
    async fn recovery_a_lost_batch_of_a_committed_block_stops_the_node() {
        let keys = keys(4);
        let (kept, lost) = (batch(b"kept"), batch(b"lost"));
        let window = GcWindow {
            rounds: 100,
            time: Duration::from_secs(3_600),
            bytes: u64::MAX,
        };
        let Running {
            tx_commit,
            mut rx_output,
            mut rx_fatal,
            ..
        } = committer_over(&[&kept], window).await;
        let block = signed_block(
            QC::genesis(),
            None,
            3,
            vec![kept.digest(), lost.digest()],
            &keys[0],
        );
        tx_commit
            .send(ToCommitter::Commit(block.clone()))
            .await
            .expect("send");
        tokio::time::timeout(Duration::from_secs(5), rx_fatal.changed())
            .await
            .expect("stopped in time")
            .expect("sender alive until it reports");
        let fatal = rx_fatal.borrow().clone();
        match fatal {
            Some(FatalError::LostBatch {
                batch, block: b, ..
            }) => {
                assert_eq!((batch, b), (lost.digest(), block.digest()));
            }
            other => panic!("expected a lost batch, got {other:?}"),
        }
        // Nothing of the block is marked complete: the application never checkpoints after it.
        while let Ok(committed) = rx_output.try_recv() {
            assert!(
                !committed.last_of_block,
                "the block was delivered as complete"
            );
        }
    }

    /// Batches of blocks after the application's latest checkpoint stay in the store however
    /// far commits go, even when every peer holds them: a node restarted on its store replays
    /// those blocks from its checkpoint. Before, an executor that lagged its commits by more
    /// than the GC window found them deleted at the restart.
    #[tokio::test]
    async fn recovery_batches_after_the_latest_checkpoint_are_kept() {
        let keys = keys(4);
        let batches: Vec<Batch> = [b"a", b"b", b"c", b"d"]
            .iter()
            .map(|tag| batch(*tag))
            .collect();
        let window = GcWindow {
            rounds: 1,
            time: Duration::ZERO,
            bytes: 0,
        };
        let checkpoints = CheckpointSlot::default();
        let Running {
            store,
            tx_commit,
            mut rx_output,
            tx_held,
            ..
        } = committer_with(
            &batches.iter().collect::<Vec<_>>(),
            window,
            Some(checkpoints.clone()),
        )
        .await;
        tx_held.send(Round::MAX).expect("committer alive");
        let block = |round: Round, i: usize| {
            signed_block(
                QC::genesis(),
                None,
                round,
                vec![batches[i].digest()],
                &keys[0],
            )
        };
        let stored = |i: usize| {
            store
                .batches()
                .contains(&batches[i].digest())
                .expect("read")
        };
        // The application checkpointed after round 1 only: it lags.
        checkpoints.publish(super::super::checkpoint::Checkpoint::new(
            Digest::default(),
            1,
            bytes::Bytes::new(),
        ));
        for (round, i) in [(1, 0), (5, 1), (10, 2), (20, 3)] {
            commit(&tx_commit, &mut rx_output, block(round, i)).await;
        }
        commit(&tx_commit, &mut rx_output, block(30, 3)).await;
        assert!(!stored(0), "batches up to the checkpoint go");
        assert!(stored(1) && stored(2) && stored(3), "batches after it stay");
        // Once the application checkpoints past them, they go.
        checkpoints.publish(super::super::checkpoint::Checkpoint::new(
            Digest::default(),
            10,
            bytes::Bytes::new(),
        ));
        commit(&tx_commit, &mut rx_output, block(31, 3)).await;
        assert!(!stored(1) && !stored(2) && stored(3));
    }

    /// Every committed block reaches the application, also one with nothing to deliver (an idle
    /// chain's block, or one naming only batches committed before): the application checkpoints
    /// after the blocks it sees, so on an idle chain it would otherwise stop checkpointing while
    /// peers prune, and a node restarted then could not rejoin (found by the 60 s leader-kill
    /// run once its clients had stopped).
    #[tokio::test]
    async fn a_block_without_batches_reaches_the_application_as_an_empty_block() {
        let keys = keys(4);
        let a = batch(b"a");
        let window = GcWindow {
            rounds: 100,
            time: Duration::from_secs(3_600),
            bytes: u64::MAX,
        };
        let Running {
            tx_commit,
            mut rx_output,
            ..
        } = committer_over(&[&a], window).await;
        let block = |round, payload| signed_block(QC::genesis(), None, round, payload, &keys[0]);
        let blocks = [
            block(1, vec![a.digest()]),
            block(2, vec![]),
            block(3, vec![a.digest()]),
        ];
        for b in &blocks {
            tx_commit
                .send(ToCommitter::Commit(b.clone()))
                .await
                .expect("send");
        }
        let mut delivered = Vec::new();
        for _ in 0..3 {
            let committed = tokio::time::timeout(Duration::from_secs(5), rx_output.recv())
                .await
                .expect("delivered in time")
                .expect("committer alive");
            delivered.push((
                committed.round,
                committed.block,
                committed.last_of_block,
                committed.batch.tx_count(),
                committed.is_empty_block(),
            ));
        }
        assert_eq!(
            delivered,
            vec![
                (1, blocks[0].digest(), true, 1, false),
                (2, blocks[1].digest(), true, 0, true),
                (3, blocks[2].digest(), true, 0, true),
            ]
        );
    }

    /// The time window is for peers that are behind. When every peer signed a QC at a batch's
    /// round, its bytes go as soon as the round window passed, not after the time window (with
    /// the time window alone a healthy node's memory grows by its throughput times the window, all
    /// of it fresh memory the kernel must zero; see `docs/overload.md`). While a peer is behind,
    /// bytes stay. The time window here is an hour, so nothing below can have
    /// been freed by time.
    #[tokio::test]
    async fn frees_bytes_held_by_every_peer_without_waiting_for_the_time_window() {
        let keys = keys(4);
        let batches: Vec<Batch> = [b"a", b"b", b"c", b"d", b"e"]
            .iter()
            .map(|tag| batch(*tag))
            .collect();
        let window = GcWindow {
            rounds: 1,
            time: Duration::from_secs(3_600),
            bytes: u64::MAX,
        };
        let Running {
            store,
            tx_commit,
            mut rx_output,
            tx_held,
            ..
        } = committer_over(&batches.iter().collect::<Vec<_>>(), window).await;
        let stored = |i: usize| {
            store
                .batches()
                .contains(&batches[i].digest())
                .expect("read")
        };
        // Commits block `round` naming batch `i` and waits for its delivery: the committer
        // handles blocks in turn, so the previous block's garbage collection is done by then.
        let block = |round: Round, i: usize| {
            signed_block(
                QC::genesis(),
                None,
                round,
                vec![batches[i].digest()],
                &keys[0],
            )
        };
        commit(&tx_commit, &mut rx_output, block(1, 0)).await;
        commit(&tx_commit, &mut rx_output, block(3, 1)).await;
        commit(&tx_commit, &mut rx_output, block(4, 2)).await;
        // Block 1 is outside the round window, but no peer signed anything yet: a peer that is
        // behind may still fetch `a` from us.
        assert!(stored(0));
        // Every peer signed a QC of round 1: `a` is theirs already.
        tx_held.send(1).expect("committer alive");
        commit(&tx_commit, &mut rx_output, block(6, 3)).await;
        commit(&tx_commit, &mut rx_output, block(7, 4)).await;
        assert!(!stored(0), "bytes every peer holds were kept");
        // Round 3 is above what every peer holds: `b` stays, and so do the recent ones.
        assert!(stored(1) && stored(2) && stored(3) && stored(4));
    }

    /// Sends `block` to the committer and waits for its delivery: the committer handles blocks in
    /// turn, so the previous block's garbage collection is done by then.
    async fn commit(
        tx: &mpsc::Sender<ToCommitter>,
        rx: &mut metered::MeteredReceiver<CommittedBatch>,
        block: Block,
    ) {
        let round = block.round;
        tx.send(ToCommitter::Commit(block)).await.expect("send");
        let committed = rx.recv().await.expect("committer alive");
        assert_eq!(committed.round, round);
    }

    /// A peer that stops signing (or that the QCs keep leaving out) must not make a node keep
    /// every committed batch for the whole time window: past the byte budget, the oldest go.
    #[tokio::test]
    async fn committed_bytes_kept_for_peers_stay_within_the_budget() {
        let keys = keys(4);
        let batches: Vec<Batch> = [b"a", b"b", b"c", b"d"]
            .iter()
            .map(|tag| batch(*tag))
            .collect();
        let size = batches[0].bytes().len() as u64;
        let window = GcWindow {
            rounds: 100,
            time: Duration::from_secs(3_600),
            bytes: 2 * size,
        };
        let Running {
            store,
            tx_commit,
            mut rx_output,
            ..
        } = committer_over(&batches.iter().collect::<Vec<_>>(), window).await;
        let block =
            |round: Round, payload| signed_block(QC::genesis(), None, round, payload, &keys[0]);
        for (i, batch) in batches.iter().enumerate() {
            commit(
                &tx_commit,
                &mut rx_output,
                block(i as Round + 1, vec![batch.digest()]),
            )
            .await;
        }
        // An empty block, so the last one's garbage collection is done.
        commit(&tx_commit, &mut rx_output, block(5, vec![])).await;
        // No peer holds anything and the window is long: only the budget freed the oldest.
        let stored: Vec<bool> = batches
            .iter()
            .map(|b| store.batches().contains(&b.digest()).expect("read"))
            .collect();
        assert_eq!(stored, vec![false, false, true, true]);
    }

    #[test]
    fn a_batch_freed_early_is_not_returned_again_when_it_expires() {
        let keys = keys(4);
        let window = GcWindow {
            rounds: 1,
            time: Duration::ZERO,
            bytes: u64::MAX,
        };
        let mut recent = RecentlyCommitted::new(window);
        let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
        recent.insert(&signed_block(QC::genesis(), None, 1, vec![a], &keys[0]));
        recent.insert(&signed_block(QC::genesis(), None, 2, vec![b], &keys[1]));
        assert_eq!(recent.free(5, 1), vec![a]);
        assert_eq!(recent.free(5, 1), Vec::<Digest>::new());
        // Both leave the record; only `b` still has bytes to delete.
        assert_eq!(recent.expire(5), vec![b]);
        assert_eq!(recent.committed_by(&a), None);
        assert_eq!(recent.free(9, 9), Vec::<Digest>::new());
    }

    /// A checkpoint is taken after a block's last batch, so the flag must be on the last batch
    /// delivered of each block, even when the block's last named batch is skipped.
    #[tokio::test]
    async fn the_last_delivered_batch_of_a_block_says_so() {
        let keys = keys(4);
        let [a, b, c] = [batch(b"a"), batch(b"b"), batch(b"c")];
        let window = GcWindow {
            rounds: 100,
            time: Duration::from_secs(3_600),
            bytes: u64::MAX,
        };
        let Running {
            tx_commit,
            mut rx_output,
            ..
        } = committer_over(&[&a, &b, &c], window).await;
        let block = |round, payload| signed_block(QC::genesis(), None, round, payload, &keys[0]);
        let first = block(1, vec![a.digest(), b.digest()]);
        // `a` again at the end: skipped, so `c` is the last delivered.
        let second = block(2, vec![c.digest(), a.digest()]);
        tx_commit
            .send(ToCommitter::Commit(first.clone()))
            .await
            .expect("send");
        tx_commit
            .send(ToCommitter::Commit(second.clone()))
            .await
            .expect("send");
        let mut delivered = Vec::new();
        for _ in 0..3 {
            let committed = tokio::time::timeout(Duration::from_secs(5), rx_output.recv())
                .await
                .expect("delivered in time")
                .expect("committer alive");
            delivered.push((
                committed.batch.digest(),
                committed.block,
                committed.last_of_block,
            ));
        }
        assert_eq!(
            delivered,
            vec![
                (a.digest(), first.digest(), false),
                (b.digest(), first.digest(), true),
                (c.digest(), second.digest(), true),
            ]
        );
    }
}
