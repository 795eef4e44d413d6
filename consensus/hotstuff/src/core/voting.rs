//! The core's side of voting (`safety::voting` decides what we may vote for and keeps it on
//! disk): handling proposals, votes and chains, and where our vote goes.
//!
//! A vote, timeout or proposal leaves the node only once the state it commits us to is on disk
//! (`persist_safety`): a node restarted on its store must never vote twice in a round, vote in a
//! round it timed out of, or report a lower high QC than it did.

use super::Core;
use crate::aggregator::AggregatorError;
use crate::error::ConsensusError;
use crate::liveness::leader::Opening;
use crate::messages::{Block, MessageError, Vote, QC};
use crate::safety::{self, SafetyStateError};
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
            .last_vote
            .as_ref()
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

    pub(super) async fn handle_vote(&mut self, vote: Vote) -> Result<(), ConsensusError> {
        // Votes of the previous round still count: re-broadcast on a timeout, they may arrive
        // after the TC of that round moved us on.
        if vote.round.saturating_add(1) < self.pacemaker.round {
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
        if self.voting.last_vote.as_ref() != Some(&vote) {
            vote.verify(&self.committee)?;
        }
        self.records.witness.vote(&vote);
        if let Some(qc) = self.aggregator.add_vote(vote)? {
            debug!("assembled {:?}", qc);
            self.process_qc(&qc).await;
            if self.is_leader(self.pacemaker.round, Opening::Qc(&qc.hash)) {
                self.try_propose(None).await;
            }
        }
        Ok(())
    }

    pub(super) async fn handle_proposal(&mut self, block: Block) -> Result<(), ConsensusError> {
        // The size limit holds for every block, not only our own (and costs nothing to check).
        if block.payload.len() > self.parameters.max_block_digests {
            return Err(MessageError::Malformed(format!(
                "block of round {} names {} batches, more than {}",
                block.round,
                block.payload.len(),
                self.parameters.max_block_digests
            ))
            .into());
        }
        block.check_structure(&self.committee)?;
        // The block's certificates move us first, whoever relays them (each proves itself), and
        // before the window is checked: an honest block is then at most in our round, while a
        // far-future one would be stored until we get there. The block's own signature is
        // checked only once it fits, so an out-of-window block costs at most the check of
        // certificates above ours, and a replay of one we are past costs none.
        let qc_checked = self.advance_by_qc(&block.qc).await?;
        let tc_checked = match &block.tc {
            Some(tc) => self.advance_by_tc(tc).await?,
            None => false,
        };
        self.check_window(block.round)?;
        block.verify_signature()?;
        // Certificates not above ours were not checked yet; the vote rule reads both.
        if !qc_checked && block.qc != self.voting.high_qc {
            self.check_qc(&block.qc)?;
        }
        if let Some(tc) = block.tc.as_ref().filter(|_| !tc_checked) {
            tc.verify(&self.committee)?;
        }
        self.pacemaker.elector.record(&block);
        // A proposal for a round we are in (or ahead of) must come from its leader. Older
        // blocks (ancestors we fetch) are vouched for by the QCs of their children instead, and
        // one whose window we lack is checked again before we vote for it.
        if block.round >= self.pacemaker.round {
            if let Some(leader) = self.leader(block.round, Opening::of(&block)) {
                if leader != block.author {
                    return Err(MessageError::WrongLeader {
                        author: block.author,
                        round: block.round,
                    }
                    .into());
                }
            }
        }
        self.process_block(&block).await
    }

    /// A peer's answer to our request for missing blocks: the block asked for and its
    /// ancestors, newest first. Handled oldest first, so each finds its parent stored (or asks
    /// for the next chain) and none waits parked for the next. A block that fails its checks is
    /// dropped and the rest still looked at: each proves itself.
    pub(super) async fn handle_chain(&mut self, blocks: Vec<Block>) -> Result<(), ConsensusError> {
        for block in blocks.into_iter().rev() {
            match self.handle_proposal(block).await {
                Ok(()) => {}
                Err(ConsensusError::Fatal(e)) => return Err(e.into()),
                Err(e) => debug!("a block of a chain: {e}"),
            }
        }
        Ok(())
    }

    /// Stores a verified block once its payload and ancestors are here, applies the commit rule
    /// and votes. Blocks waiting for data come back here through the loopback channel.
    pub(super) async fn process_block(&mut self, block: &Block) -> Result<(), ConsensusError> {
        // Too old to matter (it cannot commit) and its ancestors may be gone: do not fetch them.
        if block.round < self.prune_floor() {
            return Ok(());
        }
        self.sync_state_if_far_behind(block).await?;
        if !self.payload.available(block).await? {
            return Ok(());
        }
        let Some((b0, b1)) = self.synchronizer.get_ancestors(block).await? else {
            return Ok(());
        };
        self.store_block(block).await?;
        // Its batches stay while it may commit, whatever their senders' quotas say.
        if block.round > self.committed.last_round {
            self.payload.named(block);
        }

        // b0 <- b1 <- block: block certifies b1, b1 certifies b0.
        if safety::commits(&b0, &b1) && b0.round > self.committed.last_round {
            self.committed.direct.record(b0.round, &block.qc);
            self.commit(b0).await?;
        }

        // Only vote in the current round; this also stops far-future blocks from moving us.
        if block.round != self.pacemaker.round {
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
            self.voting.last_vote = Some(vote.clone());
            match self.leader(self.pacemaker.round + 1, Opening::Qc(&vote.hash)) {
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
}
