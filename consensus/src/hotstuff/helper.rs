//! Answers other replicas' requests for blocks they are missing, and for this node's latest
//! checkpoint (state sync).

use super::checkpoint::{CheckpointReply, CheckpointSlot};
use super::messages::ConsensusMessage;
use super::wire;
use crate::config::Committee;
use crate::network::SimpleSender;
use crate::store::{BlockStore, Store};
use crypto::{Digest, PublicKey};
use tokio::sync::mpsc;
use tracing::{debug, warn};

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
    rx_requests: mpsc::Receiver<HelperRequest>,
    network: SimpleSender,
}

impl Helper {
    pub fn spawn(
        name: PublicKey,
        committee: Committee,
        store: Store,
        checkpoints: CheckpointSlot,
        rx_requests: mpsc::Receiver<HelperRequest>,
        network: SimpleSender,
    ) {
        let helper = Helper {
            name,
            committee,
            // Blocks only: a batch digest asked for as a block is not served either.
            store: store.blocks(),
            checkpoints,
            rx_requests,
            network,
        };
        tokio::spawn(helper.run());
    }

    async fn run(mut self) {
        while let Some(request) = self.rx_requests.recv().await {
            let (origin, reply) = match request {
                HelperRequest::Block(digest, origin) => (origin, self.block(&digest, &origin)),
                HelperRequest::Checkpoint(origin) => (origin, self.checkpoint(&origin)),
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

    /// A stored block, re-wrapped as a proposal.
    fn block(&self, digest: &Digest, origin: &PublicKey) -> Option<ConsensusMessage> {
        let block = self.read_block(digest)?;
        debug!("sending block {digest} to {origin}");
        Some(ConsensusMessage::Propose(block))
    }

    /// The latest checkpoint, with the block it follows (while that block is still stored).
    fn checkpoint(&self, origin: &PublicKey) -> Option<ConsensusMessage> {
        let Some(checkpoint) = self.checkpoints.latest() else {
            debug!("{origin} asked for a checkpoint; we have none yet");
            return None;
        };
        let block = self.read_block(&checkpoint.block)?;
        debug!(
            "sending the checkpoint of round {} ({} bytes) to {origin}",
            checkpoint.round,
            checkpoint.state.len()
        );
        Some(ConsensusMessage::Checkpoint(CheckpointReply {
            author: self.name,
            block,
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
