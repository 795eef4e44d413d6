//! Fetches the missing ancestors of a block.
//!
//! When a block's parent is not in the store, the block is parked and the parent is requested
//! from the block's author and the signers of the block's QC (see `SyncWorker::holders`). If it
//! has not arrived soon (a tenth of `sync_retry_delay`, at most a second), the request goes to
//! every other authority, and again after twice as long each time, up to `sync_retry_delay`: a
//! request lost to a partition or a dropped message then costs a fraction of a second, not the
//! whole delay. When the parent is stored (it goes through the core like any proposal), the
//! parked block is looped back into the core.
//!
//! Parked blocks are bounded: at most `max_pending_sync_blocks` at once (more are dropped), and
//! each for at most `PARK_RETRIES` retry delays (a parent that never comes, say because peers
//! pruned it, must not hold a block forever). A dropped block is not lost for good: the next
//! block that extends it names it as its parent and it is fetched then.

use crate::messages::{Block, QC};
use crate::wire;
use crate::wire::ConsensusMessage;
use config::{Committee, Round};
use crypto::{Digest, Hash, PublicKey};
use futures::stream::{FuturesUnordered, StreamExt};
use network::SimpleSender;
use plumbing::clock;
use plumbing::clock::{interval, Instant};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use store::{BlockStore, Store, StoreError};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tracing::{debug, warn};

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("stored block {0} does not decode: {1}")]
    Corrupt(Digest, String),
}

/// The core's handle: answers from the store, or parks the block and requests its parent.
/// A block stays parked for at most this many `sync_retry_delay`s.
const PARK_RETRIES: u32 = 6;

/// Bounds of the first retry (see the module's comment).
const MIN_FIRST_RETRY: Duration = Duration::from_millis(10);
const MAX_FIRST_RETRY: Duration = Duration::from_secs(1);

/// How often due retries are looked for, at most.
const MAX_TIMER_RESOLUTION: Duration = Duration::from_millis(250);

/// How many blocks are parked, and how many were refused because too many were.
#[derive(Default)]
pub struct SyncCounters {
    pub parked: AtomicUsize,
    pub refused: AtomicU64,
}

pub struct Synchronizer {
    store: BlockStore,
    /// Blocks to park, with the round of our last commit (peers send ancestors down to it).
    tx_inner: mpsc::Sender<(Block, Round)>,
    /// The round of our last commit.
    committed: Round,
    /// The checkpointed block this node adopted (round, digest), if any: its ancestors are
    /// neither here nor needed, so its parent reads as genesis (see `set_root`).
    root: Option<(Round, Digest)>,
    /// Read by tests only so far; what a metric of the synchronizer would export.
    #[cfg_attr(not(test), allow(dead_code))]
    counters: Arc<SyncCounters>,
}

impl Synchronizer {
    pub fn spawn(
        name: PublicKey,
        committee: Committee,
        store: Store,
        sync_retry_delay: Duration,
        max_pending: usize,
        tx_loopback: mpsc::Sender<Block>,
        network: SimpleSender,
    ) -> Self {
        let store = store.blocks();
        let (tx_inner, rx_inner) = mpsc::channel(1_000);
        let counters = Arc::new(SyncCounters::default());
        let worker = SyncWorker {
            name,
            committee,
            store: store.clone(),
            sync_retry_delay,
            rx_inner,
            tx_loopback,
            network,
            pending: HashMap::new(),
            parked: HashSet::new(),
            max_pending: max_pending.max(1),
            counters: counters.clone(),
        };
        tokio::spawn(worker.run());
        Synchronizer {
            store,
            tx_inner,
            committed: 0,
            root: None,
            counters,
        }
    }

    fn read(&self, digest: &Digest) -> Result<Option<Block>, SyncError> {
        match self.store.read(digest)? {
            None => Ok(None),
            Some(bytes) => wire::decode_block(&bytes)
                .map(Some)
                .map_err(|e| SyncError::Corrupt(*digest, e.to_string())),
        }
    }

    /// How many blocks are parked, and how many were refused.
    #[cfg(test)]
    pub(crate) fn counters(&self) -> &SyncCounters {
        &self.counters
    }

    /// Makes `root` (a committed block adopted with its state from a checkpoint, and stored by
    /// the caller) the start of this node's chain: its parent reads as genesis. The chain below
    /// it was executed into the checkpoint's state and peers may have deleted it; the commit rule
    /// never reads it (nothing at or below the root commits again).
    pub fn set_root(&mut self, root: &Block) {
        self.root = Some((root.round, root.digest()));
    }

    /// Round `round` committed: blocks at or below it are not asked of peers any longer.
    pub fn committed(&mut self, round: Round) {
        self.committed = self.committed.max(round);
    }

    fn is_root(&self, block: &Block) -> bool {
        self.root
            .is_some_and(|(round, digest)| block.round == round && block.digest() == digest)
    }

    /// The parent of `block`, or `None` if it is being fetched (the block will come back).
    pub async fn get_parent_block(&mut self, block: &Block) -> Result<Option<Block>, SyncError> {
        if block.qc.is_genesis() || self.is_root(block) {
            return Ok(Some(Block::genesis()));
        }
        if let Some(parent) = self.read(block.parent())? {
            return Ok(Some(parent));
        }
        let _ = self.tx_inner.send((block.clone(), self.committed)).await;
        Ok(None)
    }

    /// The parent `b1` and grandparent `b0` of `block`, the two ancestors the commit rule reads.
    pub async fn get_ancestors(
        &mut self,
        block: &Block,
    ) -> Result<Option<(Block, Block)>, SyncError> {
        let Some(b1) = self.get_parent_block(block).await? else {
            return Ok(None);
        };
        let Some(b0) = self.get_parent_block(&b1).await? else {
            return Ok(None);
        };
        Ok(Some((b0, b1)))
    }

    /// Reads a stored block (for the commit walk).
    pub fn stored_block(&self, digest: &Digest) -> Result<Option<Block>, SyncError> {
        if *digest == QC::genesis().hash {
            return Ok(Some(Block::genesis()));
        }
        self.read(digest)
    }
}

struct Pending {
    round: Round,
    /// Our last commit when it was first asked for: ancestors above it come with it.
    floor: Round,
    /// When it was last asked for, and how many times so far.
    requested_at: Instant,
    attempts: u32,
    /// Parked blocks waiting for this parent.
    waiters: usize,
}

struct SyncWorker {
    name: PublicKey,
    committee: Committee,
    store: BlockStore,
    sync_retry_delay: Duration,
    rx_inner: mpsc::Receiver<(Block, Round)>,
    tx_loopback: mpsc::Sender<Block>,
    network: SimpleSender,
    /// Parent digest -> when it was first requested.
    pending: HashMap<Digest, Pending>,
    /// The blocks parked, each once however many copies of it arrive (from its proposer, and
    /// from every peer that answers a request for it).
    parked: HashSet<Digest>,
    /// Most blocks parked at once (`Parameters::max_pending_sync_blocks`).
    max_pending: usize,
    counters: Arc<SyncCounters>,
}

/// The wait after the `attempts`-th request of a parent: `first` after the first, then twice as
/// long after each, at most `max` (never below `first`).
fn delay_after(attempts: u32, first: Duration, max: Duration) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    first.saturating_mul(1 << doublings).min(max.max(first))
}

impl SyncWorker {
    /// The wait before the first retry.
    fn first_retry(&self) -> Duration {
        (self.sync_retry_delay / 10).clamp(MIN_FIRST_RETRY, MAX_FIRST_RETRY)
    }

    async fn request(&mut self, parent: Digest, floor: Round, to: Vec<std::net::SocketAddr>) {
        let message = ConsensusMessage::SyncRequest(parent, self.name, floor);
        match wire::encode(&message) {
            Ok(bytes) => self.network.broadcast(to, bytes).await,
            Err(e) => warn!("cannot encode a sync request: {e}"),
        }
    }

    /// Who should have the parent of `block`: its author, and every signer of the QC that
    /// certifies the parent (a replica votes only for a block it stored). Asking them all at once
    /// costs a few duplicate replies, but a withholding author no longer delays us by
    /// `sync_retry_delay`; the retry then goes to everyone.
    fn holders(&self, block: &Block) -> Vec<std::net::SocketAddr> {
        let mut names: Vec<PublicKey> = std::iter::once(block.author)
            .chain(block.qc.votes.iter().map(|(name, _)| *name))
            .filter(|name| *name != self.name)
            .collect();
        names.sort();
        names.dedup();
        names
            .iter()
            .filter_map(|name| self.committee.authority(name))
            .map(|authority| authority.consensus_address)
            .collect()
    }

    async fn run(mut self) {
        let mut waiting = FuturesUnordered::new();
        let first = self.first_retry();
        let mut retry = interval((first / 4).clamp(Duration::from_millis(1), MAX_TIMER_RESOLUTION));
        retry.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            // In this order, not a random pick among ready branches: a run then replays
            // exactly (`twins`), and none of the branches can starve the others for long (each
            // is fed by the core's bounded traffic or a timer).
            tokio::select! {
                biased;
                Some((block, floor)) = self.rx_inner.recv() => {
                    let digest = block.digest();
                    if self.parked.contains(&digest) {
                        continue;
                    }
                    if self.counters.parked.load(Ordering::Relaxed) >= self.max_pending {
                        let refused = self.counters.refused.fetch_add(1, Ordering::Relaxed) + 1;
                        if refused.is_power_of_two() {
                            warn!(refused, "too many blocks wait for their parent; dropping {:?}", block);
                        }
                        continue;
                    }
                    let parent = *block.parent();
                    match self.pending.entry(parent) {
                        // The parent is here already, parked itself: it is stored once its own
                        // ancestors are, and asking peers for it would only fetch it again.
                        Entry::Vacant(_) if self.parked.contains(&parent) => {}
                        Entry::Occupied(mut entry) => entry.get_mut().waiters += 1,
                        Entry::Vacant(entry) => {
                            debug!("requesting parent {} of {:?}", parent, block);
                            entry.insert(Pending {
                                round: block.round,
                                floor,
                                requested_at: Instant::now(),
                                attempts: 1,
                                waiters: 1,
                            });
                            let holders = self.holders(&block);
                            self.request(parent, floor, holders).await;
                        }
                    }
                    self.parked.insert(digest);
                    self.counters.parked.fetch_add(1, Ordering::Relaxed);
                    let store = self.store.clone();
                    let patience = self.sync_retry_delay.saturating_mul(PARK_RETRIES);
                    waiting.push(async move {
                        let arrived = clock::timeout(patience, store.notify_read(parent))
                            .await
                            .is_ok_and(|read| read.is_ok());
                        (parent, block, arrived)
                    });
                },
                Some((parent, block, arrived)) = waiting.next() => {
                    self.counters.parked.fetch_sub(1, Ordering::Relaxed);
                    self.parked.remove(&block.digest());
                    if arrived {
                        self.pending.remove(&parent);
                        if self.tx_loopback.send(block).await.is_err() {
                            return;
                        }
                    } else {
                        debug!("gave up waiting for parent {} of {:?}", parent, block);
                        if let Entry::Occupied(mut entry) = self.pending.entry(parent) {
                            entry.get_mut().waiters -= 1;
                            if entry.get().waiters == 0 {
                                entry.remove();
                            }
                        }
                        // The timed-out wait left a closed waiter in the store.
                        self.store.prune_waiters();
                    }
                },
                _ = retry.tick() => {
                    let now = Instant::now();
                    let max = self.sync_retry_delay;
                    let late: Vec<Digest> = self.pending.iter()
                        .filter(|(_, p)| {
                            now.duration_since(p.requested_at) >= delay_after(p.attempts, first, max)
                        })
                        .map(|(d, _)| *d)
                        .collect();
                    let everyone: Vec<_> = self.committee.others(&self.name, |a| a.consensus_address)
                        .into_iter().map(|(_, a)| a).collect();
                    for parent in late {
                        let Some(p) = self.pending.get_mut(&parent) else { continue };
                        debug!("retrying sync of {} (round > {})", parent, p.round);
                        p.requested_at = now;
                        p.attempts = p.attempts.saturating_add(1);
                        let floor = p.floor;
                        self.request(parent, floor, everyone.clone()).await;
                    }
                },
                else => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys, qc, signed_block};
    use crypto::KeyPair;
    use network::codec;
    use tokio::net::TcpListener;
    use tokio_util::codec::Framed;

    /// Hands the synchronizer a block by `keys[1]` whose QC (by `keys[1..]`) certifies
    /// `parent`, which it does not hold: it has none to give yet.
    async fn ask_for_missing_parent(
        synchronizer: &mut Synchronizer,
        parent: Digest,
        keys: &[KeyPair],
    ) {
        let child = signed_block(qc(parent, 1, &keys[1..]), None, 2, vec![], &keys[1]);
        assert!(synchronizer
            .get_parent_block(&child)
            .await
            .expect("no error")
            .is_none());
    }

    /// The author of a block whose parent we lack may be the one withholding
    /// it. The parent must be asked of peers known to hold it (the signers of the QC that
    /// certifies it) at once, not only after `sync_retry_delay` (10 s by default).
    #[tokio::test]
    async fn byzantine_withheld_parent_is_fetched_from_other_peers_promptly() {
        let keys = keys(4);
        let mut committee = committee(&keys);
        let mut listeners = Vec::new();
        for k in &keys[1..] {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let address = listener.local_addr().expect("address");
            if let Some(authority) = committee.authorities.get_mut(&k.name) {
                authority.consensus_address = address;
            }
            listeners.push(listener);
        }
        let (tx_loopback, _rx_loopback) = mpsc::channel(10);
        let mut synchronizer = Synchronizer::spawn(
            keys[0].name,
            committee,
            Store::new(),
            Duration::from_secs(10),
            1_000,
            tx_loopback,
            SimpleSender::new(),
        );
        // keys[1] authored the child and withholds the parent; keys[1..4] certified the parent.
        let parent = Digest::of(b"parent");
        ask_for_missing_parent(&mut synchronizer, parent, &keys).await;

        let honest_peers = listeners.split_off(1);
        let asked = honest_peers.into_iter().map(|listener| async move {
            let (stream, _) = listener.accept().await.ok()?;
            let mut frames = Framed::new(stream, codec(1 << 20));
            let frame = frames.next().await?.ok()?;
            match wire::decode(&frame).ok()? {
                ConsensusMessage::SyncRequest(digest, _, _) if digest == parent => Some(()),
                _ => None,
            }
        });
        let first =
            futures::future::select_ok(asked.map(|f| Box::pin(async move { f.await.ok_or(()) })));
        tokio::time::timeout(Duration::from_secs(2), first)
            .await
            .expect("a peer other than the author is asked within 2 s")
            .expect("a sync request for the parent");
    }

    /// A block whose parent is missing must not stay parked, with a future and a store waiter,
    /// until the parent comes, which may be never. A Byzantine leader signs
    /// as many blocks for its round as it likes; the table must stay bounded.
    #[tokio::test]
    async fn byzantine_parked_blocks_are_bounded() {
        let keys = keys(4);
        let committee = committee(&keys);
        let (tx_loopback, _rx_loopback) = mpsc::channel(10);
        let store = Store::new();
        let mut synchronizer = Synchronizer::spawn(
            keys[0].name,
            committee,
            store.clone(),
            Duration::from_secs(10),
            10,
            tx_loopback,
            SimpleSender::new(),
        );
        for i in 0..100u32 {
            ask_for_missing_parent(&mut synchronizer, Digest::of(&i.to_be_bytes()), &keys).await;
        }
        let counters = synchronizer.counters.clone();
        tokio::time::timeout(Duration::from_secs(5), async {
            while counters.parked.load(Ordering::Relaxed)
                + (counters.refused.load(Ordering::Relaxed) as usize)
                < 100
            {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every block handled in time");
        assert_eq!(counters.parked.load(Ordering::Relaxed), 10);
        assert_eq!(counters.refused.load(Ordering::Relaxed), 90);
        assert!(store.blocks().waiting() <= 10);
    }

    /// A committee of `keys` whose members other than the first listen on loopback and report
    /// every sync request they receive, with the index of the member that got it.
    async fn listening_peers(
        keys: &[KeyPair],
    ) -> (Committee, mpsc::UnboundedReceiver<(usize, Digest)>) {
        let mut committee = committee(keys);
        let (tx_requests, requests) = mpsc::unbounded_channel();
        for (i, k) in keys.iter().enumerate().skip(1) {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            if let Some(authority) = committee.authorities.get_mut(&k.name) {
                authority.consensus_address = listener.local_addr().expect("address");
            }
            let tx = tx_requests.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let mut frames = Framed::new(stream, codec(1 << 20));
                        while let Some(Ok(frame)) = frames.next().await {
                            if let Ok(ConsensusMessage::SyncRequest(digest, _, _)) =
                                wire::decode(&frame)
                            {
                                let _ = tx.send((i, digest));
                            }
                        }
                    });
                }
            });
        }
        (committee, requests)
    }

    /// A request for a missing parent that is lost (a partition, a dropped message, a holder
    /// that does not answer) is asked again of every authority long before `sync_retry_delay`
    /// (10 s by default), then less and less often. Before, the first retry waited the whole
    /// delay: the Twins generator found nodes that missed one block in a partition stall for
    /// 10 to 20 s after it healed.
    #[tokio::test]
    async fn a_lost_parent_request_is_asked_of_everyone_again_soon() {
        let keys = keys(4);
        let (committee, mut requests) = listening_peers(&keys).await;
        let (tx_loopback, _rx_loopback) = mpsc::channel(10);
        let mut synchronizer = Synchronizer::spawn(
            keys[0].name,
            committee,
            Store::new(),
            Duration::from_secs(10),
            1_000,
            tx_loopback,
            SimpleSender::new(),
        );
        let parent = Digest::of(b"parent");
        let started = Instant::now();
        ask_for_missing_parent(&mut synchronizer, parent, &keys).await;
        // Asked of its holders (keys 1 to 3) at once; nobody answers.
        let mut asked = Vec::new();
        while asked.len() < 6 {
            let (peer, digest) = tokio::time::timeout(Duration::from_secs(5), requests.recv())
                .await
                .expect("a request within 5 s")
                .expect("listeners alive");
            assert_eq!(digest, parent);
            asked.push(peer);
        }
        asked.sort();
        assert_eq!(asked, vec![1, 1, 2, 2, 3, 3], "asked again of everyone");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    /// Blocks that arrive while their parent waits parked (a node catching up gets new
    /// proposals, each extending the one before, while it fetches what they extend) wait for it
    /// without asking peers for it: it is here, and stored once its own ancestors are. Before,
    /// each of them asked every holder for its parent, whose answers came back as blocks
    /// already parked; a node far behind spent its peers' reply allowance on them and never
    /// caught up (found by the Twins generator).
    #[tokio::test]
    async fn a_parent_parked_here_is_not_asked_for() {
        let keys = keys(4);
        let (committee, mut requests) = listening_peers(&keys).await;
        let (tx_loopback, _rx_loopback) = mpsc::channel(10);
        let mut synchronizer = Synchronizer::spawn(
            keys[0].name,
            committee,
            Store::new(),
            Duration::from_secs(100),
            1_000,
            tx_loopback,
            SimpleSender::new(),
        );
        // Round 2 extends round 1, which this node lacks; rounds 3 to 5 come next, each
        // extending the one before, which is parked.
        let missing = Digest::of(b"round 1");
        let mut parent = qc(missing, 1, &keys[1..]);
        for round in 2..=5 {
            let block = signed_block(parent, None, round, vec![], &keys[1]);
            assert!(synchronizer
                .get_parent_block(&block)
                .await
                .expect("no error")
                .is_none());
            parent = qc(block.digest(), round, &keys[1..]);
        }
        let counters = synchronizer.counters.clone();
        tokio::time::timeout(Duration::from_secs(5), async {
            while counters.parked.load(Ordering::Relaxed) < 4 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("every block parked");
        // Round 1 is asked of its holders (keys 1 to 3), and nothing else is asked at all.
        let mut asked = Vec::new();
        while let Ok(Some((_, digest))) =
            tokio::time::timeout(Duration::from_millis(500), requests.recv()).await
        {
            asked.push(digest);
        }
        assert_eq!(asked, vec![missing; 3]);
    }
}
