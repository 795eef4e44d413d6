//! Fetches the batches of a block that this node lacks.
//!
//! The core asks for missing digests with the block's author, who sealed them and certainly
//! holds them; the request goes there first. An author may be slow, gone, or Byzantine and
//! withhold the batch from us alone, and the others keep batches only for the GC window, so the
//! retries start soon and widen: after `first_retry` (a tenth of `sync_retry_delay`, at most
//! 1 s) the digest goes to `sync_retry_nodes` random peers, after as long again to every peer,
//! then to every peer with the delay doubling up to `sync_retry_delay`, until the batch arrives or the block that needs it is
//! garbage collected. Any of the 2f+1 nodes that acknowledged the batch to its author can
//! serve it. Arrival is learnt from the store (`notify_read`), so whoever writes the batch (the
//! peer handler, usually) needs no link to this actor.

use super::backlog::Backlog;
use super::from_consensus::ConsensusMempoolMessage;
use super::message::MempoolMessage;
use config::{Committee, Round};
use crypto::{Digest, PublicKey};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use network::SimpleSender;
use plumbing::clock::{interval, Instant};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;
use store::BatchStore;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tracing::debug;

/// How often due retries are looked for, at most. Finer than the first retry delay, so a retry
/// is late by a fraction of it at most.
const MAX_TIMER_RESOLUTION: Duration = Duration::from_millis(250);

/// Bounds of the first retry: soon enough that a withholding author costs about a round timeout,
/// not so soon that a merely busy author makes every peer send us the batch too.
const MIN_FIRST_RETRY: Duration = Duration::from_millis(10);
const MAX_FIRST_RETRY: Duration = Duration::from_secs(1);

struct PendingRequest {
    /// The round of the (latest) block that needs the digest: the request lives as long as
    /// that block may still commit. (The latest committed round at registration, used before,
    /// is stale on a node that catches up and dropped requests it still needed.)
    round: Round,
    last_sent: Instant,
    /// Requests sent so far, the one to the author included.
    attempts: u32,
    /// Dropping it stops the digest's wait on the store.
    _cancel: oneshot::Sender<()>,
}

pub struct Synchronizer {
    name: PublicKey,
    committee: Committee,
    store: BatchStore,
    gc_depth: Round,
    sync_retry_delay: Duration,
    sync_retry_nodes: usize,
    /// Most digests in one request: peers refuse longer ones (`Parameters::max_request_digests`),
    /// and it keeps a long list of missing batches from making a frame too large.
    max_request_digests: usize,
    /// Told of commits, so our own committed batches stop counting against our backlog.
    backlog: Backlog,
    rx_consensus: mpsc::Receiver<ConsensusMempoolMessage>,
    network: SimpleSender,
    /// The latest round announced by `Cleanup`.
    round: Round,
    pending: HashMap<Digest, PendingRequest>,
}

impl Synchronizer {
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        name: PublicKey,
        committee: Committee,
        store: BatchStore,
        gc_depth: Round,
        sync_retry_delay: Duration,
        sync_retry_nodes: usize,
        rx_consensus: mpsc::Receiver<ConsensusMempoolMessage>,
        network: SimpleSender,
        max_request_digests: usize,
        backlog: Backlog,
    ) -> JoinHandle<()> {
        let synchronizer = Synchronizer {
            name,
            committee,
            store,
            gc_depth,
            sync_retry_delay,
            sync_retry_nodes,
            max_request_digests: max_request_digests.max(1),
            backlog,
            rx_consensus,
            network,
            round: 0,
            pending: HashMap::new(),
        };
        tokio::spawn(synchronizer.run())
    }

    async fn run(mut self) {
        // Each future resolves with its digest and whether the batch arrived (else cancelled).
        let mut waiting = FuturesUnordered::new();
        let resolution =
            (self.first_retry() / 4).clamp(Duration::from_millis(1), MAX_TIMER_RESOLUTION);
        let mut timer = interval(resolution);
        timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = self.rx_consensus.recv() => match message {
                    Some(ConsensusMempoolMessage::Synchronize(digests, author, round)) => {
                        for (digest, cancelled) in self.synchronize(digests, author, round).await {
                            waiting.push(wait_for_batch(self.store.clone(), digest, cancelled));
                        }
                    }
                    Some(ConsensusMempoolMessage::Cleanup(round)) => self.cleanup(round),
                    Some(ConsensusMempoolMessage::Committed(digests)) => {
                        self.backlog.settled(&digests);
                    }
                    Some(ConsensusMempoolMessage::Abandoned(digests)) => {
                        self.backlog.settled(&digests);
                    }

                    None => return,
                },
                Some((digest, arrived)) = waiting.next(), if !waiting.is_empty() => {
                    if arrived {
                        self.pending.remove(&digest);
                    }
                }
                _ = timer.tick() => self.retry().await,
            }
        }
    }

    /// Registers the digests neither held nor already requested and asks `author` for them.
    /// Returns each registered digest with the signal that cancels its wait.
    async fn synchronize(
        &mut self,
        digests: Vec<Digest>,
        author: PublicKey,
        round: Round,
    ) -> Vec<(Digest, oneshot::Receiver<()>)> {
        let now = Instant::now();
        let mut missing = Vec::new();
        let mut waits = Vec::new();
        for digest in digests {
            // A failed read counts as missing: asking for a batch we hold costs one reply.
            let held = self.store.contains(&digest).unwrap_or(false);
            if held {
                continue;
            }
            if let Some(request) = self.pending.get_mut(&digest) {
                // Needed by a later block too: keep asking as long as that one may commit.
                request.round = request.round.max(round);
                continue;
            }
            let (cancel, cancelled) = oneshot::channel();
            self.pending.insert(
                digest,
                PendingRequest {
                    round,
                    last_sent: now,
                    attempts: 1,
                    _cancel: cancel,
                },
            );
            waits.push((digest, cancelled));
            missing.push(digest);
        }
        if missing.is_empty() {
            return waits;
        }
        debug!("requesting {} missing batches from {author}", missing.len());
        let address = self
            .committee
            .authority(&author)
            .filter(|_| author != self.name)
            .map(|a| a.mempool_address);
        for chunk in missing.chunks(self.max_request_digests) {
            let request = MempoolMessage::encode_request(chunk, &self.name);
            match address {
                Some(address) => self.network.send(address, request).await,
                // An author we cannot reach directly: ask random peers at once.
                None => {
                    self.network
                        .lucky_broadcast(self.peers(), request, self.sync_retry_nodes)
                        .await
                }
            }
        }
        waits
    }

    /// The delay before the first retry.
    fn first_retry(&self) -> Duration {
        (self.sync_retry_delay / 10).clamp(MIN_FIRST_RETRY, MAX_FIRST_RETRY)
    }

    /// Re-requests every digest whose delay since its last request has passed: the first retry
    /// from `sync_retry_nodes` random peers (any of them likely holds it, and each that does
    /// sends it), later ones from every peer.
    async fn retry(&mut self) {
        let now = Instant::now();
        let (mut some, mut all) = (Vec::new(), Vec::new());
        let (first, max) = (self.first_retry(), self.sync_retry_delay);
        for (digest, request) in &mut self.pending {
            if now.duration_since(request.last_sent) < delay_after(request.attempts, first, max) {
                continue;
            }
            request.last_sent = now;
            request.attempts = request.attempts.saturating_add(1);
            if request.attempts == 2 {
                some.push(*digest);
            } else {
                all.push(*digest);
            }
        }
        if !some.is_empty() {
            debug!(
                "asking {} peers for {} missing batches",
                self.sync_retry_nodes,
                some.len()
            );
            for chunk in some.chunks(self.max_request_digests) {
                let request = MempoolMessage::encode_request(chunk, &self.name);
                self.network
                    .lucky_broadcast(self.peers(), request, self.sync_retry_nodes)
                    .await;
            }
        }
        if !all.is_empty() {
            debug!("asking every peer for {} missing batches", all.len());
            for chunk in all.chunks(self.max_request_digests) {
                let request = MempoolMessage::encode_request(chunk, &self.name);
                self.network.broadcast(self.peers(), request).await;
            }
        }
    }

    /// Forgets requests for blocks more than `gc_depth` rounds older than `round`: they are
    /// committed or abandoned, and the core no longer waits for their batches.
    fn cleanup(&mut self, round: Round) {
        // Waits cancelled by the previous cleanup have been dropped by now; their entries in
        // the store's waiter lists can go.
        self.store.prune_waiters();
        self.round = self.round.max(round);
        let (latest, gc_depth) = (self.round, self.gc_depth);
        self.pending
            .retain(|_, request| request.round.saturating_add(gc_depth) >= latest);
    }

    fn peers(&self) -> Vec<SocketAddr> {
        self.committee
            .others(&self.name, |a| a.mempool_address)
            .into_iter()
            .map(|(_, address)| address)
            .collect()
    }
}

/// The delay after the `attempts`-th request of a digest: `first` after the author's and after
/// the first retry (so every peer is asked within twice `first`), then doubling, at most `max`
/// (and never below `first`).
fn delay_after(attempts: u32, first: Duration, max: Duration) -> Duration {
    let doublings = attempts.saturating_sub(2).min(16);
    first.saturating_mul(1 << doublings).min(max.max(first))
}

async fn wait_for_batch(
    store: BatchStore,
    digest: Digest,
    cancelled: oneshot::Receiver<()>,
) -> (Digest, bool) {
    tokio::select! {
        batch = store.notify_read(digest) => (digest, batch.is_ok()),
        _ = cancelled => (digest, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use config::Authority;
    use crypto::KeyPair;
    use network::codec;
    use tokio::net::TcpListener;
    use tokio_util::codec::FramedRead;

    const DEADLINE: Duration = Duration::from_secs(10);
    const RETRY: Duration = Duration::from_millis(300);
    const GC_DEPTH: Round = 10;

    /// Fake peers: each listener forwards every request it receives, tagged with its index.
    struct Peers {
        names: Vec<PublicKey>,
        committee: Committee,
        requests: mpsc::UnboundedReceiver<(usize, Vec<Digest>, PublicKey)>,
    }

    async fn peers(n: u64) -> Peers {
        let (tx, requests) = mpsc::unbounded_channel();
        let mut authorities = std::collections::BTreeMap::new();
        let mut names = Vec::new();
        for i in 0..n {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let address = listener.local_addr().expect("addr");
            let name = KeyPair::from_seed(i).name;
            names.push(name);
            authorities.insert(
                name,
                Authority {
                    stake: 1,
                    consensus_address: address,
                    mempool_address: address,
                    transactions_address: address,
                },
            );
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let mut frames = FramedRead::new(socket, codec(1 << 20));
                        while let Some(Ok(frame)) = frames.next().await {
                            if let Ok(MempoolMessage::BatchRequest(digests, requestor)) =
                                MempoolMessage::decode(frame.freeze())
                            {
                                let _ = tx.send((i as usize, digests, requestor));
                            }
                        }
                    });
                }
            });
        }
        Peers {
            names,
            committee: Committee { authorities },
            requests,
        }
    }

    /// Node 0 runs the synchronizer; the others are fake peers.
    fn start(peers: &Peers, store: &BatchStore) -> mpsc::Sender<ConsensusMempoolMessage> {
        start_with(peers, store, RETRY)
    }

    fn start_with(
        peers: &Peers,
        store: &BatchStore,
        retry: Duration,
    ) -> mpsc::Sender<ConsensusMempoolMessage> {
        let (tx, rx) = mpsc::channel(8);
        Synchronizer::spawn(
            peers.names[0],
            peers.committee.clone(),
            store.clone(),
            GC_DEPTH,
            retry,
            3,
            rx,
            SimpleSender::new(),
            1_024,
            Backlog::new(u64::MAX, Default::default()),
        );
        tx
    }

    async fn next_request(peers: &mut Peers) -> (usize, Vec<Digest>, PublicKey) {
        tokio::time::timeout(DEADLINE, peers.requests.recv())
            .await
            .expect("a request in time")
            .expect("fake peers alive")
    }

    /// A withholding author must not strand us for `sync_retry_delay` (10 s by default, longer
    /// than peers keep batches at speed): every other peer is asked within a fraction of it.
    #[tokio::test]
    async fn escalates_to_every_peer_long_before_the_retry_delay() {
        let mut peers = peers(4).await;
        let store = store::Store::new().batches();
        let (tx, rx) = mpsc::channel(8);
        Synchronizer::spawn(
            peers.names[0],
            peers.committee.clone(),
            store.clone(),
            GC_DEPTH,
            Duration::from_secs(10),
            1,
            rx,
            SimpleSender::new(),
            1_024,
            Backlog::new(u64::MAX, Default::default()),
        );
        let missing = Digest::of(b"withheld");
        let (me, author) = (peers.names[0], peers.names[1]);
        tx.send(ConsensusMempoolMessage::Synchronize(
            vec![missing],
            author,
            1,
        ))
        .await
        .expect("send");
        assert_eq!(next_request(&mut peers).await, (1, vec![missing], me));
        let mut asked = std::collections::BTreeSet::new();
        tokio::time::timeout(Duration::from_secs(3), async {
            while asked.len() < 2 {
                let (peer, digests, _) = next_request(&mut peers).await;
                assert_eq!(digests, vec![missing]);
                if peer != 1 {
                    asked.insert(peer);
                }
            }
        })
        .await
        .expect("every other peer asked within 3 s");
    }

    #[tokio::test]
    async fn asks_the_author_then_retries_with_other_peers() {
        let mut peers = peers(4).await;
        let store = store::Store::new().batches();
        let held = Digest::of(b"held");
        store
            .write(held, Bytes::from_static(b"batch"))
            .await
            .expect("write");
        let tx = start(&peers, &store);
        let missing = Digest::of(b"missing");
        let (me, author) = (peers.names[0], peers.names[1]);

        let start = Instant::now();
        tx.send(ConsensusMempoolMessage::Synchronize(
            vec![held, missing],
            author,
            1,
        ))
        .await
        .expect("send");
        // Only the missing digest, and first to the author alone.
        assert_eq!(next_request(&mut peers).await, (1, vec![missing], me));

        // After the first retry delay (a tenth of the retry delay), the three other authorities
        // (sync_retry_nodes = 3) are asked again.
        let mut asked = Vec::new();
        for _ in 0..3 {
            let (peer, digests, requestor) = next_request(&mut peers).await;
            assert!(start.elapsed() >= RETRY / 10, "retried before the delay");
            assert_eq!((digests, requestor), (vec![missing], me));
            asked.push(peer);
        }
        asked.sort();
        assert_eq!(asked, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn stops_asking_for_arrived_or_collected_batches() {
        let mut peers = peers(4).await;
        let store = store::Store::new().batches();
        // First retry after 300 ms: the requests below are all sent before any retry.
        let tx = start_with(&peers, &store, Duration::from_secs(3));
        let (me, author) = (peers.names[0], peers.names[1]);
        let (arrives, collected, still_missing) =
            (Digest::of(b"a"), Digest::of(b"b"), Digest::of(b"c"));

        tx.send(ConsensusMempoolMessage::Synchronize(
            vec![arrives, collected],
            author,
            0,
        ))
        .await
        .expect("send");
        assert_eq!(
            next_request(&mut peers).await,
            (1, vec![arrives, collected], me)
        );
        store
            .write(arrives, Bytes::from_static(b"batch"))
            .await
            .expect("write");
        // `collected` was needed by a block of round 0: past the gc depth at GC_DEPTH + 1.
        tx.send(ConsensusMempoolMessage::Cleanup(GC_DEPTH + 1))
            .await
            .expect("send");
        tx.send(ConsensusMempoolMessage::Synchronize(
            vec![still_missing],
            author,
            GC_DEPTH + 1,
        ))
        .await
        .expect("send");
        assert_eq!(next_request(&mut peers).await, (1, vec![still_missing], me));
        // Every retry is for the digest still missing only.
        for _ in 0..3 {
            let (_, digests, _) = next_request(&mut peers).await;
            assert_eq!(digests, vec![still_missing]);
        }
    }

    /// Our batches whose blocks we skipped by adopting a checkpoint are abandoned by the core
    /// (never proposed again, fate unknown): they must leave the backlog, or a full backlog
    /// pauses the batch maker, and our clients, for good.
    #[tokio::test]
    async fn abandoned_batches_leave_the_backlog() {
        let peers = peers(4).await;
        let store = store::Store::new().batches();
        let backlog = Backlog::new(1_000, Default::default());
        let (tx, rx) = mpsc::channel(8);
        Synchronizer::spawn(
            peers.names[0],
            peers.committee.clone(),
            store,
            GC_DEPTH,
            RETRY,
            3,
            rx,
            SimpleSender::new(),
            1_024,
            backlog.clone(),
        );
        let ours = Digest::of(b"ours");
        backlog.sealed(ours, 1_000);
        assert!(backlog.is_full());
        tx.send(ConsensusMempoolMessage::Abandoned(vec![ours]))
            .await
            .expect("send");
        tokio::time::timeout(DEADLINE, backlog.room())
            .await
            .expect("room once the abandoned batch is settled");
        assert_eq!(backlog.bytes(), 0);
    }
}
