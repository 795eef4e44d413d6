//! Handles the mempool port: batches from peers (stored, acknowledged, and queued for the
//! attester where this node attests them), batch requests (passed to the helper) and peers'
//! attestations (checked and kept).

use super::attest::{attesters, Attestations, CheckQueue, Sequences};
use super::attester::AttesterInput;
use super::helper::HelperRequest;
use super::message::{MempoolMessage, ACK, REFUSED};
use super::metrics::MempoolMetrics;
use super::quota::{Admission, AuthorQuota};
use super::samples::SampleHooks;
use batch::Batch;
use bytes::Bytes;
use crypto::PublicKey;
use futures::SinkExt;
use network::{HandlerError, MessageHandler, Writer};
use plumbing::budgeted::{BudgetedSender, SendError};
use std::sync::Arc;
use store::BatchStore;

/// The one reply to a batch: the sender's `ReliableSender` only counts reply frames.

#[derive(Clone)]
pub struct PeerHandler {
    pub store: BatchStore,
    pub metrics: Arc<MempoolMetrics>,
    /// Requests wait for the helper within a byte budget; when it is spent this connection is
    /// not read until the helper takes some.
    pub tx_helper: BudgetedSender<HelperRequest>,
    /// Requests naming more digests are refused (`Parameters::max_request_digests`).
    pub max_request_digests: usize,
    pub quota: AuthorQuota,
    /// The member this connection authenticated as; `None` until then (and on an open port,
    /// as in unit tests, where no quota applies).
    pub author: Option<PublicKey>,
    /// With `--verify=attested`: the statements held, and the attester's queue.
    pub attesting: Option<PeerAttesting>,
    /// Latency samples: a new batch's are noted for its commit while it is in cache.
    pub samples: Option<SampleHooks>,
}

#[derive(Clone)]
pub struct PeerAttesting {
    pub table: Attestations,
    /// Batches to check wait here within a byte budget; when it is spent, this connection is
    /// not read (nor its batch acknowledged) until the attester takes some.
    pub tx_attester: BudgetedSender<AttesterInput>,
    /// What waits for the attester or is being checked (the batch maker reads it).
    pub queue: CheckQueue,
    /// Each author's place in its sequence of batches: which of its batches may be attested.
    pub sequences: Sequences,
}

impl PeerHandler {
    fn reject(&self, why: String) -> HandlerError {
        MempoolMetrics::add(&self.metrics.rejected_frames, 1);
        HandlerError::Malformed(why)
    }

    /// Queues a batch of `author`'s, its number `seq`, for the attester if this node attests
    /// it: the number follows the author's last one here (`Sequences`), names this node, and
    /// the batch is within what a batch holds and within the author's attesting bytes here
    /// (`AuthorQuota::charge_attesting`). `fresh`: the batch was not held here before.
    ///
    /// Only batches that come from their author with their number are attested: a batch
    /// fetched from another member (a plain `Batch`, for a block that names it) carries no
    /// number, and the member that sent it is not its author.
    async fn attest(
        &self,
        batch: &Batch,
        author: PublicKey,
        seq: u64,
        fresh: bool,
    ) -> Result<(), HandlerError> {
        let Some(attesting) = &self.attesting else {
            return Ok(());
        };
        let table = &attesting.table;
        if !attesting.sequences.arrived(author, seq, fresh)
            || !attesters(table.committee(), &author, seq).contains(&table.me())
            || batch.tx_count() > table.limits().max_batch_txs
            || batch.bytes().len() > table.limits().max_batch_bytes
        {
            return Ok(());
        }
        let size = batch.bytes().len();
        if !self
            .quota
            .charge_attesting(author, batch.digest(), size as u64)
        {
            MempoolMetrics::add(&self.metrics.attesting_refused, 1);
            return Ok(());
        }
        attesting.queue.added(size as u64);
        let input = AttesterInput {
            batch: batch.clone(),
            author,
            seq,
            // A peer's batch: nobody here checked its transactions.
            checked: false,
        };
        match attesting.tx_attester.send(input, size).await {
            Ok(()) => Ok(()),
            // The attester is gone: the node is shutting down.
            Err(SendError::Closed(_)) => {
                attesting.queue.done(size as u64);
                Ok(())
            }
            Err(e @ SendError::TooLarge { .. }) => {
                attesting.queue.done(size as u64);
                Err(HandlerError::Other(format!("batch to attest: {e}")))
            }
        }
    }

    /// A batch, from its author with its number `seq` or without one (a reply to a request):
    /// stored and acknowledged once, within its sender's quota; attested where it should be.
    async fn batch(
        &self,
        writer: &mut Writer,
        bytes: Bytes,
        seq: Option<u64>,
    ) -> Result<(), HandlerError> {
        let batch = Batch::parse(bytes).map_err(|e| self.reject(e.to_string()))?;
        let digest = batch.digest();
        // A batch we already hold costs nothing more (retransmissions, sync replies of batches
        // that since committed): store and count only new ones.
        let held = self
            .store
            .contains(&digest)
            .map_err(|e| HandlerError::Other(e.to_string()))?;
        if !held {
            let admission = match self.author {
                Some(author) => self.quota.admit(author, digest),
                None if self.quota.is_committed(&digest) => Admission::Committed,
                None => Admission::Store,
            };
            match admission {
                Admission::Store => {}
                Admission::Refuse => {
                    if let (Some(author), Some(seq), Some(attesting)) =
                        (self.author, seq, &self.attesting)
                    {
                        // Its number is taken all the same: the author's next one follows it.
                        attesting.sequences.arrived(author, seq, false);
                    }
                    MempoolMetrics::add(&self.metrics.refused_batches, 1);
                    writer.feed(Bytes::from_static(REFUSED)).await?;
                    return Ok(());
                }
                // Committed and collected: stored again it would never be collected.
                // The sender is done with it all the same.
                Admission::Committed => {
                    writer.feed(Bytes::from_static(ACK)).await?;
                    return Ok(());
                }
            }
            self.store
                .write(digest, batch.bytes().clone())
                .await
                .map_err(|e| HandlerError::Other(e.to_string()))?;
            if let Some(samples) = &self.samples {
                samples.note_received(&batch);
            }
        }
        if let (Some(author), Some(seq)) = (self.author, seq) {
            self.attest(&batch, author, seq, !held).await?;
        }
        MempoolMetrics::add(&self.metrics.received_batches, 1);
        writer.feed(Bytes::from_static(ACK)).await?;
        Ok(())
    }
}

impl MessageHandler for PeerHandler {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        let size = message.len();
        match MempoolMessage::decode(message).map_err(|e| self.reject(e.to_string()))? {
            MempoolMessage::Batch(bytes) => self.batch(writer, bytes, None).await?,
            MempoolMessage::Authored(seq, bytes) => self.batch(writer, bytes, Some(seq)).await?,
            MempoolMessage::BatchRequest(digests, requestor) => {
                if digests.len() > self.max_request_digests {
                    return Err(self.reject(format!(
                        "a batch request names {} digests, more than {}",
                        digests.len(),
                        self.max_request_digests
                    )));
                }
                // Replies go to the requestor's address: on an authenticated connection it must
                // be the peer itself, or one member could aim batch replies at another.
                if self.author.is_some_and(|author| author != requestor) {
                    return Err(self.reject(format!(
                        "batch request on behalf of {requestor} from {:?}",
                        self.author
                    )));
                }
                match self.tx_helper.send((digests, requestor), size).await {
                    // The helper is gone: the node is shutting down.
                    Ok(()) | Err(SendError::Closed(_)) => {}
                    Err(e @ SendError::TooLarge { .. }) => {
                        return Err(HandlerError::Other(format!("batch request: {e}")))
                    }
                }
            }
            MempoolMessage::Attestation(statement) => {
                let Some(attesting) = &self.attesting else {
                    return Err(self.reject("an attestation, but this node does not attest".into()));
                };
                // Statements come from their attester, not relayed.
                if self
                    .author
                    .is_some_and(|author| author != statement.attester)
                {
                    return Err(self.reject(format!(
                        "attestation by {} from {:?}",
                        statement.attester, self.author
                    )));
                }
                if let Err(e) = attesting.table.insert(statement) {
                    MempoolMetrics::add(&self.metrics.attestations_refused, 1);
                    return Err(self.reject(e.to_string()));
                }
                MempoolMetrics::add(&self.metrics.attestations_received, 1);
            }
        }
        Ok(())
    }

    fn for_peer(&self, peer: PublicKey) -> Self {
        PeerHandler {
            author: Some(peer),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests;
