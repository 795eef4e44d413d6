//! Answers other replicas' requests for blocks they are missing, and for this node's latest
//! checkpoint (state sync).

use crate::sync::direct_commits::DirectCommits;
use crate::wire;
use crate::wire::{CheckpointReply, ConsensusMessage, MAX_CHAIN_BLOCKS};
use checkpoint::CheckpointSlot;
use config::{Committee, Round};
use crypto::{Digest, PublicKey};
use network::SimpleSender;
use plumbing::clock::Instant;
use std::collections::HashMap;
use std::time::Duration;
use store::{BlockStore, Store};
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// A member gets at most one checkpoint per this interval. A request is a few bytes and a reply
/// may be megabytes: unthrottled, one member could make us send without end (an
/// amplification attack). An honest member asks at most once per `timeout_delay` (1 s by default).
const CHECKPOINT_REPLY_INTERVAL: Duration = Duration::from_millis(500);

/// Blocks a member gets from us per second, and at most at once after a pause. A request is
/// a digest, a key and a round (about 80 bytes) and a reply up to `MAX_CHAIN_BLOCKS` blocks
/// (kilobytes each: digests and two certificates), read from the store and encoded: unpaced,
/// one member could make us do that without end. An honest member asks for the blocks it lacks
/// a chain at a time, at most `gc_depth` of them before it asks for a checkpoint instead: the
/// burst covers that, the rate a chain synced while rounds go on.
const BLOCK_REPLIES_PER_SECOND: f64 = 200.0;
const BLOCK_REPLY_BURST: f64 = 400.0;

/// What a peer asked for, and who (the network handler checked the peer speaks for itself).
#[derive(Debug)]
pub enum HelperRequest {
    /// A block, and its ancestors above the round, for the member.
    Chain(Digest, PublicKey, Round),
    Checkpoint(PublicKey),
}

pub struct Helper {
    name: PublicKey,
    committee: Committee,
    store: BlockStore,
    checkpoints: CheckpointSlot,
    /// What proves our checkpoint's block committed.
    direct_commits: DirectCommits,
    /// When each member last got a checkpoint from us.
    checkpoint_served: HashMap<PublicKey, Instant>,
    /// Each member's allowance of block replies.
    block_allowance: HashMap<PublicKey, Allowance>,
    rx_requests: mpsc::Receiver<HelperRequest>,
    network: SimpleSender,
}

impl Helper {
    pub fn spawn(
        name: PublicKey,
        committee: Committee,
        store: Store,
        checkpoints: CheckpointSlot,
        direct_commits: DirectCommits,
        rx_requests: mpsc::Receiver<HelperRequest>,
        network: SimpleSender,
    ) {
        let helper = Helper {
            name,
            committee,
            // Blocks only: a batch digest asked for as a block is not served either.
            store: store.blocks(),
            checkpoints,
            direct_commits,
            checkpoint_served: HashMap::new(),
            block_allowance: HashMap::new(),
            rx_requests,
            network,
        };
        tokio::spawn(helper.run());
    }

    async fn run(mut self) {
        while let Some(request) = self.rx_requests.recv().await {
            let (origin, reply) = match request {
                HelperRequest::Chain(digest, origin, floor) => {
                    (origin, self.chain(&digest, &origin, floor))
                }
                HelperRequest::Checkpoint(origin) => {
                    if !self.may_serve_checkpoint(&origin) {
                        debug!("{origin} asks for checkpoints too often; not answered");
                        continue;
                    }
                    (origin, self.checkpoint(&origin))
                }
            };
            let Some(reply) = reply else { continue };
            let Some(address) = self
                .committee
                .authority(&origin)
                .map(|a| a.consensus_address)
            else {
                warn!("request from unknown authority {origin}");
                continue;
            };
            match wire::encode(&reply) {
                Ok(bytes) => self.network.send(address, bytes).await,
                Err(e) => warn!("cannot encode a reply to {origin}: {e}"),
            }
        }
    }

    /// Whether `origin` may get a checkpoint now (see `CHECKPOINT_REPLY_INTERVAL`); if so, the
    /// time is recorded. Members only: the port admits no one else.
    fn may_serve_checkpoint(&mut self, origin: &PublicKey) -> bool {
        let now = Instant::now();
        match self.checkpoint_served.get(origin) {
            Some(at) if now.duration_since(*at) < CHECKPOINT_REPLY_INTERVAL => false,
            _ => {
                self.checkpoint_served.insert(*origin, now);
                true
            }
        }
    }

    /// Whether `origin` may get a block now (see `BLOCK_REPLIES_PER_SECOND`); if so, it is
    /// counted. Members only: the port admits no one else.
    fn may_serve_block(&mut self, origin: &PublicKey) -> bool {
        self.block_allowance
            .entry(*origin)
            .or_insert_with(Allowance::full)
            .take(Instant::now())
    }

    /// A stored block and its stored ancestors above `floor`, as many as `origin` may get now
    /// (each counts against its allowance) and at most `MAX_CHAIN_BLOCKS`, the block asked for
    /// first. `None` if we do not hold it, or `origin` asks faster than it is served.
    fn chain(
        &mut self,
        digest: &Digest,
        origin: &PublicKey,
        floor: Round,
    ) -> Option<ConsensusMessage> {
        let mut chain = Vec::new();
        let mut next = *digest;
        while chain.len() < MAX_CHAIN_BLOCKS {
            let Some(block) = self.read_block(&next) else {
                break;
            };
            if !chain.is_empty() && block.round <= floor {
                break;
            }
            if !self.may_serve_block(origin) {
                debug!("{origin} asks for blocks faster than we serve them");
                break;
            }
            next = *block.parent();
            chain.push(block);
        }
        if chain.is_empty() {
            return None;
        }
        debug!(
            "sending {digest} and {} ancestors to {origin}",
            chain.len() - 1
        );
        Some(ConsensusMessage::Chain(chain))
    }

    /// The latest checkpoint, with the block it follows (while that block is still stored) and
    /// the proof that this block committed (once a commit at or above it is known here).
    fn checkpoint(&self, origin: &PublicKey) -> Option<ConsensusMessage> {
        let Some(checkpoint) = self.checkpoints.latest() else {
            debug!("{origin} asked for a checkpoint; we have none yet");
            return None;
        };
        let block = self.read_block(&checkpoint.block)?;
        let Some(proof) = self
            .direct_commits
            .proof_of(&block, |digest| self.read_block(digest))
        else {
            debug!(
                "{origin} asked for a checkpoint; we cannot prove round {} committed yet",
                checkpoint.round
            );
            return None;
        };
        debug!(
            "sending the checkpoint of round {} ({} bytes) to {origin}",
            checkpoint.round,
            checkpoint.state.len()
        );
        Some(ConsensusMessage::Checkpoint(CheckpointReply {
            author: self.name,
            block,
            proof,
            state: checkpoint.state.clone(),
        }))
    }

    fn read_block(&self, digest: &Digest) -> Option<crate::messages::Block> {
        let bytes = match self.store.read(digest) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                debug!("block {digest} was asked for and is not stored");
                return None;
            }
            Err(e) => {
                warn!("cannot read block {digest}: {e}");
                return None;
            }
        };
        // Blocks are stored in their wire form.
        match wire::decode_block(&bytes) {
            Ok(block) => Some(block),
            Err(e) => {
                warn!("stored block {digest} does not decode: {e}");
                None
            }
        }
    }
}

/// A token bucket: `BLOCK_REPLY_BURST` replies, refilled at `BLOCK_REPLIES_PER_SECOND`.
struct Allowance {
    tokens: f64,
    refilled: Instant,
}

impl Allowance {
    fn full() -> Self {
        Allowance {
            tokens: BLOCK_REPLY_BURST,
            refilled: Instant::now(),
        }
    }

    /// Takes one reply's token at `now`, if one is left.
    fn take(&mut self, now: Instant) -> bool {
        let earned = now.duration_since(self.refilled).as_secs_f64() * BLOCK_REPLIES_PER_SECOND;
        self.tokens = (self.tokens + earned).min(BLOCK_REPLY_BURST);
        self.refilled = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys};
    use crypto::KeyPair;

    /// The helper of `keys[0]` over `store`, driven by direct calls (no request channel, and
    /// replies lead nowhere).
    fn helper_over(keys: &[KeyPair], store: Store) -> Helper {
        let (_tx, rx) = mpsc::channel(1);
        Helper {
            name: keys[0].name,
            committee: committee(keys),
            store: store.blocks(),
            checkpoints: CheckpointSlot::default(),
            direct_commits: DirectCommits::default(),
            checkpoint_served: HashMap::new(),
            block_allowance: HashMap::new(),
            rx_requests: rx,
            network: SimpleSender::new(),
        }
    }

    /// Amplification through checkpoints: a member that asks again and again gets one
    /// reply per interval, and others are not held back by it.
    #[tokio::test(start_paused = true)]
    async fn byzantine_checkpoint_requests_are_answered_once_per_interval() {
        let keys = keys(4);
        let mut helper = helper_over(&keys, Store::new());
        let flooder = keys[1].name;
        let served = (0..1_000)
            .filter(|_| helper.may_serve_checkpoint(&flooder))
            .count();
        assert_eq!(served, 1);
        assert!(helper.may_serve_checkpoint(&keys[2].name));
        tokio::time::advance(CHECKPOINT_REPLY_INTERVAL).await;
        assert!(helper.may_serve_checkpoint(&flooder));
    }

    /// Block sync requests cost a member about 70 bytes and us a store read, an encoding and a
    /// block sent back: a member asking without pause gets `BLOCK_REPLY_BURST` replies, then
    /// `BLOCK_REPLIES_PER_SECOND`, and others are not held back by it. Before, every request
    /// was answered.
    #[tokio::test(start_paused = true)]
    async fn byzantine_block_requests_are_paced_per_member() {
        let keys = keys(4);
        let mut helper = helper_over(&keys, Store::new());
        let flooder = keys[1].name;
        let served = |helper: &mut Helper, count: usize| {
            (0..count)
                .filter(|_| helper.may_serve_block(&flooder))
                .count()
        };
        assert_eq!(served(&mut helper, 10_000), BLOCK_REPLY_BURST as usize);
        assert!(helper.may_serve_block(&keys[2].name));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            served(&mut helper, 10_000),
            BLOCK_REPLIES_PER_SECOND as usize
        );
    }

    /// A node that lacks a stretch of the chain asks for the newest block it lacks and gets it
    /// with its ancestors down to its last commit, `MAX_CHAIN_BLOCKS` at most: a round trip per
    /// chain, not per block. Before, one block came per request, and a node cut off for a few
    /// seconds fetched the blocks it missed one round trip each while new ones kept coming
    /// (the Twins generator found nodes that never caught up).
    #[tokio::test]
    async fn a_block_is_sent_with_its_ancestors_above_the_floor() {
        use crate::messages::tests::{qc, signed_block};
        use crate::messages::QC;
        use crypto::Hash;
        let keys = keys(4);
        let store = Store::new();
        let mut blocks: Vec<crate::messages::Block> = Vec::new();
        for round in 1..=40 {
            let parent = blocks
                .last()
                .map_or(QC::genesis(), |p| qc(p.digest(), p.round, &keys[..3]));
            let block = signed_block(parent, None, round, vec![], &keys[0]);
            store
                .blocks()
                .write(block.digest(), wire::encode_block(&block).expect("encode"))
                .await
                .expect("write");
            blocks.push(block);
        }
        let mut helper = helper_over(&keys, store);
        let rounds = |reply: Option<ConsensusMessage>| match reply {
            Some(ConsensusMessage::Chain(chain)) => chain.iter().map(|b| b.round).collect(),
            _ => Vec::new(),
        };
        let newest = blocks[39].digest();
        let asker = keys[1].name;
        assert_eq!(
            rounds(helper.chain(&newest, &asker, 35)),
            vec![40, 39, 38, 37, 36]
        );
        let far: Vec<Round> = (9..=40).rev().collect();
        assert_eq!(rounds(helper.chain(&newest, &asker, 0)), far);
        // The block asked for comes even at or below the floor; an unknown one gets nothing.
        assert_eq!(
            rounds(helper.chain(&blocks[2].digest(), &asker, 10)),
            vec![3]
        );
        assert!(helper.chain(&Digest::of(b"unknown"), &asker, 0).is_none());
    }
}
