//! A committee of real consensus nodes on loopback ports, each on its own runtime so a test can
//! kill one (dropping its runtime closes its sockets, as a crash would).

#![allow(dead_code)]

use bytes::Bytes;
use checkpoint::{Checkpoint, CheckpointPolicy, StateSyncLink};
use config::Authority;
use config::{Committee, Parameters};
use crypto::{Digest, KeyPair};
use futures::SinkExt;
use hotstuff::{Consensus, ConsensusHandle, MempoolLink, MissingRecord};
use mempool::{Mempool, MempoolMetrics};
use network::NetEmulation;
use plumbing::metered;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU16, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use store::Store;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A port nobody listens on, below Linux's ephemeral range (32768 and up), so no outgoing
/// connection of a concurrently running test can take it between now and the node's bind.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(
        0,
        10_000 + (std::process::id() % 2_000) as u16 * 10,
        AtomicOrdering::Relaxed,
        AtomicOrdering::Relaxed,
    );
    loop {
        let port = NEXT.fetch_add(1, AtomicOrdering::Relaxed);
        assert!(port < 32_000, "ran out of test ports");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub fn committee(keys: &[KeyPair]) -> Committee {
    let addr = |port| SocketAddr::from(([127, 0, 0, 1], port));
    Committee {
        authorities: keys
            .iter()
            .map(|k| {
                (
                    k.name,
                    Authority {
                        stake: 1,
                        consensus_address: addr(free_port()),
                        mempool_address: addr(free_port()),
                        transactions_address: addr(free_port()),
                    },
                )
            })
            .collect(),
    }
}

/// A test actor (a Byzantine stand-in, a set of proxies) on a runtime of its own thread. `run`
/// signals `ready` once it is set up; dropping the actor stops it, its sockets closing with the
/// runtime.
pub struct Background {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    pub fn spawn<F, Fut>(what: &'static str, run: F) -> Self
    where
        F: FnOnce(std::sync::mpsc::Sender<()>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                tokio::select! {
                    () = run(ready_tx) => {},
                    _ = stop_rx => {},
                }
            });
            runtime.shutdown_background();
        });
        if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
            panic!("{what} did not start");
        }
        Background {
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub fn test_parameters() -> Parameters {
    Parameters {
        timeout_delay: 500,
        batch_size: 20_000,
        max_batch_delay: 20,
        sync_retry_delay: 500,
        ..Parameters::default()
    }
}

/// One running node: its committed batch digests, in order, and a kill switch.
///
/// Its application's state is that list. It checkpoints it as a node's executor checkpoints
/// its state (`Parameters::checkpoint_rounds`), and a checkpoint consensus adopts from peers
/// replaces it: a node that rejoined that way holds the same list as the others.
pub struct TestNode {
    pub keys: KeyPair,
    pub committed: Arc<Mutex<Vec<Digest>>>,
    /// Rounds of the checkpoints this node adopted from peers.
    pub restored: Arc<Mutex<Vec<u64>>>,
    pub handle: ConsensusHandle,
    pub mempool: Arc<MempoolMetrics>,
    kill: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestNode {
    pub fn spawn(keys: KeyPair, committee: Committee, parameters: Parameters) -> Self {
        Self::spawn_emulated(keys, committee, parameters, None)
    }

    /// A member back with nothing (a fresh in-memory store, as after a crash without
    /// `--store`) whose operator accepts the risk of starting without its vote record
    /// (`node run --risk-equivocation-without-vote-record`): it signs only above what the
    /// others show it signed.
    pub fn spawn_without_record(
        keys: KeyPair,
        committee: Committee,
        parameters: Parameters,
    ) -> Self {
        Self::spawn_full(
            keys,
            committee,
            parameters,
            None,
            Store::new(),
            Duration::ZERO,
            MissingRecord::RiskEquivocation,
        )
    }

    /// A node whose committee links follow `emulation` (latencies, cuts the test sets).
    pub fn spawn_emulated(
        keys: KeyPair,
        committee: Committee,
        parameters: Parameters,
        emulation: Option<Arc<NetEmulation>>,
    ) -> Self {
        Self::spawn_on(keys, committee, parameters, emulation, Store::new())
    }

    /// A node on `store`: a second node on the same store is the first restarted on a durable
    /// store (what `node run --store` keeps: blocks, batches, safety state, its checkpoint).
    pub fn spawn_on(
        keys: KeyPair,
        committee: Committee,
        parameters: Parameters,
        emulation: Option<Arc<NetEmulation>>,
        store: Store,
    ) -> Self {
        Self::spawn_full(
            keys,
            committee,
            parameters,
            emulation,
            store,
            Duration::ZERO,
            MissingRecord::Refuse,
        )
    }

    /// A node on `store` whose application takes `delay` per committed batch: an executor
    /// that falls behind its commits.
    pub fn spawn_lagging(
        keys: KeyPair,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        delay: Duration,
    ) -> Self {
        Self::spawn_full(
            keys,
            committee,
            parameters,
            None,
            store,
            delay,
            MissingRecord::Refuse,
        )
    }

    fn spawn_full(
        keys: KeyPair,
        committee: Committee,
        parameters: Parameters,
        emulation: Option<Arc<NetEmulation>>,
        store: Store,
        delay: Duration,
        missing_record: MissingRecord,
    ) -> Self {
        let committed = Arc::new(Mutex::new(Vec::new()));
        let restored = Arc::new(Mutex::new(Vec::new()));
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn({
            let committed = committed.clone();
            let restored = restored.clone();
            let keys = keys.clone();
            move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let (tx, mut rx, _) = metered::channel(1_000);
                    // Wired as the node wires them: mempool and consensus side by side.
                    let (tx_digests, rx_digests) = mpsc::channel(1_000);
                    let (tx_mempool, rx_mempool) = mpsc::channel(1_000);
                    let mempool = Arc::new(MempoolMetrics::default());
                    let (state_sync, rx_restore) = StateSyncLink::new(&store);
                    let app = TestApp {
                        committed,
                        restored,
                        rx_restore,
                        state_sync: state_sync.clone(),
                        policy: CheckpointPolicy::new(parameters.checkpoint_rounds),
                    };
                    let mempool_handle = Mempool::spawn(
                        keys.name,
                        keys.secret.clone(),
                        committee.clone(),
                        parameters.clone(),
                        store.clone(),
                        rx_mempool,
                        tx_digests,
                        mempool.clone(),
                        None,
                        emulation.clone(),
                        None,
                        None,
                    )
                    .await
                    .expect("mempool starts");
                    let quota = mempool_handle.quota.clone();
                    let handle = Consensus::spawn(
                        keys.name,
                        keys.secret,
                        committee,
                        parameters,
                        store,
                        MempoolLink {
                            rx_digests,
                            tx_mempool,
                            quota,
                        },
                        tx,
                        state_sync,
                        emulation,
                        missing_record,
                    )
                    .await
                    .expect("consensus starts");
                    ready_tx.send((handle, mempool)).expect("test waits");
                    tokio::spawn(async move {
                        let mut app = app;
                        while let Some(batch) = rx.recv().await {
                            if !delay.is_zero() {
                                tokio::time::sleep(delay).await;
                            }
                            app.apply(batch);
                        }
                    });
                    let _ = kill_rx.await;
                });
                runtime.shutdown_background();
            }
        });
        let (handle, mempool) = ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("node started");
        TestNode {
            keys,
            committed,
            restored,
            handle,
            mempool,
            kill: Some(kill_tx),
            thread: Some(thread),
        }
    }

    pub fn committed(&self) -> Vec<Digest> {
        self.committed.lock().expect("lock").clone()
    }

    pub fn restored(&self) -> Vec<u64> {
        self.restored.lock().expect("lock").clone()
    }

    pub fn committed_count(&self) -> usize {
        self.committed.lock().expect("lock").len()
    }

    pub fn round(&self) -> u64 {
        self.handle.metrics.snapshot().round
    }

    pub fn timeouts(&self) -> u64 {
        self.handle.metrics.snapshot().timeouts
    }

    pub fn kill(&mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TestNode's application: the committed batch digests, checkpointed and restored as bytes
/// (32 per digest, in commit order).
struct TestApp {
    committed: Arc<Mutex<Vec<Digest>>>,
    restored: Arc<Mutex<Vec<u64>>>,
    rx_restore: std::sync::mpsc::Receiver<Arc<Checkpoint>>,
    state_sync: StateSyncLink,
    policy: CheckpointPolicy,
}

impl TestApp {
    fn apply(&mut self, batch: batch::CommittedBatch) {
        // Done with it whatever follows (applied, or part of a restored checkpoint), as a
        // node's last stage reports it: a leader whose application seems behind proposes no
        // batches (`Parameters::max_unexecuted_bytes`).
        self.state_sync
            .progress
            .applied(batch.batch.bytes().len() as u64);
        let mut floor = None;
        while let Ok(checkpoint) = self.rx_restore.try_recv() {
            let digests = checkpoint
                .state
                .chunks_exact(32)
                .map(|chunk| {
                    let mut bytes = [0u8; 32];
                    bytes.copy_from_slice(chunk);
                    Digest(bytes)
                })
                .collect();
            *self.committed.lock().expect("lock") = digests;
            self.restored.lock().expect("lock").push(checkpoint.round);
            self.policy.restored(checkpoint.round);
            self.state_sync.checkpoints.publish((*checkpoint).clone());
            floor = Some(checkpoint.round);
        }
        let floor = floor
            .or_else(|| self.restored.lock().expect("lock").last().copied())
            .unwrap_or(0);
        if batch.round <= floor {
            return;
        }
        let mut committed = self.committed.lock().expect("lock");
        // An empty block changes no state, but may still be the block a checkpoint is taken at.
        if !batch.is_empty_block() {
            committed.push(batch.batch.digest());
        }
        if batch.last_of_block && self.policy.due(batch.round) {
            let state: Vec<u8> = committed.iter().flat_map(|d| d.0).collect();
            self.state_sync.checkpoints.publish(Checkpoint::new(
                batch.block,
                batch.round,
                Bytes::from(state),
            ));
        }
    }
}

/// Waits until a killed node's ports can be bound again (its runtime closes its sockets in the
/// background), so the node can be restarted on them.
pub fn wait_ports_free(committee: &Committee, name: &crypto::PublicKey) {
    let authority = committee.authority(name).expect("member");
    let addresses = [
        authority.consensus_address,
        authority.mempool_address,
        authority.transactions_address,
    ];
    wait_until("the ports to be free", Duration::from_secs(10), || {
        addresses.iter().all(|a| TcpListener::bind(a).is_ok())
    });
}

/// Waits until `condition` holds, failing the test with `what` after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A load generator on its own thread: `rate` tx/s of `size` bytes to `target` until stopped.
/// Transactions are unique across loads (the target's port is in each), so two nodes never seal
/// byte-identical batches.
pub struct Load {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<u64>>,
}

impl Load {
    pub fn start(target: SocketAddr, rate: u64, size: usize) -> Self {
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let stream = loop {
                    if let Ok(stream) = TcpStream::connect(target).await {
                        break stream;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                };
                let mut framed = Framed::new(stream, LengthDelimitedCodec::new());
                let mut ticker = tokio::time::interval(Duration::from_millis(20));
                let per_tick = (rate / 50).max(1);
                let mut sent = 0u64;
                loop {
                    tokio::select! {
                        _ = ticker.tick() => {
                            for _ in 0..per_tick {
                                sent += 1;
                                let mut tx = vec![1u8; size];
                                tx[1..9].copy_from_slice(&sent.to_be_bytes());
                                tx[9..11].copy_from_slice(&target.port().to_be_bytes());
                                if framed.feed(Bytes::from(tx)).await.is_err() {
                                    return sent;
                                }
                            }
                            if SinkExt::<Bytes>::flush(&mut framed).await.is_err() {
                                return sent;
                            }
                        }
                        _ = &mut stop_rx => return sent,
                    }
                }
            })
        });
        Load {
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// One load of `rate` tx/s of 200 bytes on the transactions port of each member of `keys`.
    pub fn on_members(committee: &Committee, keys: &[KeyPair], rate: u64) -> Vec<Load> {
        keys.iter()
            .map(|k| {
                let target = committee
                    .authority(&k.name)
                    .expect("member")
                    .transactions_address;
                Load::start(target, rate, 200)
            })
            .collect()
    }

    pub fn stop(&mut self) -> u64 {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.thread
            .take()
            .map(|t| t.join().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Asserts that every sequence is a prefix of the longest one: nodes agree on the order, and
/// differ only in how far they got when the test looked.
pub fn assert_prefixes(sequences: &[Vec<Digest>]) {
    let longest = sequences
        .iter()
        .max_by_key(|s| s.len())
        .expect("at least one node");
    for (i, sequence) in sequences.iter().enumerate() {
        assert_eq!(
            sequence.as_slice(),
            &longest[..sequence.len()],
            "node {i} committed a different sequence"
        );
    }
}
