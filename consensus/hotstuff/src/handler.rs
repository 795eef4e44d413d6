//! The consensus port's message handler: decode, acknowledge, route.

use crate::sync::helper::HelperRequest;
use crate::wire;
use crate::wire::ConsensusMessage;
use bytes::Bytes;
use crypto::PublicKey;
use futures::SinkExt;
use network::{HandlerError, MessageHandler, Writer};
use plumbing::budgeted::{BudgetedSender, SendError};
use tokio::sync::mpsc;

#[derive(Clone)]
pub struct ConsensusHandler {
    /// The core's input, bounded in bytes (`Parameters::queue_budget_bytes`): a message waits
    /// for room there, and meanwhile nothing more is read from its connection.
    pub tx_core: BudgetedSender<ConsensusMessage>,
    pub tx_helper: mpsc::Sender<HelperRequest>,
    /// The member this connection authenticated as (`None` on an open port, in tests).
    pub peer: Option<PublicKey>,
}

impl ConsensusHandler {
    /// Requests are answered at `origin`'s address, and checkpoint reports count for their
    /// author: a member may speak only for itself, or it could aim replies at another member or
    /// report in its name.
    /// Queues `message` for the core; false once the core is gone.
    async fn to_core(&self, message: ConsensusMessage, size: usize) -> Result<bool, HandlerError> {
        match self.tx_core.send(message, size).await {
            Ok(()) => Ok(true),
            Err(SendError::Closed(_)) => Ok(false),
            // Only if the budget were below the frame size the port accepts.
            Err(e @ SendError::TooLarge { .. }) => Err(HandlerError::Other(e.to_string())),
        }
    }

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
        // What the decoded message counts for in the core's queue: its encoded size.
        let size = message.len();
        let message = wire::decode(&message).map_err(|e| HandlerError::Malformed(e.to_string()))?;
        // Acknowledge first: the reliable sender needs one reply per message, in order.
        writer.send(Bytes::from_static(b"Ack")).await?;
        let delivered = match message {
            ConsensusMessage::SyncRequest(digest, origin, floor) => {
                self.check_peer(&origin, "sync request")?;
                self.tx_helper
                    .send(HelperRequest::Chain(digest, origin, floor))
                    .await
                    .is_ok()
            }
            ConsensusMessage::Chain(blocks) if blocks.len() > wire::MAX_CHAIN_BLOCKS => {
                return Err(HandlerError::Malformed(format!(
                    "a chain of {} blocks, more than {}",
                    blocks.len(),
                    wire::MAX_CHAIN_BLOCKS
                )))
            }
            ConsensusMessage::CheckpointRequest(origin) => {
                self.check_peer(&origin, "checkpoint request")?;
                self.tx_helper
                    .send(HelperRequest::Checkpoint(origin))
                    .await
                    .is_ok()
            }
            ConsensusMessage::RecordRequest(origin) => {
                self.check_peer(&origin, "record request")?;
                self.to_core(ConsensusMessage::RecordRequest(origin), size)
                    .await?
            }
            ConsensusMessage::RecordReply(reply) => {
                // An answer counts towards the quorum for its author: only the author may send it.
                self.check_peer(&reply.author, "record reply")?;
                self.to_core(ConsensusMessage::RecordReply(reply), size)
                    .await?
            }
            ConsensusMessage::Checkpoint(reply) => {
                // A report counts towards f+1 for its author: only the author may send it.
                self.check_peer(&reply.author, "checkpoint")?;
                self.to_core(ConsensusMessage::Checkpoint(reply), size)
                    .await?
            }
            message => self.to_core(message, size).await?,
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
