//! Holds back blocks whose batches this node has not received yet, and tells which blocks name
//! a batch again (twice in the block, or one committed within the GC window): the core does not
//! vote for those.
//!
//! A replica votes for a block only once every batch it references is in the local store, so a
//! committed block can always be resolved to its transactions. Missing batches are requested from
//! the mempool's synchronizer; when they land, the block is looped back into the core.
//!
//! A repeated batch only costs the block this node's vote, never its place in the chain:
//! whether a batch committed before is this node's view (an honest node that had not committed
//! the earlier block yet votes for it), so the block may be certified all the same, and every
//! honest node must then store and commit it, or it stalls behind it for good. The committer
//! skips a batch committed again within the round window (`RecentlyCommitted::record`), on every
//! node alike, so its bytes are not needed either: it is not waited for.
//!
//! Waiting costs a task, a store waiter per missing batch and a batch request, so a leader that
//! equivocates (signs many blocks for its round, each naming batches nobody has) could make us
//! wait on any number of them. We wait on at most [`MAX_WAITING_PER_SLOT`] blocks per (author,
//! round) and refuse further ones, except a block that a verified QC certifies: that one the
//! chain needs (at most one per round can be certified), and it comes back through the
//! synchronizer when a child names it, however many blocks of its round we refused before.

use crate::messages::Block;
use crate::payload::gc::{GcWindow, RecentlyCommitted};
use config::Round;
use crypto::{Digest, Hash, PublicKey};
use futures::future::join_all;
use mempool::ConsensusMempoolMessage;
use std::collections::{BTreeMap, HashMap, HashSet};
use store::{BatchStore, Store};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::debug;

/// Blocks of one (author, round) whose batches we wait for at once, besides a certified one. An
/// honest leader proposes one block per round; a second one means it equivocates.
pub const MAX_WAITING_PER_SLOT: usize = 2;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PayloadError {
    #[error(
        "{author} proposed another block for round {round} ({block}) while we wait on \
         {MAX_WAITING_PER_SLOT} of its blocks for that round; not waiting on more"
    )]
    TooManyWaiting {
        author: PublicKey,
        round: Round,
        block: Digest,
    },
    #[error("block {block} names batch {batch} twice")]
    Repeated { block: Digest, batch: Digest },
    #[error("block {block} names batch {batch}, already committed by block {by}")]
    AlreadyCommitted {
        block: Digest,
        batch: Digest,
        by: Digest,
    },
}

pub struct PayloadWaiter {
    /// The batch namespace only: a digest is available if a batch is stored under it, never
    /// because a block (or anything else) happens to be.
    store: BatchStore,
    tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    tx_loopback: mpsc::Sender<Block>,
    pending: HashSet<Digest>,
    waiters: BTreeMap<Round, Vec<Waiting>>,
    /// Digests of blocks that verified QCs certify, by the blocks' round: every block that gets
    /// here was verified, and so was its QC.
    certified: BTreeMap<Round, HashSet<Digest>>,
    /// Batches committed within the GC window. A batch committed again would be delivered
    /// twice, and once collected no one could serve it: the committer (before it stopped
    /// waiting on missing batches) and then the core would hang on it.
    committed: RecentlyCommitted,
    /// Batches named by blocks this node stored that may still commit, with the latest such
    /// block's round: they must stay in the store (see `needs`).
    named: HashMap<Digest, Round>,
}

/// A block whose batches we wait for.
struct Waiting {
    block: Digest,
    author: PublicKey,
    certified: bool,
    task: AbortHandle,
}

impl PayloadWaiter {
    pub fn new(
        store: Store,
        tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
        tx_loopback: mpsc::Sender<Block>,
        window: GcWindow,
    ) -> Self {
        PayloadWaiter {
            store: store.batches(),
            tx_mempool,
            tx_loopback,
            pending: HashSet::new(),
            waiters: BTreeMap::new(),
            certified: BTreeMap::new(),
            committed: RecentlyCommitted::new(window),
            named: HashMap::new(),
        }
    }

    /// Whether this node votes for `block`'s payload: not if it names a batch twice, or names a
    /// batch committed (by another block) within the GC window: honest leaders propose each of
    /// their batches until it commits, never after.
    pub fn check(&self, block: &Block) -> Result<(), PayloadError> {
        let digest = block.digest();
        let mut seen = HashSet::with_capacity(block.payload.len());
        for batch in &block.payload {
            if !seen.insert(batch) {
                return Err(PayloadError::Repeated {
                    block: digest,
                    batch: *batch,
                });
            }
            // The same block may come back (a retransmission, a sync reply) after it committed.
            if let Some(by) = self
                .committed
                .committed_by(batch)
                .filter(|by| *by != digest)
            {
                return Err(PayloadError::AlreadyCommitted {
                    block: digest,
                    batch: *batch,
                    by,
                });
            }
        }
        Ok(())
    }

    /// True if every batch of `block` that it would deliver is stored. Otherwise starts fetching
    /// the missing ones (once per block) and returns false; the block comes back through the
    /// loopback channel. An error means the block is not waited for (see `TooManyWaiting`).
    pub async fn available(&mut self, block: &Block) -> Result<bool, PayloadError> {
        // Its QC certifies its parent, which may be one we refused to wait on.
        self.certified
            .entry(block.qc.round)
            .or_default()
            .insert(block.qc.hash);
        let digest = block.digest();
        let mut seen = HashSet::with_capacity(block.payload.len());
        let missing: Vec<Digest> = block
            .payload
            .iter()
            // Batches its commit would not deliver (repeats) need no bytes.
            .filter(|d| seen.insert(**d) && !self.committed.is_repeat(d, &digest, block.round))
            // A failed read counts as missing: the batch is then fetched again.
            .filter(|d| !self.store.contains(d).unwrap_or(false))
            .copied()
            .collect();
        if missing.is_empty() {
            return Ok(true);
        }
        if self.pending.contains(&digest) {
            return Ok(false);
        }
        let certified = self
            .certified
            .get(&block.round)
            .is_some_and(|digests| digests.contains(&digest));
        if !certified {
            let waiting = self.waiters.get(&block.round).map_or(0, |waiting| {
                waiting
                    .iter()
                    .filter(|w| w.author == block.author && !w.certified)
                    .count()
            });
            if waiting >= MAX_WAITING_PER_SLOT {
                return Err(PayloadError::TooManyWaiting {
                    author: block.author,
                    round: block.round,
                    block: digest,
                });
            }
        }
        self.pending.insert(digest);
        debug!("{:?} waits for {} batches", block, missing.len());
        let request =
            ConsensusMempoolMessage::Synchronize(missing.clone(), block.author, block.round);
        if self.tx_mempool.send(request).await.is_err() {
            return Ok(false);
        }
        let store = self.store.clone();
        let tx_loopback = self.tx_loopback.clone();
        let (round, author) = (block.round, block.author);
        let block = block.clone();
        let task = tokio::spawn(async move {
            join_all(missing.into_iter().map(|d| store.notify_read(d))).await;
            let _ = tx_loopback.send(block).await;
        });
        self.waiters.entry(round).or_default().push(Waiting {
            block: digest,
            author,
            certified,
            task: task.abort_handle(),
        });
        Ok(false)
    }

    /// `block`, stored, may still commit: its batches must stay.
    pub fn named(&mut self, block: &Block) {
        for batch in &block.payload {
            let latest = self.named.entry(*batch).or_insert(block.round);
            *latest = (*latest).max(block.round);
        }
    }

    /// Whether a block this node stored that may still commit names `batch`: such a batch is
    /// not drained from its sender's quota (see `mempool::AuthorQuota`), or the block's commit
    /// would find it gone.
    pub fn needs(&self, batch: &Digest) -> bool {
        self.named.contains_key(batch)
    }

    /// `block` commits: its batches may not be proposed again within the GC window.
    pub fn committed(&mut self, block: &Block) {
        self.committed.insert(block);
        self.committed.expire(block.round);
    }

    /// Called when a block leaves the waiting set through the loopback.
    pub fn resolved(&mut self, block: &Digest) {
        self.pending.remove(block);
    }

    /// Stops waiting for blocks of rounds below `round`: they can no longer be committed.
    pub fn cleanup(&mut self, round: Round) {
        let keep = self.waiters.split_off(&round);
        for waiting in std::mem::replace(&mut self.waiters, keep)
            .into_values()
            .flatten()
        {
            waiting.task.abort();
            self.pending.remove(&waiting.block);
        }
        self.certified = self.certified.split_off(&round);
    }

    /// Round `round` committed: blocks at or below it have committed, or never will.
    pub fn settled_up_to(&mut self, round: Round) {
        self.named.retain(|_, named| *named > round);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{keys, signed_block};
    use crate::messages::QC;
    use bytes::Bytes;
    use std::time::Duration;

    /// A payload naming a batch twice, or one committed within the window, gets no vote; the
    /// block is still taken (it may be certified), and a repeated batch needs no bytes: its
    /// commit will not deliver it again.
    #[tokio::test]
    async fn repeated_and_already_committed_batches_get_no_vote_and_need_no_bytes() {
        let keys = keys(4);
        let store = Store::new();
        let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
        for digest in [a, b] {
            store
                .batches()
                .write(digest, Bytes::from_static(b"batch"))
                .await
                .expect("write");
        }
        let (tx_mempool, _rx_mempool) = mpsc::channel(8);
        let (tx_loopback, _rx_loopback) = mpsc::channel(8);
        let window = GcWindow {
            rounds: 10,
            time: Duration::from_secs(60),
            bytes: u64::MAX,
        };
        let mut waiter = PayloadWaiter::new(store, tx_mempool, tx_loopback, window);
        let block = |round, payload, author: usize| {
            signed_block(QC::genesis(), None, round, payload, &keys[author])
        };

        let first = block(1, vec![a], 1);
        assert_eq!(waiter.available(&first).await, Ok(true));
        assert_eq!(waiter.check(&first), Ok(()));
        waiter.committed(&first);
        // The committing block itself may come back (a retransmission, a sync reply).
        assert_eq!(waiter.available(&first).await, Ok(true));
        assert_eq!(waiter.check(&first), Ok(()));
        let again = block(2, vec![b, a], 2);
        assert!(matches!(
            waiter.check(&again),
            Err(PayloadError::AlreadyCommitted { batch, .. }) if batch == a
        ));
        assert_eq!(waiter.available(&again).await, Ok(true));
        let twice = block(3, vec![b, b], 3);
        assert!(matches!(
            waiter.check(&twice),
            Err(PayloadError::Repeated { batch, .. }) if batch == b
        ));
        assert_eq!(waiter.available(&twice).await, Ok(true));
        assert_eq!(waiter.check(&block(4, vec![b], 0)), Ok(()));
        // Collected since its commit, `a` is not waited for (nor fetched) in a block of the
        // window: it will not be delivered again.
        waiter.store.remove(&[a]).await.expect("remove");
        assert_eq!(waiter.available(&block(5, vec![a], 2)).await, Ok(true));
        assert!(waiter.pending.is_empty());
    }

    /// A leader that signs a thousand blocks for its round, each naming a batch nobody has,
    /// made us wait on (and request batches for) all of them; now on two. The block of that
    /// round the chain needs (one a child's QC certifies) is still waited for, and delivered.
    #[tokio::test]
    async fn byzantine_equivocating_leader_gets_two_waiters_a_round() {
        use crate::messages::tests::qc;
        let keys = keys(4);
        let store = Store::new();
        let (tx_mempool, mut rx_mempool) = mpsc::channel(2_000);
        let (tx_loopback, mut rx_loopback) = mpsc::channel(8);
        let window = GcWindow {
            rounds: 10,
            time: Duration::from_secs(60),
            bytes: u64::MAX,
        };
        let mut waiter = PayloadWaiter::new(store.clone(), tx_mempool, tx_loopback, window);
        let round = 5;
        let mut refused = 0;
        for i in 0..1_000u32 {
            let batch = Digest::of(&i.to_be_bytes());
            let block = signed_block(QC::genesis(), None, round, vec![batch], &keys[1]);
            match waiter.available(&block).await {
                Ok(false) => {}
                Err(PayloadError::TooManyWaiting { .. }) => refused += 1,
                other => panic!("block {i}: {other:?}"),
            }
        }
        let mut requests = 0;
        while rx_mempool.try_recv().is_ok() {
            requests += 1;
        }
        assert_eq!(requests, MAX_WAITING_PER_SLOT, "batch requests");
        assert_eq!(refused, 1_000 - MAX_WAITING_PER_SLOT);
        assert_eq!(waiter.waiters[&round].len(), MAX_WAITING_PER_SLOT);

        let batch = Digest::of(b"needed");
        let needed = signed_block(QC::genesis(), None, round, vec![batch], &keys[1]);
        let certificate = qc(needed.digest(), round, &keys[..3]);
        let child = signed_block(certificate, None, round + 1, vec![], &keys[2]);
        assert_eq!(waiter.available(&child).await, Ok(true));
        assert_eq!(waiter.available(&needed).await, Ok(false));
        assert!(rx_mempool.try_recv().is_ok(), "its batch is requested");
        store
            .batches()
            .write(batch, Bytes::from_static(b"batch"))
            .await
            .expect("write");
        let back = tokio::time::timeout(Duration::from_secs(10), rx_loopback.recv())
            .await
            .expect("in time")
            .expect("a block");
        assert_eq!(back.digest(), needed.digest());

        // Once the round is cleaned up, its waiters and certificates go.
        waiter.cleanup(round + 1);
        assert!(waiter.waiters.is_empty() && waiter.pending.is_empty());
        assert!(waiter.certified.keys().all(|r| *r > round));
    }
}
