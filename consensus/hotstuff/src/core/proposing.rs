//! Our own proposals: when this node leads a round, what its block carries, and when it holds a
//! proposal back (an idle chain, or an application too far behind).

use super::Core;
use crate::error::ConsensusError;
use crate::liveness::leader::Opening;
use crate::messages::{Block, TC};
use crate::wire::ConsensusMessage;
use plumbing::clock::{self, Instant};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::{debug, warn};

impl Core {
    /// Whether our application is too far behind for our blocks to carry batches.
    pub(super) fn application_behind(&self) -> bool {
        self.proposals.progress.behind() > self.parameters.max_unexecuted_bytes
    }

    /// Whether our next block may carry batches: some are queued and the application keeps up.
    pub(super) fn has_payload(&self) -> bool {
        !self.proposals.buffer.is_empty() && !self.application_behind()
    }

    /// True when proposing now would only add an empty block to an idle chain: no batch to
    /// propose, and neither of the two blocks the next commit would need carries a payload.
    pub(super) fn should_wait(&self) -> Result<bool, ConsensusError> {
        if self.has_payload() {
            return Ok(false);
        }
        let Some(b1) = self
            .synchronizer
            .stored_block(&self.voting.high_qc().hash)?
        else {
            return Ok(false);
        };
        if !b1.payload.is_empty() && b1.round > self.committed.last_round() {
            return Ok(false);
        }
        let Some(b0) = self.synchronizer.stored_block(b1.parent())? else {
            return Ok(false);
        };
        Ok(b0.payload.is_empty() || b0.round <= self.committed.last_round())
    }

    /// Proposes now, or (on an idle chain, or one whose application is behind) once a digest
    /// may go in or `max_batch_delay` passes, so such a committee does not spin through empty
    /// rounds as fast as the network allows.
    pub(super) async fn try_propose(&mut self, tc: Option<TC>) {
        match self.should_wait() {
            Ok(true) => {
                let delay = self
                    .parameters
                    .max_batch_delay
                    .min(self.parameters.timeout_delay / 2);
                clock::reset(
                    self.proposals.deadline.as_mut(),
                    Instant::now() + Duration::from_millis(delay),
                );
                self.proposals.pending = Some(tc);
            }
            Ok(false) => {
                if let Err(e) = self.propose(tc).await {
                    warn!("cannot propose: {e}");
                }
            }
            Err(e) => warn!("cannot propose: {e}"),
        }
    }

    pub(super) async fn propose(&mut self, tc: Option<TC>) -> Result<(), ConsensusError> {
        // What voters will read off the block (`Opening::of`).
        let opening = match &tc {
            Some(tc) => Opening::Tc(tc),
            None => Opening::Qc(&self.voting.high_qc().hash),
        };
        if !self.may_sign()
            || !self.is_leader(self.pacemaker.round(), opening)
            || self.pacemaker.round() <= self.voting.last_proposed_round()
        {
            return Ok(());
        }
        // Only the certificate of the round before opens ours (`Block::check_structure`):
        // without it (a round entered by joining timeouts, or resumed after a restart) no
        // block of ours would be voted for.
        let before = self.pacemaker.round() - 1;
        let opened = match &tc {
            Some(tc) => tc.round == before,
            None => self.voting.high_qc().round == before,
        };
        if !opened {
            debug!(
                "not proposing in round {}: the certificate of round {before} is not here",
                self.pacemaker.round()
            );
            return Ok(());
        }
        self.voting.record_proposal(self.pacemaker.round()).await?;
        let payload = if self.application_behind() {
            self.metrics
                .withheld_proposals
                .fetch_add(1, Ordering::Relaxed);
            Vec::new()
        } else {
            self.proposals
                .buffer
                .take(self.pacemaker.round(), self.parameters.max_block_digests)
        };
        let block = Block::new(
            self.voting.high_qc().clone(),
            tc,
            self.name,
            self.pacemaker.round(),
            payload,
            &self.signature_service,
        )
        .await;
        debug!("proposing {:?}", block);
        self.broadcast(&ConsensusMessage::Propose(block.clone()))
            .await?;
        self.metrics
            .proposed_batches
            .fetch_add(block.payload.len() as u64, Ordering::Relaxed);
        self.proposals.own_blocks.push_back(block);
        Ok(())
    }
}
