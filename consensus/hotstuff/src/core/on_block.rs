//! A block: a proposal, a chain of blocks a peer sent us, or a block whose batches or ancestors
//! arrived. Each is checked, stored once its data is here, commits what the two-chain rule says
//! (`safety::commits`), and may get our vote (`on_vote.rs`).

use super::Core;
use crate::error::ConsensusError;
use crate::liveness::leader::Opening;
use crate::messages::{Block, MessageError};
use crate::safety;
use tracing::debug;

impl Core {
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
        if !qc_checked && &block.qc != self.voting.high_qc() {
            self.check_qc(&block.qc)?;
        }
        if let Some(tc) = block.tc.as_ref().filter(|_| !tc_checked) {
            tc.verify(&self.committee)?;
        }
        self.pacemaker.record_block(&block);
        // A proposal for a round we are in (or ahead of) must come from its leader. Older
        // blocks (ancestors we fetch) are vouched for by the QCs of their children instead, and
        // one whose window we lack is checked again before we vote for it.
        if block.round >= self.pacemaker.round() {
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
        if block.round > self.committed.last_round() {
            self.payload.named(block);
        }

        // b0 <- b1 <- block: block certifies b1, b1 certifies b0.
        if safety::commits(&b0, &b1) && b0.round > self.committed.last_round() {
            self.committed.record_direct(b0.round, &block.qc);
            self.commit(b0).await?;
        }

        self.vote_for(block).await
    }
}
