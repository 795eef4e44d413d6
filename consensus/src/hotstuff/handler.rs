//! The consensus port's message handler: decode, acknowledge, route.

use super::messages::ConsensusMessage;
use super::wire;
use crate::network::{HandlerError, MessageHandler, Writer};
use bytes::Bytes;
use crypto::{Digest, PublicKey};
use futures::SinkExt;
use tokio::sync::mpsc;

#[derive(Clone)]
pub struct ConsensusHandler {
    pub tx_core: mpsc::Sender<ConsensusMessage>,
    pub tx_helper: mpsc::Sender<(Digest, PublicKey)>,
    /// The member this connection authenticated as (`None` on an open port, in tests).
    pub peer: Option<PublicKey>,
}

impl MessageHandler for ConsensusHandler {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        let message = wire::decode(&message).map_err(|e| HandlerError::Malformed(e.to_string()))?;
        // Acknowledge first: the reliable sender needs one reply per message, in order.
        writer.send(Bytes::from_static(b"Ack")).await?;
        let delivered = match message {
            ConsensusMessage::SyncRequest(digest, origin) => {
                // The block goes to `origin`'s address: only the peer may ask for itself, or
                // one member could aim block replies at another.
                if self.peer.is_some_and(|peer| peer != origin) {
                    return Err(HandlerError::Malformed(format!(
                        "sync request on behalf of {origin} from {:?}",
                        self.peer
                    )));
                }
                self.tx_helper.send((digest, origin)).await.is_ok()
            }
            message => self.tx_core.send(message).await.is_ok(),
        };
        if delivered {
            Ok(())
        } else {
            Err(HandlerError::Other("consensus is shutting down".into()))
        }
    }

    fn for_peer(&self, peer: PublicKey) -> Self {
        ConsensusHandler {
            peer: Some(peer),
            ..self.clone()
        }
    }
}
