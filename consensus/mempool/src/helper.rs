//! Answers peers' batch requests with the batches this node holds, paced per member.
//!
//! A request is a few bytes per digest while a reply is a whole batch: up to
//! `max_request_digests` (1,024) batches of 500 KB, half a gigabyte for a 33 KB request, and a
//! member could ask again and again. Each member therefore has a budget of reply bytes that
//! refills at [`ReplyBudget::rate`] up to [`ReplyBudget::burst`]; what it asked for beyond its
//! budget waits in its own queue (each digest once, at most `max_request_digests` of them) and
//! goes out as the budget refills. Other members are served from their own budgets meanwhile, so
//! one member's requests never hold back another's replies.

use super::message::MempoolMessage;
use config::Committee;
use crypto::{Digest, PublicKey};
use network::SimpleSender;
use plumbing::budgeted::BudgetedReceiver;
use plumbing::clock::{sleep_until, Instant};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;
use store::BatchStore;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// The digests a peer wants, and who it is.
pub type HelperRequest = (Vec<Digest>, PublicKey);

/// How many bytes of batches one member may get from us.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplyBudget {
    /// Bytes per second.
    pub rate: f64,
    /// Bytes at once, after a pause.
    pub burst: f64,
}

impl Default for ReplyBudget {
    /// 128 MiB/s, and as much at once: a member that missed batches (a restart, a partition)
    /// fetches from its peers' budgets together, well above what a committee commits here
    /// (400,000 transactions of 197 bytes a second are 80 MB/s), while a member that asks
    /// without end gets no more than that from each peer.
    fn default() -> Self {
        ReplyBudget {
            rate: (128 << 20) as f64,
            burst: (128 << 20) as f64,
        }
    }
}

/// One member's budget and the digests it waits for.
struct Member {
    address: std::net::SocketAddr,
    /// Bytes it may still get now; a batch goes out while this is positive, so it may dip
    /// below zero by one batch.
    tokens: f64,
    refilled: Instant,
    queue: VecDeque<Digest>,
    queued: HashSet<Digest>,
}

impl Member {
    fn refill(&mut self, budget: &ReplyBudget, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * budget.rate).min(budget.burst);
        self.refilled = now;
    }

    /// When its budget is positive again, if it waits for anything.
    fn next_turn(&self, budget: &ReplyBudget) -> Option<Instant> {
        if self.queue.is_empty() {
            return None;
        }
        if self.tokens > 0.0 {
            return Some(self.refilled);
        }
        // One byte past zero, so the budget is positive when we wake.
        let wait = (1.0 - self.tokens) / budget.rate;
        Some(self.refilled + Duration::from_secs_f64(wait.min(3_600.0)))
    }
}

pub struct Helper {
    committee: Committee,
    /// Most digests a member may wait for (`Parameters::max_request_digests`).
    max_request_digests: usize,
    budget: ReplyBudget,
    store: BatchStore,
    rx_requests: BudgetedReceiver<HelperRequest>,
    /// Best effort: a requestor that misses an answer asks again after its retry delay.
    network: SimpleSender,
    /// Members that asked for something, by key.
    members: HashMap<PublicKey, Member>,
}

impl Helper {
    pub fn spawn(
        committee: Committee,
        store: BatchStore,
        rx_requests: BudgetedReceiver<HelperRequest>,
        network: SimpleSender,
        max_request_digests: usize,
    ) -> JoinHandle<()> {
        Self::spawn_with_budget(
            committee,
            store,
            rx_requests,
            network,
            max_request_digests,
            ReplyBudget::default(),
        )
    }

    /// As [`Helper::spawn`], with each member's reply `budget`.
    pub fn spawn_with_budget(
        committee: Committee,
        store: BatchStore,
        rx_requests: BudgetedReceiver<HelperRequest>,
        network: SimpleSender,
        max_request_digests: usize,
        budget: ReplyBudget,
    ) -> JoinHandle<()> {
        let helper = Helper {
            committee,
            max_request_digests: max_request_digests.max(1),
            budget,
            store,
            rx_requests,
            network,
            members: HashMap::new(),
        };
        tokio::spawn(helper.run())
    }

    async fn run(mut self) {
        loop {
            let next_turn = self
                .members
                .values()
                .filter_map(|member| member.next_turn(&self.budget))
                .min();
            tokio::select! {
                request = self.rx_requests.recv() => match request {
                    Some((digests, requestor)) => {
                        if self.enqueue(requestor, digests) {
                            self.serve(&requestor).await;
                        }
                    }
                    None => break,
                },
                () = sleep_until(next_turn.unwrap_or_else(Instant::now)), if next_turn.is_some() => {
                    let due: Vec<PublicKey> = self
                        .members
                        .iter()
                        .filter(|(_, m)| m.next_turn(&self.budget).is_some_and(|t| t <= Instant::now()))
                        .map(|(key, _)| *key)
                        .collect();
                    for member in due {
                        self.serve(&member).await;
                    }
                }
            }
        }
    }

    /// Queues the digests `requestor` asked for that it does not wait for already; false if it
    /// is no member.
    fn enqueue(&mut self, requestor: PublicKey, digests: Vec<Digest>) -> bool {
        let Some(address) = self
            .committee
            .authority(&requestor)
            .map(|a| a.mempool_address)
        else {
            warn!("ignoring a batch request from unknown authority {requestor}");
            return false;
        };
        let budget = self.budget;
        let member = self.members.entry(requestor).or_insert_with(|| Member {
            address,
            tokens: budget.burst,
            refilled: Instant::now(),
            queue: VecDeque::new(),
            queued: HashSet::new(),
        });
        // One reply per distinct digest, and no more waiting than the cap: repeats would
        // amplify a requestor's bandwidth many thousand times over. The peer handler already
        // refuses requests over the cap; the cap here keeps the helper safe on its own.
        for digest in digests {
            if member.queue.len() >= self.max_request_digests {
                debug!(
                    "{requestor} waits for {} batches already; dropping the rest of its request",
                    member.queue.len()
                );
                break;
            }
            if member.queued.insert(digest) {
                member.queue.push_back(digest);
            }
        }
        true
    }

    /// Sends `requestor` what it waits for, while its budget lasts.
    async fn serve(&mut self, requestor: &PublicKey) {
        let Some(member) = self.members.get_mut(requestor) else {
            return;
        };
        member.refill(&self.budget, Instant::now());
        while member.tokens > 0.0 {
            let Some(digest) = member.queue.pop_front() else {
                break;
            };
            member.queued.remove(&digest);
            // Batches we do not hold are skipped: the requestor retries with other peers.
            // Only the batch namespace is read, so a block (or anything else stored under the
            // same digest) is never served as a batch.
            match self.store.read(&digest) {
                Ok(Some(batch)) => {
                    let frame = MempoolMessage::encode_batch(&batch);
                    member.tokens -= frame.len() as f64;
                    self.network.send(member.address, frame).await;
                }
                Ok(None) => debug!("cannot serve batch {digest}: not held"),
                Err(e) => warn!("cannot serve batch {digest}: {e}"),
            }
        }
        if !member.queue.is_empty() {
            debug!(
                "{requestor} is over its reply budget; {} batches wait for it",
                member.queue.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use config::Authority;
    use crypto::KeyPair;
    use futures::StreamExt;
    use network::codec;
    use plumbing::budgeted::{self, BudgetedSender};
    use std::net::SocketAddr;
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio_util::codec::FramedRead;

    /// The helper's input, as the node makes it (room for any request these tests send).
    fn requests() -> (
        BudgetedSender<HelperRequest>,
        BudgetedReceiver<HelperRequest>,
    ) {
        let (tx, rx, _) = budgeted::channel(64, 64 << 20);
        (tx, rx)
    }

    /// A member with one unit of stake whose every port is `address`.
    fn member_at(address: SocketAddr) -> Authority {
        Authority {
            stake: 1,
            consensus_address: address,
            mempool_address: address,
            transactions_address: address,
        }
    }

    /// Queues a request, counted as the peer handler counts it: its encoded size.
    async fn request(tx: &BudgetedSender<HelperRequest>, digests: Vec<Digest>, from: PublicKey) {
        let size = MempoolMessage::encode_request(&digests, &from).len();
        tx.send((digests, from), size).await.expect("send");
    }

    /// A request that names one digest many times gets one reply per distinct digest, not a copy
    /// of the batch per repeat (as many as the sender's queue would take).
    #[tokio::test]
    async fn byzantine_repeated_digests_get_one_reply_each() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        let requestor = KeyPair::from_seed(1).name;
        let committee = Committee {
            authorities: [(requestor, member_at(address))].into_iter().collect(),
        };
        let store = store::Store::new().batches();
        let (held, last) = (Digest::of(b"held"), Digest::of(b"last"));
        store
            .write(held, Bytes::from_static(b"held batch"))
            .await
            .expect("write");
        store
            .write(last, Bytes::from_static(b"last batch"))
            .await
            .expect("write");
        let (tx, rx) = requests();
        Helper::spawn(committee, store, rx, SimpleSender::new(), 1_024);
        request(&tx, vec![held; 260_000], requestor).await;
        // Replies go out in order on one connection: once `last` arrives, every reply to the
        // first request has.
        request(&tx, vec![last], requestor).await;
        let (socket, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("connected in time")
            .expect("accept");
        let mut frames = FramedRead::new(socket, codec(1024));
        let mut copies = 0;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), frames.next())
                .await
                .expect("in time")
                .expect("a frame")
                .expect("valid");
            match MempoolMessage::decode(frame.freeze()).expect("decodes") {
                MempoolMessage::Batch(bytes) if &bytes[..] == b"held batch" => copies += 1,
                MempoolMessage::Batch(bytes) if &bytes[..] == b"last batch" => break,
                other => panic!("unexpected reply {other:?}"),
            }
        }
        assert_eq!(copies, 1, "one reply per distinct digest");
    }

    #[tokio::test]
    async fn sends_held_batches_to_the_requestor_only() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        let requestor = KeyPair::from_seed(1).name;
        let committee = Committee {
            authorities: [(requestor, member_at(address))].into_iter().collect(),
        };
        let store = store::Store::new();
        let held = Digest::of(b"held");
        store
            .batches()
            .write(held, Bytes::from_static(b"batch"))
            .await
            .expect("write");
        // A block under another digest, asked for as a batch, is not served.
        let block = Digest::of(b"block");
        store
            .blocks()
            .write(block, Bytes::from_static(b"block bytes"))
            .await
            .expect("write");
        let store = store.batches();
        let (tx, rx) = requests();
        Helper::spawn(committee, store, rx, SimpleSender::new(), 1_024);

        // An unknown requestor is ignored; a known one gets the batch it asked for and we hold.
        request(&tx, vec![held], KeyPair::from_seed(2).name).await;
        request(&tx, vec![Digest::of(b"missing"), block, held], requestor).await;
        let (socket, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("connected in time")
            .expect("accept");
        let mut frames = FramedRead::new(socket, codec(1024));
        let frame = tokio::time::timeout(Duration::from_secs(10), frames.next())
            .await
            .expect("in time")
            .expect("a frame")
            .expect("valid");
        assert_eq!(
            MempoolMessage::decode(frame.freeze()).expect("decodes"),
            MempoolMessage::Batch(Bytes::from_static(b"batch"))
        );
    }

    /// Reads frames from the first connection to `listener`, counting their bytes, until
    /// `enough` bytes came; returns when the count got there.
    async fn read_until(listener: TcpListener, enough: usize) -> std::time::Instant {
        let (socket, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("connected in time")
            .expect("accept");
        let mut frames = FramedRead::new(socket, codec(1 << 20));
        let mut bytes = 0;
        while bytes < enough {
            let frame = tokio::time::timeout(Duration::from_secs(30), frames.next())
                .await
                .expect("in time")
                .expect("a frame")
                .expect("valid");
            bytes += frame.len();
        }
        std::time::Instant::now()
    }

    /// A member that asks for the same 8 batches of 100 KB twenty times over got 16 MB at once
    /// (as fast as loopback takes it); now its replies are paced by its own budget, and another
    /// member's reply does not wait behind them.
    #[tokio::test]
    async fn byzantine_batch_requests_are_paced_per_member() {
        const BATCH: usize = 100_000;
        let budget = ReplyBudget {
            rate: 1_000_000.0,
            burst: 500_000.0,
        };
        let (flooder_listener, honest_listener) = (
            TcpListener::bind("127.0.0.1:0").await.expect("bind"),
            TcpListener::bind("127.0.0.1:0").await.expect("bind"),
        );
        let (flooder, honest) = (KeyPair::from_seed(1).name, KeyPair::from_seed(2).name);
        let committee = Committee {
            authorities: [
                (
                    flooder,
                    member_at(flooder_listener.local_addr().expect("addr")),
                ),
                (
                    honest,
                    member_at(honest_listener.local_addr().expect("addr")),
                ),
            ]
            .into_iter()
            .collect(),
        };
        let store = store::Store::new().batches();
        let mut digests = Vec::new();
        for i in 0..8u8 {
            let digest = Digest::of(&[i]);
            store
                .write(digest, Bytes::from(vec![i; BATCH]))
                .await
                .expect("write");
            digests.push(digest);
        }
        let (tx, rx) = requests();
        Helper::spawn_with_budget(committee, store, rx, SimpleSender::new(), 1_024, budget);

        let start = std::time::Instant::now();
        for _ in 0..20 {
            request(&tx, digests.clone(), flooder).await;
        }
        request(&tx, vec![digests[0]], honest).await;
        let honest_served = tokio::spawn(read_until(honest_listener, BATCH));
        // 1.2 MB for the flooder (of the 1.3 MB its 8 batches, once each, would take from its
        // burst and its queue): the burst, one batch over, then at least 0.6 s of its rate.
        let enough = 1_200_000;
        let flooder_served = read_until(flooder_listener, enough).await;
        let floor = (enough as f64 - budget.burst - (BATCH + 1) as f64) / budget.rate;
        let took = flooder_served.duration_since(start).as_secs_f64();
        assert!(
            took >= floor,
            "the flooder got {enough} bytes in {took:.3} s, faster than its budget allows ({floor:.3} s)"
        );
        let honest_served = honest_served.await.expect("honest reader");
        assert!(
            honest_served < flooder_served,
            "the other member's reply waited behind the flooder's"
        );
    }
}
