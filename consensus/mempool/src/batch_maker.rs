//! Packs client transactions into batches, keeps each sealed batch and broadcasts it to peers.
//!
//! A batch is sealed when its payload reaches `batch_size` bytes, or `max_batch_delay` after its
//! first transaction, whichever comes first; an empty batch is never sealed. While this node's
//! sealed, uncommitted batches fill the [`Backlog`], or (`--verify=attested`) its attester is
//! behind ([`CheckQueue`]), no transactions are taken (see `backlog.rs`, `attest/queue.rs`).
//!
//! Batches are numbered from 0 in the order they are sealed, and go out as `Authored` frames
//! carrying their number, which names their attesters.
//!
//! Behind the ingress check (`ingress.rs`) every transaction a batch holds was checked: the
//! batch is noted as such ([`CheckedBatches`]), and its author's statement, under
//! `--verify=attested`, is made without checking it again.

use super::attest::{Attestations, CheckQueue};
use super::attester::AttesterInput;
use super::backlog::Backlog;
use super::checked::CheckedBatches;
use super::message::{MempoolMessage, AUTHORED_PREFIX_LEN};
use super::metrics::MempoolMetrics;
use super::quorum_waiter::QuorumWaiterMessage;
use super::samples::SampleHooks;
use super::tx_chunk::TxChunk;
use super::tx_receiver::MAX_TRANSACTION_SIZE;
use batch::{Batch, BatchBuilder, TX_PREFIX_LEN};
use config::Stake;
use crypto::PublicKey;
use network::ReliableSender;
use plumbing::budgeted::BudgetedSender;
use plumbing::clock::{self, Instant};
use plumbing::now_ms;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use store::BatchStore;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, error};

pub struct BatchMaker {
    batch_size: usize,
    max_batch_delay: Duration,
    /// Every other authority's mempool address and stake, in one fixed order.
    peers: Vec<(SocketAddr, Stake)>,
    store: BatchStore,
    metrics: Arc<MempoolMetrics>,
    samples: Option<SampleHooks>,
    /// With samples on: `(index of the first transaction, received_ms)` of each chunk in the
    /// current batch, so a sample found at sealing gets its receipt time without a timestamp
    /// per transaction. Reused from batch to batch.
    arrivals: Vec<(u32, u64)>,
    rx_transactions: mpsc::Receiver<TxChunk>,
    tx_quorum_waiter: mpsc::Sender<QuorumWaiterMessage>,
    network: ReliableSender,
    builder: BatchBuilder,
    /// Transaction bytes in the current batch, without framing (for `sealed_bytes`).
    tx_bytes: u64,
    /// Buffer reserved per batch: room for the transaction that crosses `batch_size`, so a
    /// batch is never reallocated (and copied) as it fills. Untouched pages cost no memory.
    capacity: usize,
    /// This node's sealed, uncommitted batches: no transactions are taken while it is full.
    backlog: Backlog,
    /// The number of the next batch.
    next_seq: u64,
    /// With `--verify=attested`: this node's attester, which checks every batch this node seals
    /// (an author attests its own batches).
    attesting: Option<OwnAttesting>,
    /// Behind the ingress check: where the batches sealed from checked transactions are noted.
    checked: Option<CheckedBatches>,
}

/// What the batch maker hands its own batches to under `--verify=attested`.
pub struct OwnAttesting {
    pub name: PublicKey,
    pub tx_attester: BudgetedSender<AttesterInput>,
    /// Where a sealed batch is noted (its statements are timed from then).
    pub table: Attestations,
    /// How far the attester is behind: no transactions are taken while it is.
    pub queue: CheckQueue,
}

impl BatchMaker {
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        batch_size: usize,
        max_batch_delay: Duration,
        peers: Vec<(SocketAddr, Stake)>,
        store: BatchStore,
        metrics: Arc<MempoolMetrics>,
        samples: Option<SampleHooks>,
        rx_transactions: mpsc::Receiver<TxChunk>,
        tx_quorum_waiter: mpsc::Sender<QuorumWaiterMessage>,
        network: ReliableSender,
        backlog: Backlog,
        attesting: Option<OwnAttesting>,
        checked: Option<CheckedBatches>,
    ) -> JoinHandle<()> {
        let capacity = batch_size + TX_PREFIX_LEN + MAX_TRANSACTION_SIZE.min(batch_size);
        let maker = BatchMaker {
            batch_size,
            max_batch_delay,
            peers,
            store,
            metrics,
            samples,
            arrivals: Vec::new(),
            rx_transactions,
            tx_quorum_waiter,
            network,
            // The tag and number in front make the sealed buffer a ready-to-send `Authored`
            // message.
            builder: BatchBuilder::with_frame_prefix(&MempoolMessage::authored_prefix(0), capacity),
            tx_bytes: 0,
            capacity,
            backlog,
            next_seq: 0,
            attesting,
            checked,
        };
        tokio::spawn(maker.run())
    }

    async fn run(mut self) {
        let timer = clock::sleep(self.max_batch_delay);
        tokio::pin!(timer);
        loop {
            let full = self.backlog.is_full() || self.attesting_behind();
            tokio::select! {
                () = Self::pause(&self.backlog, self.attesting.as_ref(), &self.metrics), if full => {}
                chunk = self.rx_transactions.recv(), if !full => {
                    let Some(chunk) = chunk else {
                        // No more transactions: seal what is left so it is not lost.
                        if !self.builder.is_empty() {
                            self.seal().await;
                        }
                        return;
                    };
                    let TxChunk { received_ms, runs, room } = chunk;
                    let tracing = self.samples.is_some();
                    let mut first = true;
                    for run in runs {
                        let mut rest = Some(run);
                        while let Some(run) = rest.take() {
                            if self.builder.is_empty() {
                                // The delay counts from the batch's first transaction.
                                clock::reset(timer.as_mut(), Instant::now() + self.max_batch_delay);
                            }
                            if tracing && (first || self.builder.is_empty()) {
                                self.arrivals.push((self.builder.tx_count(), received_ms));
                            }
                            first = false;
                            // Whole runs are copied at once; a run is cut only at the frame
                            // that fills the batch.
                            let room = self.batch_size.saturating_sub(self.builder.payload_len());
                            let (head, tail) = run.split_reaching(room);
                            self.builder.append(&head);
                            self.tx_bytes += head.payload_len() as u64;
                            if self.builder.payload_len() >= self.batch_size && !self.seal().await {
                                return;
                            }
                            rest = tail;
                        }
                    }
                    // The transactions are in batches now: the chunk's room in the queue from
                    // the clients' port goes back.
                    drop(room);
                }
                () = &mut timer, if !self.builder.is_empty() => {
                    if !self.seal().await {
                        return;
                    }
                }
            }
        }
    }

    fn attesting_behind(&self) -> bool {
        self.attesting
            .as_ref()
            .is_some_and(|attesting| attesting.queue.is_behind())
    }

    /// Waits until the backlog has room and the attester caught up, counting the time as
    /// back-pressure. A batch being filled is still sealed by its timer meanwhile.
    async fn pause(backlog: &Backlog, attesting: Option<&OwnAttesting>, metrics: &MempoolMetrics) {
        let start = Instant::now();
        MempoolMetrics::add(&metrics.backpressure_pauses, 1);
        if let Some(attesting) = attesting.filter(|a| a.queue.is_behind()) {
            MempoolMetrics::add(&metrics.attest_pauses, 1);
            attesting.queue.caught_up().await;
        }
        backlog.room().await;
        MempoolMetrics::add(&metrics.backpressure_ms, start.elapsed().as_millis() as u64);
    }

    /// Seals, stores and broadcasts the current batch. Returns false once the quorum waiter is
    /// gone (the node is shutting down).
    async fn seal(&mut self) -> bool {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.builder.frame_prefix_mut()[1..AUTHORED_PREFIX_LEN].copy_from_slice(&seq.to_le_bytes());
        let (batch, frame) = self.builder.seal_framed(now_ms(), self.capacity);
        let digest = batch.digest();
        MempoolMetrics::add(&self.metrics.sealed_batches, 1);
        MempoolMetrics::add(&self.metrics.sealed_txs, u64::from(batch.tx_count()));
        MempoolMetrics::add(
            &self.metrics.sealed_bytes,
            std::mem::take(&mut self.tx_bytes),
        );
        debug!("sealed batch {digest} with {} txs", batch.tx_count());
        let samples = self.find_samples(&batch);

        // Stored before anyone hears of it, so this node can serve it to peers at once.
        if let Err(e) = self.store.write(digest, batch.bytes().clone()).await {
            // A batch we cannot serve must not be announced: peers would vote on it and ask us.
            error!("cannot store sealed batch {digest}, dropping it: {e}");
            return true;
        }
        self.backlog.sealed(digest, batch.bytes().len() as u64);
        if let Some(checked) = &self.checked {
            checked.sealed(digest);
        }
        if let Some(attesting) = &self.attesting {
            attesting.table.sealed(digest, seq);
        }
        let addresses = self.peers.iter().map(|(address, _)| *address).collect();
        let handlers = self.network.broadcast(addresses, frame).await;
        if let Some(attesting) = &self.attesting {
            let size = batch.bytes().len();
            let input = AttesterInput {
                batch,
                author: attesting.name,
                seq,
                checked: self.checked.is_some(),
            };
            attesting.queue.added(size as u64);
            // Waits for room: a node whose checks fall behind takes fewer transactions.
            if attesting.tx_attester.send(input, size).await.is_err() {
                attesting.queue.done(size as u64);
                error!(
                    "cannot attest sealed batch {digest}: the attester is gone or it is too large"
                );
            }
        }
        let acks = self
            .peers
            .iter()
            .map(|(_, stake)| *stake)
            .zip(handlers)
            .collect();
        let sent = self
            .tx_quorum_waiter
            .send(QuorumWaiterMessage {
                digest,
                seq,
                acks,
                samples,
            })
            .await
            .is_ok();
        // A chunk of client transactions fills many batches: the attester is looked at after
        // each, not only between chunks, so this node seals at most one batch past its limit.
        if let Some(attesting) = self.attesting.as_ref().filter(|a| a.queue.is_behind()) {
            Self::pause(&self.backlog, Some(attesting), &self.metrics).await;
        }
        sent
    }

    /// One pass over a sealed batch: reports the `receive` and `seal` hops of its samples and
    /// returns their ids (for the `quorum` hop). Empty, and no allocation, when there are none.
    fn find_samples(&mut self, batch: &Batch) -> Vec<String> {
        let Some(hooks) = &self.samples else {
            return Vec::new();
        };
        let sealed = batch.sealed_at_ms();
        let mut found = Vec::new();
        // The chunk each transaction came in: arrivals are in transaction order.
        let mut chunk = 0;
        for (index, tx) in batch.tx_slices().enumerate() {
            let Some(id) = (hooks.detect)(tx) else {
                continue;
            };
            while self
                .arrivals
                .get(chunk + 1)
                .is_some_and(|(first, _)| *first as usize <= index)
            {
                chunk += 1;
            }
            let received = self.arrivals.get(chunk).map_or(sealed, |(_, t)| *t);
            (hooks.report)(id.clone(), "receive", received);
            (hooks.report)(id.clone(), "seal", sealed);
            found.push(id);
        }
        self.arrivals.clear();
        if let Some(index) = &hooks.index {
            index.note(batch.digest(), found.clone());
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use batch::{Batch, TxFrames, TX_PREFIX_LEN};
    use bytes::Bytes;
    use std::sync::atomic::Ordering;

    struct Harness {
        tx: mpsc::Sender<TxChunk>,
        rx: mpsc::Receiver<QuorumWaiterMessage>,
        store: BatchStore,
        metrics: Arc<MempoolMetrics>,
        backlog: Backlog,
    }

    fn harness(batch_size: usize, max_batch_delay: Duration) -> Harness {
        harness_with_backlog(batch_size, max_batch_delay, u64::MAX)
    }

    fn harness_with_backlog(
        batch_size: usize,
        max_batch_delay: Duration,
        max_uncommitted_bytes: u64,
    ) -> Harness {
        harness_with(batch_size, max_batch_delay, max_uncommitted_bytes, None)
    }

    fn harness_with(
        batch_size: usize,
        max_batch_delay: Duration,
        max_uncommitted_bytes: u64,
        samples: Option<SampleHooks>,
    ) -> Harness {
        let (tx, rx_transactions) = mpsc::channel(16);
        let (tx_quorum_waiter, rx) = mpsc::channel(16);
        let store = store::Store::new().batches();
        let metrics = Arc::new(MempoolMetrics::default());
        let backlog = Backlog::new(max_uncommitted_bytes, metrics.clone());
        // No peers: nothing goes on the network, the batch still reaches the quorum waiter.
        BatchMaker::spawn(
            batch_size,
            max_batch_delay,
            Vec::new(),
            store.clone(),
            metrics.clone(),
            samples,
            rx_transactions,
            tx_quorum_waiter,
            ReliableSender::new(),
            backlog.clone(),
            None,
            None,
        );
        Harness {
            tx,
            rx,
            store,
            metrics,
            backlog,
        }
    }

    /// A chunk as the port makes one: runs of whole frames (of up to four transactions here, so
    /// batches fill in the middle of a run as well as at its end).
    fn chunk(txs: &[Bytes]) -> TxChunk {
        TxChunk {
            received_ms: now_ms(),
            runs: txs.chunks(4).map(TxFrames::from_transactions).collect(),
            room: None,
        }
    }

    fn stored(store: &BatchStore, message: &QuorumWaiterMessage) -> Batch {
        let bytes = store
            .read(&message.digest)
            .expect("readable")
            .expect("stored at sealing");
        Batch::parse(bytes).expect("valid batch")
    }

    #[tokio::test(start_paused = true)]
    async fn a_sealed_batch_has_its_samples_noted_for_the_commit() {
        let index = batch::SampleIndex::default();
        let hooks = SampleHooks {
            detect: Arc::new(|tx: &[u8]| (tx[0] == 7).then(|| tx.len().to_string())),
            report: Arc::new(|_, _, _| {}),
            index: Some(index.clone()),
        };
        let tx_size = 100;
        let mut h = harness_with(
            4 * (TX_PREFIX_LEN + tx_size),
            Duration::from_secs(3600),
            u64::MAX,
            Some(hooks),
        );
        let txs: Vec<Bytes> = (5..9u8).map(|i| Bytes::from(vec![i; tx_size])).collect();
        h.tx.send(chunk(&txs)).await.expect("send");
        let sealed = h.rx.recv().await.expect("a batch");
        assert_eq!(sealed.samples, vec!["100".to_string()]);
        assert_eq!(index.take(&sealed.digest), Some(vec!["100".to_string()]));
    }

    #[tokio::test(start_paused = true)]
    async fn seals_as_soon_as_the_batch_is_full() {
        let tx_size = 100;
        let mut h = harness(10 * (TX_PREFIX_LEN + tx_size), Duration::from_secs(3600));
        let txs: Vec<Bytes> = (0..25u8).map(|i| Bytes::from(vec![i; tx_size])).collect();
        h.tx.send(chunk(&txs[..15])).await.expect("send");
        h.tx.send(chunk(&txs[15..])).await.expect("send");

        // The delay is an hour: these batches can only have been sealed on size.
        let start = Instant::now();
        let first = h.rx.recv().await.expect("first batch");
        let second = h.rx.recv().await.expect("second batch");
        assert!(start.elapsed() < Duration::from_secs(1));
        assert!(first.acks.is_empty());
        let (first, second) = (stored(&h.store, &first), stored(&h.store, &second));
        assert_eq!(first.tx_count(), 10);
        assert_eq!(second.tx_count(), 10);
        let sealed: Vec<Bytes> = first.transactions().chain(second.transactions()).collect();
        assert_eq!(sealed, txs[..20].to_vec());
        assert_eq!(h.metrics.sealed_batches.load(Ordering::Relaxed), 2);
        assert_eq!(h.metrics.sealed_txs.load(Ordering::Relaxed), 20);
        assert_eq!(
            h.metrics.sealed_bytes.load(Ordering::Relaxed),
            20 * tx_size as u64
        );

        // The 5 left over wait for the delay, then go out together.
        let rest = h.rx.recv().await.expect("timed-out batch");
        assert!(start.elapsed() >= Duration::from_secs(3600));
        assert_eq!(stored(&h.store, &rest).tx_count(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn seals_a_lone_transaction_after_the_delay_and_never_an_empty_batch() {
        let delay = Duration::from_millis(100);
        let mut h = harness(1_000_000, delay);
        // Nothing is sealed while there are no transactions, however long we wait.
        assert!(tokio::time::timeout(10 * delay, h.rx.recv()).await.is_err());

        let start = Instant::now();
        h.tx.send(chunk(&[Bytes::from_static(b"lonely")]))
            .await
            .expect("send");
        assert!(
            tokio::time::timeout(delay - Duration::from_millis(1), h.rx.recv())
                .await
                .is_err(),
            "sealed before max_batch_delay"
        );
        let sealed = h.rx.recv().await.expect("sealed on delay");
        assert!(start.elapsed() >= delay);
        let batch = stored(&h.store, &sealed);
        assert_eq!(batch.tx_count(), 1);
        assert_eq!(
            batch.transactions().collect::<Vec<_>>(),
            vec![Bytes::from_static(b"lonely")]
        );
        // And the timer does not fire again for an empty builder.
        assert!(tokio::time::timeout(10 * delay, h.rx.recv()).await.is_err());
    }

    /// Once this node's sealed, uncommitted batches reach the limit, no transaction is taken
    /// (the queue from the clients' port fills and its connections stop reading) until a batch
    /// commits; the time stopped is counted.
    #[tokio::test(start_paused = true)]
    async fn stops_taking_transactions_while_the_backlog_is_full() {
        let tx_size = 100;
        let batch_size = 10 * (TX_PREFIX_LEN + tx_size);
        let mut h = harness_with_backlog(batch_size, Duration::from_secs(3600), 1);
        let txs: Vec<Bytes> = (0..30u8).map(|i| Bytes::from(vec![i; tx_size])).collect();
        h.tx.send(chunk(&txs[..10])).await.expect("send");
        let first = h.rx.recv().await.expect("first batch");
        assert!(h.backlog.is_full());
        // Full: the next chunks wait in the channel, untaken.
        h.tx.send(chunk(&txs[10..20])).await.expect("send");
        h.tx.send(chunk(&txs[20..])).await.expect("send");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            h.rx.try_recv().is_err(),
            "sealed while the backlog was full"
        );
        assert_eq!(h.metrics.sealed_batches.load(Ordering::Relaxed), 1);
        assert_eq!(h.tx.capacity(), h.tx.max_capacity() - 2);
        // The first batch commits: one more batch is taken, which fills the backlog again.
        h.backlog.settled(&[first.digest]);
        let second = h.rx.recv().await.expect("second batch");
        assert_eq!(
            stored(&h.store, &second).transactions().collect::<Vec<_>>(),
            txs[10..20]
        );
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(h.rx.try_recv().is_err());
        h.backlog.settled(&[second.digest]);
        let third = h.rx.recv().await.expect("third batch");
        assert_eq!(stored(&h.store, &third).tx_count(), 10);
        assert_eq!(h.metrics.backpressure_pauses.load(Ordering::Relaxed), 3);
        assert!(h.metrics.backpressure_ms.load(Ordering::Relaxed) >= 120_000);
    }
}
