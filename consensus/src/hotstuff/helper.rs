//! Answers other replicas' requests for blocks they are missing.

use super::messages::ConsensusMessage;
use super::wire;
use crate::config::Committee;
use crate::network::SimpleSender;
use crate::store::{BlockStore, Store};
use crypto::{Digest, PublicKey};
use tokio::sync::mpsc;
use tracing::{debug, warn};

pub struct Helper {
    committee: Committee,
    store: BlockStore,
    rx_requests: mpsc::Receiver<(Digest, PublicKey)>,
    network: SimpleSender,
}

impl Helper {
    pub fn spawn(
        committee: Committee,
        store: Store,
        rx_requests: mpsc::Receiver<(Digest, PublicKey)>,
        network: SimpleSender,
    ) {
        let helper = Helper {
            committee,
            // Blocks only: a batch digest asked for as a block is not served either.
            store: store.blocks(),
            rx_requests,
            network,
        };
        tokio::spawn(helper.run());
    }

    async fn run(mut self) {
        while let Some((digest, origin)) = self.rx_requests.recv().await {
            let Some(address) = self
                .committee
                .authority(&origin)
                .map(|a| a.consensus_address)
            else {
                warn!("sync request from unknown authority {origin}");
                continue;
            };
            let bytes = match self.store.read(&digest) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    debug!("{origin} asked for block {digest}, which we do not have");
                    continue;
                }
                Err(e) => {
                    warn!("cannot read block {digest}: {e}");
                    continue;
                }
            };
            // Blocks are stored in their wire form; re-wrap as a proposal.
            let message = match wire::decode_block(&bytes) {
                Ok(block) => ConsensusMessage::Propose(block),
                Err(e) => {
                    warn!("stored block {digest} does not decode: {e}");
                    continue;
                }
            };
            match wire::encode(&message) {
                Ok(reply) => self.network.send(address, reply).await,
                Err(e) => warn!("cannot encode block {digest}: {e}"),
            }
        }
    }
}
