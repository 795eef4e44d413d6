//! The consensus port's message handler: decode, acknowledge, route.

use super::helper::HelperRequest;
use super::wire;
use super::wire::ConsensusMessage;
use bytes::Bytes;
use crypto::PublicKey;
use futures::SinkExt;
use network::{HandlerError, MessageHandler, Writer};
use tokio::sync::mpsc;

#[derive(Clone)]
pub struct ConsensusHandler {
    pub tx_core: mpsc::Sender<ConsensusMessage>,
    pub tx_helper: mpsc::Sender<HelperRequest>,
    /// The member this connection authenticated as (`None` on an open port, in tests).
    pub peer: Option<PublicKey>,
}

impl ConsensusHandler {
    /// Requests are answered at `origin`'s address, and checkpoint reports count for their
    /// author: a member may speak only for itself, or it could aim replies at another member or
    /// report in its name.
    fn check_peer(&self, origin: &PublicKey, what: &str) -> Result<(), HandlerError> {
        if self.peer.is_some_and(|peer| peer != *origin) {
            return Err(HandlerError::Malformed(format!(
                "{what} on behalf of {origin} from {:?}",
                self.peer
            )));
        }
        Ok(())
    }
}

impl MessageHandler for ConsensusHandler {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        let message = wire::decode(&message).map_err(|e| HandlerError::Malformed(e.to_string()))?;
        // Acknowledge first: the reliable sender needs one reply per message, in order.
        writer.send(Bytes::from_static(b"Ack")).await?;
        let delivered = match message {
            ConsensusMessage::SyncRequest(digest, origin) => {
                self.check_peer(&origin, "sync request")?;
                self.tx_helper
                    .send(HelperRequest::Block(digest, origin))
                    .await
                    .is_ok()
            }
            ConsensusMessage::CheckpointRequest(origin) => {
                self.check_peer(&origin, "checkpoint request")?;
                self.tx_helper
                    .send(HelperRequest::Checkpoint(origin))
                    .await
                    .is_ok()
            }
            ConsensusMessage::Checkpoint(reply) => {
                // A report counts towards f+1 for its author: only the author may send it.
                self.check_peer(&reply.author, "checkpoint")?;
                self.tx_core
                    .send(ConsensusMessage::Checkpoint(reply))
                    .await
                    .is_ok()
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
