//! One instance of a member: a real consensus core with its helper and committer, senders
//! tapped into the simulated network, and a store that outlives it (a restart starts a new core
//! on the same store, as a process restarted on its durable store does). Batches come from a
//! stand-in mempool that stores every batch at every instance at once (`Batches`), so the run
//! tests consensus, not batch dissemination.

use super::network::{Inbox, Sent, Source};
use crate::commit::committer::{Committer, CommitterLinks};
use crate::core::{Core, CoreChannels, CoreSenders};
use crate::metrics::ConsensusMetrics;
use crate::payload::gc::GcWindow;
use crate::payload::holders::PeerRounds;
use crate::sync::direct_commits::DirectCommits;
use crate::sync::helper::Helper;
use crate::FatalError;
use batch::{BatchBuilder, CommittedBatch};
use checkpoint::{CheckpointSlot, PipelineProgress};
use config::{Committee, Parameters, Round};
use crypto::{Digest, KeyPair, SignatureService};
use mempool::ConsensusMempoolMessage;
use network::{ReliableSender, SimpleSender, Tap};
use plumbing::{budgeted, metered};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// A block an instance's committer delivered (its last batch, or the empty block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub round: Round,
    pub block: Digest,
    /// The batches the block delivered.
    pub batches: Vec<Digest>,
}

/// What one life of an instance delivered, in order.
pub type Deliveries = Arc<Mutex<Vec<Delivered>>>;

/// A running life of an instance.
struct Life {
    stop: watch::Sender<bool>,
    core: JoinHandle<Option<Core>>,
    alive: Arc<AtomicBool>,
    metrics: Arc<ConsensusMetrics>,
    fatal: watch::Receiver<Option<FatalError>>,
    tx_digests: mpsc::Sender<Digest>,
}

pub struct Instance {
    pub index: usize,
    keys: KeyPair,
    store: Store,
    life: Option<Life>,
    /// What each life delivered.
    pub lives: Vec<Deliveries>,
    /// Errors a life stopped on.
    pub fatal: Vec<FatalError>,
}

/// Everything an instance needs from the run to start a life.
pub struct Wiring {
    pub committee: Committee,
    pub parameters: Parameters,
    pub tx_sent: mpsc::UnboundedSender<Sent>,
    pub inboxes: Arc<Mutex<Vec<Option<Inbox>>>>,
}

/// A sender whose messages go to the simulated network, tagged with who sent them, while
/// `alive`.
fn tap(wiring: &Wiring, from: usize, source: Source, alive: &Arc<AtomicBool>) -> Tap {
    let tx = wiring.tx_sent.clone();
    let alive = alive.clone();
    Arc::new(move |to, bytes| {
        if alive.load(Ordering::Relaxed) {
            let _ = tx.send(Sent {
                from,
                source,
                to,
                bytes,
            });
        }
    })
}

impl Instance {
    pub fn new(index: usize, keys: KeyPair) -> Self {
        Instance {
            index,
            keys,
            store: Store::new(),
            life: None,
            lives: Vec::new(),
            fatal: Vec::new(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn is_running(&self) -> bool {
        self.life.is_some()
    }

    /// Starts a life on the instance's store.
    pub fn start(&mut self, wiring: &Wiring) {
        let parameters = wiring.parameters.clone();
        let capacity = parameters.channel_capacity;
        let alive = Arc::new(AtomicBool::new(true));
        let (tx_message, rx_message, _) =
            budgeted::channel(capacity, parameters.queue_budget_bytes());
        let (tx_helper, rx_helper) = mpsc::channel(capacity);
        let (tx_loopback, rx_loopback) = mpsc::channel(capacity);
        let (tx_commit, rx_commit) = mpsc::channel(capacity);
        let (tx_digests, rx_digests) = mpsc::channel(capacity);
        let (tx_mempool, rx_mempool) = mpsc::channel(capacity);
        let (tx_fatal, rx_fatal) = watch::channel(None);
        let (tx_output, rx_output, _) = metered::channel(capacity);
        let (tx_restore, _rx_restore) = std::sync::mpsc::channel();
        let metrics = Arc::new(ConsensusMetrics::default());
        let name = self.keys.name;
        let checkpoints = CheckpointSlot::kept_in(&self.store);
        let progress = Arc::new(PipelineProgress::default());
        let (peer_rounds, held_by_all) = PeerRounds::new(name, &wiring.committee);
        let direct_commits = DirectCommits::default();
        let sync_sender = || SimpleSender::tapped(tap(wiring, self.index, Source::Sync, &alive));

        Helper::spawn(
            name,
            wiring.committee.clone(),
            self.store.clone(),
            checkpoints.clone(),
            direct_commits.clone(),
            rx_helper,
            sync_sender(),
        );
        Committer::spawn(
            self.store.clone(),
            GcWindow::new(&parameters),
            rx_commit,
            tx_output,
            metrics.clone(),
            CommitterLinks {
                held_by_all,
                progress: progress.clone(),
                checkpoints: Some(checkpoints.clone()),
                tx_fatal: tx_fatal.clone(),
                tx_mempool: tx_mempool.clone(),
                patience: Duration::from_millis(parameters.sync_retry_delay),
            },
        );
        let deliveries = Deliveries::default();
        tokio::spawn(collect(rx_output, deliveries.clone()));
        // Every batch is everywhere already; the core's requests need no answer.
        tokio::spawn(drain(rx_mempool));
        let core = Core::new(
            name,
            wiring.committee.clone(),
            parameters,
            self.store.clone(),
            SignatureService::new(self.keys.secret.clone()),
            CoreChannels {
                rx_message,
                rx_loopback,
                tx_loopback,
                rx_digests,
                tx_commit,
                tx_mempool,
                quota: mempool::AuthorQuota::new(
                    wiring.parameters.max_uncommitted_batches_per_author,
                    wiring.parameters.gc_depth,
                ),
                tx_fatal,
                senders: CoreSenders {
                    broadcast: ReliableSender::tapped(tap(
                        wiring,
                        self.index,
                        Source::Core,
                        &alive,
                    )),
                    sync: sync_sender(),
                },
                tx_restore,
                checkpoints,
                progress,
                peer_rounds,
                direct_commits,
            },
            metrics.clone(),
        );
        let (stop, rx_stop) = watch::channel(false);
        let core = match core {
            Ok(core) => tokio::spawn(drive(core, rx_stop)),
            Err(e) => panic!("instance {} cannot start: {e}", self.index),
        };
        if let Ok(mut inboxes) = wiring.inboxes.lock() {
            inboxes[self.index] = Some(Inbox {
                core: tx_message,
                helper: tx_helper,
            });
        }
        self.lives.push(deliveries);
        self.life = Some(Life {
            stop,
            core,
            alive,
            metrics,
            fatal: rx_fatal,
            tx_digests,
        });
    }

    /// Stops the running life (a crash: nothing it still meant to send leaves) and returns its
    /// core, as it was.
    pub async fn stop(&mut self, wiring: &Wiring) -> Option<Core> {
        let life = self.life.take()?;
        life.alive.store(false, Ordering::Relaxed);
        if let Ok(mut inboxes) = wiring.inboxes.lock() {
            inboxes[self.index] = None;
        }
        let _ = life.stop.send(true);
        if let Some(fatal) = life.fatal.borrow().clone() {
            self.fatal.push(fatal);
        }
        life.core.await.ok().flatten()
    }

    /// The round the running life is in.
    pub fn round(&self) -> Round {
        self.life
            .as_ref()
            .map_or(0, |life| life.metrics.round.load(Ordering::Relaxed))
    }

    /// The highest round the running life committed.
    pub fn committed_round(&self) -> Round {
        self.lives
            .last()
            .filter(|_| self.life.is_some())
            .and_then(|life| life.lock().ok().and_then(|d| d.last().map(|d| d.round)))
            .unwrap_or(0)
    }

    /// Hands the running life a batch digest of its mempool (a quorum holds the batch).
    pub fn offer(&self, digest: Digest) {
        if let Some(life) = &self.life {
            let _ = life.tx_digests.try_send(digest);
        }
    }
}

/// Runs `core` until told to stop (or it stops itself), then hands it back.
async fn drive(mut core: Core, mut stop: watch::Receiver<bool>) -> Option<Core> {
    if core.start().await.is_break() {
        return Some(core);
    }
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => return Some(core),
            input = core.next_input() => {
                let Some(input) = input else { return Some(core) };
                if core.handle(input).await.is_break() {
                    return Some(core);
                }
            }
        }
    }
}

async fn collect(mut rx: metered::MeteredReceiver<CommittedBatch>, deliveries: Deliveries) {
    let mut batches = Vec::new();
    while let Some(committed) = rx.recv().await {
        if !committed.batch.bytes().is_empty() && committed.batch.tx_count() > 0 {
            batches.push(committed.batch.digest());
        }
        if committed.last_of_block {
            if let Ok(mut deliveries) = deliveries.lock() {
                deliveries.push(Delivered {
                    round: committed.round,
                    block: committed.block,
                    batches: std::mem::take(&mut batches),
                });
            }
        }
    }
}

async fn drain(mut rx: mpsc::Receiver<ConsensusMempoolMessage>) {
    while rx.recv().await.is_some() {}
}

/// The stand-in mempool's batches: batch `number` of member `member`, the same bytes whichever
/// of its instances seals it (a Byzantine member's twins propose the same batches).
pub fn batch(member: usize, number: u64) -> batch::Batch {
    let mut builder = BatchBuilder::with_capacity(64);
    builder.push(&[&(member as u64).to_le_bytes()[..], &number.to_le_bytes()].concat());
    builder.seal(0, 64)
}
