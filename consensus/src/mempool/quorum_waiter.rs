//! Releases a batch's digest to consensus once a quorum of stake holds the batch.
//!
//! The sealing node counts itself (it stored the batch before broadcasting it); each peer counts
//! once its ack arrives. Batches are waited on concurrently, and digests leave in sealing order:
//! all batches go to the same peers, so holding a quick batch behind a slower earlier one costs
//! little and gives the core the batches in the order the clients sent them.

use super::batch::now_ms;
use super::message::ACK;
use super::SampleHooks;
use crate::config::Stake;
use crate::network::CancelHandler;
use crypto::Digest;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::warn;

/// One sealed batch and, for each peer it was sent to, the peer's stake and pending ack.
pub struct QuorumWaiterMessage {
    pub digest: Digest,
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
}

impl QuorumWaiter {
    pub fn spawn(
        own_stake: Stake,
        quorum_threshold: Stake,
        rx_batches: mpsc::Receiver<QuorumWaiterMessage>,
        tx_consensus: mpsc::Sender<Digest>,
        samples: Option<SampleHooks>,
    ) -> JoinHandle<()> {
        let waiter = QuorumWaiter {
            own_stake,
            quorum_threshold,
            rx_batches,
            tx_consensus,
            samples,
        };
        tokio::spawn(waiter.run())
    }

    async fn run(mut self) {
        let mut waiting = FuturesOrdered::new();
        loop {
            tokio::select! {
                message = self.rx_batches.recv() => match message {
                    Some(message) => waiting.push_back(wait_for_quorum(
                        message,
                        self.own_stake,
                        self.quorum_threshold,
                    )),
                    None => break,
                },
                Some(result) = waiting.next() => {
                    if !self.release(result).await {
                        return;
                    }
                }
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
    async fn release(&self, (result, samples): (Result<Digest, Digest>, Vec<String>)) -> bool {
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
                true
            }
        }
    }
}

/// Resolves with `Ok(digest)` once acks (plus our own stake) reach `threshold`. Acks still
/// pending then are dropped, which tells the sender to stop retrying slow or dead peers. Resolves
/// with `Err(digest)` if every send was cancelled before a quorum (the sender shut down). The
/// batch's sample ids come back with the result.
async fn wait_for_quorum(
    message: QuorumWaiterMessage,
    own_stake: Stake,
    threshold: Stake,
) -> (Result<Digest, Digest>, Vec<String>) {
    let mut total = own_stake;
    let mut acks: FuturesUnordered<_> = message
        .acks
        .into_iter()
        .map(|(stake, handler)| async move {
            // A peer that refused the batch (its quota for us is full) does not hold it.
            handler
                .await
                .ok()
                .filter(|reply| &reply[..] == ACK)
                .map(|_| stake)
        })
        .collect();
    while total < threshold {
        match acks.next().await {
            Some(Some(stake)) => total += stake,
            Some(None) => {}
            None => return (Err(message.digest), message.samples),
        }
    }
    (Ok(message.digest), message.samples)
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

    #[tokio::test]
    async fn releases_at_a_quorum_and_not_before() {
        // Four authorities of stake 1: quorum 3 = ourselves + two acks; the third peer is dead.
        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        QuorumWaiter::spawn(1, 3, rx_batches, tx_consensus, None);

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
        // The remaining, never-answered ack was abandoned: its sender sees the drop.
        assert!(first_acks[0].is_closed());
        assert!(second_acks[0].is_closed());
    }

    #[tokio::test]
    async fn a_lone_authority_needs_no_acks_and_cancelled_sends_release_nothing() {
        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        QuorumWaiter::spawn(1, 3, rx_batches, tx_consensus, None);
        let (doomed, senders, _) = batch(b"doomed", 3);
        tx_batches.send(doomed).await.expect("send");
        drop(senders);
        nothing_released(&mut rx).await;

        let (tx_batches, rx_batches) = mpsc::channel(8);
        let (tx_consensus, mut rx) = mpsc::channel(8);
        QuorumWaiter::spawn(1, 1, rx_batches, tx_consensus, None);
        let (alone, _, digest) = batch(b"alone", 0);
        tx_batches.send(alone).await.expect("send");
        let released = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("released");
        assert_eq!(released, Some(digest));
    }
}
