//! Releases a batch's digest to consensus once a quorum of stake holds the batch.
//!
//! The sealing node counts itself (it stored the batch before broadcasting it); each peer counts
//! once its ack arrives. Batches are waited on concurrently, and digests leave in sealing order:
//! all batches go to the same peers, so holding a quick batch behind a slower earlier one costs
//! little and gives the core the batches in the order the clients sent them.
//!
//! Peers that have not acknowledged at the quorum still get the batch: every member needs every
//! batch of a block to vote for it. Cancelling the send to the slowest peer (as once done) made
//! exactly the peer that was behind fetch each batch again by request, from the author and then
//! from others, when a block named it: more work for the node least able to afford it, and a
//! loop that kept it behind. The remaining sends stay with the reliable sender, whose per-peer
//! buffer is bounded in bytes (a dead peer costs at most that).

use super::attest::Attestations;
use super::backlog::Backlog;
use super::message::ACK;
use super::metrics::MempoolMetrics;
use super::samples::SampleHooks;
use config::Stake;
use crypto::Digest;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use futures::StreamExt;
use network::CancelHandler;
use plumbing::now_ms;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

/// One sealed batch and, for each peer it was sent to, the peer's stake and pending ack.
pub struct QuorumWaiterMessage {
    pub digest: Digest,
    /// Its number in this node's sequence of batches (which names its attesters).
    pub seq: u64,
    pub acks: Vec<(Stake, CancelHandler)>,
    /// Ids of the latency samples in the batch (usually none), for their `quorum` hop.
    pub samples: Vec<String>,
}

pub struct QuorumWaiter {
    own_stake: Stake,
    quorum_threshold: Stake,
    rx_batches: mpsc::Receiver<QuorumWaiterMessage>,
    tx_consensus: mpsc::Sender<Digest>,
    samples: Option<SampleHooks>,
    /// A batch that cannot reach a quorum leaves the backlog here.
    backlog: Backlog,
    /// Acks still due after their batch's quorum: the sends stay alive until they resolve.
    stragglers: FuturesUnordered<PendingAck>,
    /// With `--verify=attested`: a batch also waits for f+1 stake of matching statements, so
    /// the blocks that name it find it certified at every node: until a time after its sealing
    /// adapted to how long the committee's statements take (`Attestations::certified`).
    attestations: Option<Attestations>,
    metrics: Arc<MempoolMetrics>,
}

impl QuorumWaiter {
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        own_stake: Stake,
        quorum_threshold: Stake,
        rx_batches: mpsc::Receiver<QuorumWaiterMessage>,
        tx_consensus: mpsc::Sender<Digest>,
        samples: Option<SampleHooks>,
        backlog: Backlog,
        attestations: Option<Attestations>,
        metrics: Arc<MempoolMetrics>,
    ) -> JoinHandle<()> {
        let waiter = QuorumWaiter {
            own_stake,
            quorum_threshold,
            rx_batches,
            tx_consensus,
            samples,
            backlog,
            stragglers: FuturesUnordered::new(),
            attestations,
            metrics,
        };
        tokio::spawn(waiter.run())
    }

    async fn run(mut self) {
        let mut waiting = FuturesOrdered::new();
        loop {
            tokio::select! {
                message = self.rx_batches.recv() => match message {
                    Some(message) => waiting.push_back(wait_for_certificate(
                        wait_for_quorum(message, self.own_stake, self.quorum_threshold),
                        self.attestations.clone(),
                    )),
                    None => break,
                },
                Some(result) = waiting.next() => {
                    if !self.release(result).await {
                        return;
                    }
                }
                Some(_) = self.stragglers.next(), if !self.stragglers.is_empty() => {}
            }
        }
        // The batch maker is gone; still release what reaches a quorum.
        while let Some(result) = waiting.next().await {
            if !self.release(result).await {
                return;
            }
        }
    }

    /// Returns false once consensus no longer listens.
    async fn release(&mut self, quorum: Quorum) -> bool {
        let Quorum {
            result,
            samples,
            stragglers,
            unattested,
            ..
        } = quorum;
        if unattested {
            MempoolMetrics::add(&self.metrics.released_unattested, 1);
        }
        if let Some(attestations) = &self.attestations {
            let wait = attestations.wait().as_millis() as u64;
            self.metrics.attest_wait_ms.store(wait, Ordering::Relaxed);
        }
        self.stragglers.extend(stragglers);
        match result {
            Ok(digest) => {
                if let Some(hooks) = &self.samples {
                    let t_ms = now_ms();
                    for id in samples {
                        (hooks.report)(id, "quorum", t_ms);
                    }
                }
                self.tx_consensus.send(digest).await.is_ok()
            }
            Err(digest) => {
                warn!("batch {digest} cannot reach a quorum: its sends were dropped");
                self.backlog.settled(&[digest]);
                true
            }
        }
    }
}

/// An ack on its way: the stake of the peer if it acknowledged, `None` if it refused or the send
/// was dropped.
type PendingAck = Pin<Box<dyn Future<Output = Option<Stake>> + Send>>;

/// How the wait for one batch's quorum ended.
struct Quorum {
    /// `Ok(digest)` at a quorum, `Err(digest)` if every send was dropped before one.
    result: Result<Digest, Digest>,
    seq: u64,
    /// Ids of the latency samples in the batch.
    samples: Vec<String>,
    /// Acks still due at the quorum.
    stragglers: Vec<PendingAck>,
    /// The batch waited for its statements in vain.
    unattested: bool,
}

/// After the quorum of acks, waits for the batch's statements (when this node attests).
async fn wait_for_certificate(
    quorum: impl Future<Output = Quorum>,
    attestations: Option<Attestations>,
) -> Quorum {
    let mut quorum = quorum.await;
    if let (Ok(digest), Some(attestations)) = (&quorum.result, attestations) {
        quorum.unattested = !attestations.certified(digest, quorum.seq).await;
    }
    quorum
}

/// Resolves with `Ok(digest)` once acks (plus our own stake) reach `threshold`, handing back
/// the acks still pending (their sends go on), or with `Err(digest)` if every send was dropped
/// before a quorum (the sender shut down, or its buffer overflowed). The batch's sample ids come
/// back with the result.
async fn wait_for_quorum(
    message: QuorumWaiterMessage,
    own_stake: Stake,
    threshold: Stake,
) -> Quorum {
    let mut total = own_stake;
    let mut acks: FuturesUnordered<PendingAck> = message
        .acks
        .into_iter()
        .map(|(stake, handler)| -> PendingAck {
            Box::pin(async move {
                // A peer that refused the batch (its quota for us is full) does not hold it.
                handler
                    .await
                    .ok()
                    .filter(|reply| &reply[..] == ACK)
                    .map(|_| stake)
            })
        })
        .collect();
    while total < threshold {
        match acks.next().await {
            Some(Some(stake)) => total += stake,
            Some(None) => {}
            None => {
                return Quorum {
                    result: Err(message.digest),
                    seq: message.seq,
                    samples: message.samples,
                    stragglers: Vec::new(),
                    unattested: false,
                }
            }
        }
    }
    Quorum {
        result: Ok(message.digest),
        seq: message.seq,
        samples: message.samples,
        stragglers: acks.into_iter().collect(),
        unattested: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::time::Duration;
    use tokio::sync::oneshot;

    fn batch(
        name: &[u8],
        peers: usize,
    ) -> (QuorumWaiterMessage, Vec<oneshot::Sender<Bytes>>, Digest) {
        let digest = Digest::of(name);
        let (senders, acks): (Vec<_>, Vec<_>) = (0..peers)
            .map(|_| {
                let (tx, rx) = oneshot::channel();
                (tx, (1, rx))
            })
            .unzip();
        (
            QuorumWaiterMessage {
                digest,
                seq: 0,
                acks,
                samples: Vec::new(),
            },
            senders,
            digest,
        )
    }

    async fn nothing_released(rx: &mut mpsc::Receiver<Digest>) {
        // Everything before this point is in-process: let the waiter run, then check.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(rx.try_recv().is_err(), "released before a quorum");
    }

    fn unbounded_backlog() -> Backlog {
        Backlog::new(u64::MAX, Default::default())
    }

    #[tokio::test]
    async fn releases_at_a_quorum_and_not_before() {
        // Four authorities of stake 1: quorum 3 = ourselves + two acks; the third peer is slow.
        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        QuorumWaiter::spawn(
            1,
            3,
            rx_batches,
            tx_consensus,
            None,
            unbounded_backlog(),
            None,
            Default::default(),
        );

        let (first, mut first_acks, first_digest) = batch(b"first", 3);
        let (second, mut second_acks, second_digest) = batch(b"second", 3);
        tx_batches.send(first).await.expect("send");
        tx_batches.send(second).await.expect("send");
        nothing_released(&mut rx).await;

        // The second batch reaches its quorum first; it leaves right after the first one, in
        // sealing order.
        let ack = || Bytes::from_static(b"Ack");
        second_acks.remove(0).send(ack()).expect("ack");
        nothing_released(&mut rx).await;
        second_acks.remove(0).send(ack()).expect("ack");
        first_acks.remove(0).send(ack()).expect("ack");
        nothing_released(&mut rx).await;
        first_acks.remove(0).send(ack()).expect("ack");

        let released = tokio::time::timeout(Duration::from_secs(5), async {
            (rx.recv().await, rx.recv().await)
        })
        .await
        .expect("released");
        assert_eq!(released, (Some(first_digest), Some(second_digest)));
        // The slow peer's sends are not cancelled: it needs the batches to vote. (Dropping the
        // wait would close these, and the reliable sender would skip the unwritten messages.)
        nothing_released(&mut rx).await;
        assert!(!first_acks[0].is_closed());
        assert!(!second_acks[0].is_closed());
        // Its late acks are taken and change nothing.
        first_acks.remove(0).send(ack()).expect("still awaited");
        second_acks.remove(0).send(ack()).expect("still awaited");
        nothing_released(&mut rx).await;
    }

    #[tokio::test]
    async fn a_lone_authority_needs_no_acks_and_cancelled_sends_release_nothing() {
        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        let backlog = Backlog::new(1, Default::default());
        QuorumWaiter::spawn(
            1,
            3,
            rx_batches,
            tx_consensus,
            None,
            backlog.clone(),
            None,
            Default::default(),
        );
        let (doomed, senders, digest) = batch(b"doomed", 3);
        backlog.sealed(digest, 10);
        tx_batches.send(doomed).await.expect("send");
        drop(senders);
        nothing_released(&mut rx).await;
        // Given up: it no longer holds the mempool back.
        assert_eq!(backlog.bytes(), 0);

        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        QuorumWaiter::spawn(
            1,
            1,
            rx_batches,
            tx_consensus,
            None,
            unbounded_backlog(),
            None,
            Default::default(),
        );
        let (alone, _, digest) = batch(b"alone", 0);
        tx_batches.send(alone).await.expect("send");
        let released = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("released");
        assert_eq!(released, Some(digest));
    }

    /// Statements have taken 10 ms; an attester then withholds one. The batch waits a few
    /// times the committee's delay, not a fixed second (during which the author's later
    /// batches, released in order, waited behind it).
    #[tokio::test(start_paused = true)]
    async fn a_withheld_statement_holds_its_batch_a_few_statement_delays() {
        use crate::attest::{attesters, Attestation, Attestations, Finding, Limits};
        use config::{Authority, Committee};
        use crypto::KeyPair;
        let keys: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
        let address = "127.0.0.1:1".parse().expect("address");
        let authorities = keys
            .iter()
            .map(|k| {
                let a = Authority {
                    stake: 1,
                    consensus_address: address,
                    mempool_address: address,
                    transactions_address: address,
                };
                (k.name, a)
            })
            .collect();
        let committee = Committee { authorities };
        let me = keys[0].name;
        let table = Attestations::new(me, committee.clone(), Limits::default());
        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        QuorumWaiter::spawn(
            1,
            1,
            rx_batches,
            tx_consensus,
            None,
            unbounded_backlog(),
            Some(table.clone()),
            Default::default(),
        );
        let clean = Finding {
            tx_count: 1,
            invalid: Vec::new(),
        };
        let sign = |seq: u64, digest: Digest, key: &KeyPair| {
            Attestation::new(digest, me, seq, clean.clone(), key.name, &key.secret)
        };
        for seq in 0u64..21 {
            let digest = Digest::of(&seq.to_le_bytes());
            table.sealed(digest, seq);
            table.insert_own(sign(seq, digest, &keys[0]));
            let start = tokio::time::Instant::now();
            tx_batches
                .send(QuorumWaiterMessage {
                    digest,
                    seq,
                    acks: Vec::new(),
                    samples: Vec::new(),
                })
                .await
                .expect("send");
            let other = attesters(&committee, &me, seq)[1];
            let withheld = seq == 20;
            if !withheld {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let key = keys.iter().find(|k| k.name == other).expect("member");
                table.insert(sign(seq, digest, key)).expect("kept");
            }
            assert_eq!(rx.recv().await, Some(digest));
            if withheld {
                assert_eq!(start.elapsed(), crate::attest::MIN_WAIT);
            }
        }
    }
}
