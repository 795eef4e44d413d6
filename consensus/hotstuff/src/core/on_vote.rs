//! A vote: counting members' votes into QCs, and casting our own (`safety::voting` decides what
//! we may vote for and keeps it on disk).
//!
//! A vote, timeout or proposal leaves the node only once the state it commits us to is on disk
//! (`persist_safety`): a node restarted on its store must never vote twice in a round, vote in a
//! round it timed out of, or report a lower high QC than it did.

use super::Core;
use crate::aggregator::AggregatorError;
use crate::error::ConsensusError;
use crate::liveness::leader::Opening;
use crate::messages::{Block, MessageError, Vote, QC};
use crate::safety::SafetyStateError;
use crate::wire;
use crate::wire::ConsensusMessage;
use tracing::{debug, error};

impl Core {
    /// Writes what must survive a crash (see `safety::voting`).
    pub(super) async fn persist_safety(&mut self) -> Result<(), SafetyStateError> {
        self.voting.persist().await
    }

    /// Verifies `qc`, taking our own vote in it on trust when it is the vote we cast (see
    /// `QC::verify_trusting`): the QC of the round we voted in usually holds it, and in a
    /// committee of four it is a third of the QC's signatures.
    pub(super) fn check_qc(&self, qc: &QC) -> Result<(), MessageError> {
        let own = self
            .voting
            .last_vote()
            .filter(|vote| vote.round == qc.round && vote.hash == qc.hash)
            .map(|vote| (&vote.author, &vote.signature));
        qc.verify_trusting(&self.committee, own)
    }

    pub(super) async fn make_vote(&mut self, block: &Block) -> Option<Vote> {
        if !self.may_sign() {
            debug!("not voting for {:?}: our vote record is unknown", block);
            self.hold_for_record(block);
            return None;
        }
        match self.voting.may_vote(block).await {
            Ok(true) => Some(Vote::new(block, self.name, &self.signature_service).await),
            Ok(false) => None,
            Err(e) => {
                error!("not voting in round {}: {e}", block.round);
                None
            }
        }
    }

    /// Votes for `block`, just stored, if it is of our round and from its leader and the rules
    /// let us, and sends the vote to the next leader.
    pub(super) async fn vote_for(&mut self, block: &Block) -> Result<(), ConsensusError> {
        // Only in the current round; this also stops far-future blocks from moving us.
        if block.round != self.pacemaker.round() {
            return Ok(());
        }
        // Only for the round's leader. A node that cannot tell (a block of the history window is
        // missing: it is back from a crash and syncing) votes for the first valid proposal of
        // the round: who proposes changes no safety rule, and its vote may be the quorum's.
        if let Some(leader) = self.leader(block.round, Opening::of(block)) {
            if leader != block.author {
                debug!(
                    "not voting for {:?}: not the leader of its round here",
                    block
                );
                return Ok(());
            }
        }
        // A block naming a batch again gets no vote of ours (see `payload.rs`); it may still be
        // certified, and is stored and committed like any other.
        if let Err(e) = self.payload.check(block) {
            debug!("not voting for {:?}: {e}", block);
            return Ok(());
        }
        if let Some(vote) = self.make_vote(block).await {
            self.voting.remember_vote(vote.clone());
            match self.leader(self.pacemaker.round() + 1, Opening::Qc(&vote.hash)) {
                Some(next_leader) if next_leader == self.name => self.handle_vote(vote).await?,
                Some(next_leader) => {
                    if let Some(authority) = self.committee.authority(&next_leader) {
                        let address = authority.consensus_address;
                        let bytes = wire::encode(&ConsensusMessage::Vote(vote))?;
                        let handler = self.network.sender.send(address, bytes).await;
                        self.keep_handlers(vec![handler]);
                    }
                }
                // We cannot tell who leads next (a block of the window is missing here):
                // whoever it is gets the vote.
                None => {
                    self.broadcast(&ConsensusMessage::Vote(vote.clone()))
                        .await?;
                    self.handle_vote(vote).await?;
                }
            }
        }
        Ok(())
    }

    pub(super) async fn handle_vote(&mut self, vote: Vote) -> Result<(), ConsensusError> {
        // Votes of the previous round still count: re-broadcast on a timeout, they may arrive
        // after the TC of that round moved us on.
        if vote.round.saturating_add(1) < self.pacemaker.round() {
            return Ok(());
        }
        self.check_window(vote.round)?;
        if self.aggregator.has_voted(vote.round, &vote.author) {
            return Err(AggregatorError::AuthorityReuse(vote.author).into());
        }
        if self.aggregator.certified(vote.round, &vote.hash) {
            return Ok(());
        }
        // Our own vote (we lead the next round) was made here: its signature needs no check.
        if self.voting.last_vote() != Some(&vote) {
            vote.verify(&self.committee)?;
        }
        self.records.witness.vote(&vote);
        if let Some(qc) = self.aggregator.add_vote(vote)? {
            debug!("assembled {:?}", qc);
            self.process_qc(&qc).await;
            if self.is_leader(self.pacemaker.round(), Opening::Qc(&qc.hash)) {
                self.try_propose(None).await;
            }
        }
        Ok(())
    }
}
