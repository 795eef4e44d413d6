//! Answers other replicas' requests for blocks they are missing, and for this node's latest
//! checkpoint (state sync).

use super::commit_proof::{CommitProof, DirectCommits};
use super::wire;
use super::wire::{CheckpointReply, ConsensusMessage};
use checkpoint::CheckpointSlot;
use config::Committee;
use crypto::{Digest, PublicKey};
use network::SimpleSender;
use std::collections::HashMap;
use std::time::Duration;
use store::{BlockStore, Store};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{debug, warn};

/// A member gets at most one checkpoint per this interval. A request is a few bytes and a reply
/// may be megabytes: unthrottled, one member could make us send without end (an
/// amplification attack). An honest member asks at most once per `timeout_delay` (1 s by default).
const CHECKPOINT_REPLY_INTERVAL: Duration = Duration::from_millis(500);

/// What a peer asked for, and who (the network handler checked the peer speaks for itself).
#[derive(Debug)]
pub enum HelperRequest {
    Block(Digest, PublicKey),
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
            rx_requests,
            network,
        };
        tokio::spawn(helper.run());
    }

    async fn run(mut self) {
        while let Some(request) = self.rx_requests.recv().await {
            let (origin, reply) = match request {
                HelperRequest::Block(digest, origin) => (origin, self.block(&digest, &origin)),
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

    /// A stored block, re-wrapped as a proposal.
    fn block(&self, digest: &Digest, origin: &PublicKey) -> Option<ConsensusMessage> {
        let block = self.read_block(digest)?;
        debug!("sending block {digest} to {origin}");
        Some(ConsensusMessage::Propose(block))
    }

    /// The latest checkpoint, with the block it follows (while that block is still stored) and
    /// the proof that this block committed (once a commit at or above it is known here).
    fn checkpoint(&self, origin: &PublicKey) -> Option<ConsensusMessage> {
        let Some(checkpoint) = self.checkpoints.latest() else {
            debug!("{origin} asked for a checkpoint; we have none yet");
            return None;
        };
        let block = self.read_block(&checkpoint.block)?;
        let Some(proof) = CommitProof::build(&block, &self.direct_commits, |digest| {
            self.read_block(digest)
        }) else {
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

    fn read_block(&self, digest: &Digest) -> Option<super::messages::Block> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys};

    /// Amplification through checkpoints: a member that asks again and again gets one
    /// reply per interval, and others are not held back by it.
    #[tokio::test(start_paused = true)]
    async fn byzantine_checkpoint_requests_are_answered_once_per_interval() {
        let keys = keys(4);
        let (_tx, rx) = mpsc::channel(1);
        let mut helper = Helper {
            name: keys[0].name,
            committee: committee(&keys),
            store: Store::new().blocks(),
            checkpoints: CheckpointSlot::default(),
            direct_commits: DirectCommits::default(),
            checkpoint_served: HashMap::new(),
            rx_requests: rx,
            network: SimpleSender::new(),
        };
        let flooder = keys[1].name;
        let served = (0..1_000)
            .filter(|_| helper.may_serve_checkpoint(&flooder))
            .count();
        assert_eq!(served, 1);
        assert!(helper.may_serve_checkpoint(&keys[2].name));
        tokio::time::advance(CHECKPOINT_REPLY_INTERVAL).await;
        assert!(helper.may_serve_checkpoint(&flooder));
    }
}
