//! A certificate, however it arrives (a TC alone; a QC or TC in a block or a timeout, or
//! assembled here from votes): it moves our round and our high QC, and the pacemaker
//! (`liveness::pacemaker`) says who leads the round it opens.

use super::Core;
use crate::error::ConsensusError;
use crate::liveness::leader::Opening;
use crate::liveness::pacemaker::OpenedBy;
use crate::messages::{QC, TC};
use config::Round;
use crypto::PublicKey;
use std::sync::atomic::Ordering;
use tracing::debug;

impl Core {
    pub(super) async fn advance_round(&mut self, round: Round) {
        if !self.pacemaker.advance(round) {
            return;
        }
        self.metrics
            .round
            .store(self.pacemaker.round(), Ordering::Relaxed);
        debug!("moved to round {}", self.pacemaker.round());
        self.metrics.set_leader(self.pacemaker.round_leader());
        self.aggregator.cleanup(round);
        // A proposal held back for an earlier round is moot.
        self.proposals.pending = None;
        self.network.forget_before(self.pacemaker.round());
    }

    /// `qc` was verified by the caller (or assembled here from verified votes).
    pub(super) fn update_high_qc(&mut self, qc: &QC) {
        self.peer_rounds.certified(qc);
        self.records.witness.qc(qc);
        self.voting.raise_high_qc(qc);
    }

    pub(super) async fn process_qc(&mut self, qc: &QC) {
        let moved = qc.round >= self.pacemaker.round();
        self.advance_round(qc.round).await;
        self.update_high_qc(qc);
        if moved {
            self.enter_round_opened_by(Opening::Qc(&qc.hash));
        }
    }

    /// The leader of `round`, opened by `opening`, if this node can tell (see `leader.rs`).
    pub(super) fn leader(&self, round: Round, opening: Opening<'_>) -> Option<PublicKey> {
        self.pacemaker.leader(round, opening)
    }

    pub(super) fn is_leader(&self, round: Round, opening: Opening<'_>) -> bool {
        self.leader(round, opening) == Some(self.name)
    }

    /// Notes who leads the round just entered through `opening` (the METRICS line shows it).
    pub(super) fn enter_round_opened_by(&mut self, opening: Opening<'_>) {
        let leader = self.pacemaker.enter_opened_by(opening);
        self.metrics.set_leader(leader);
    }

    /// Under leader reputation a node may enter a round before it holds the window that names
    /// the round's leader: the votes for a block (small, from many) can reach the next leader
    /// before the block itself, and the QC they make opens a round whose draw reads that block.
    /// Once the missing block arrives the node can tell, and if it is the leader it proposes
    /// now: nobody else will, and the round would time out.
    pub(super) async fn lead_once_known(&mut self) {
        let Some(opened_by) = self.pacemaker.take_unresolved() else {
            return;
        };
        self.enter_round_opened_by(opened_by.opening());
        if self.pacemaker.round_leader() == Some(self.name) {
            let tc = match opened_by {
                OpenedBy::Tc(tc) => Some(tc),
                OpenedBy::Qc(_) => None,
            };
            self.try_propose(tc).await;
        }
    }

    pub(super) async fn handle_tc(&mut self, tc: TC) -> Result<(), ConsensusError> {
        if tc.round < self.pacemaker.round() {
            return Ok(());
        }
        tc.verify(&self.committee)?;
        self.records.witness.tc(&tc);
        // Adopt the TC's QC first: the block we may propose next must extend it (safety rule 2).
        self.update_high_qc(&tc.high_qc);
        self.advance_round(tc.round).await;
        self.enter_round_opened_by(Opening::Tc(&tc));
        if self.is_leader(self.pacemaker.round(), Opening::Tc(&tc)) {
            self.try_propose(Some(tc)).await;
        }
        Ok(())
    }

    /// Verifies and processes `qc` if it is above our high QC (so it may move our round or our
    /// high QC); returns whether it did. One that is not costs nothing: we are past it.
    pub(super) async fn advance_by_qc(&mut self, qc: &QC) -> Result<bool, ConsensusError> {
        if qc.round <= self.voting.high_qc().round {
            return Ok(false);
        }
        // `QC::verify` checks the round and the quorum of signers before the aggregate signature.
        self.check_qc(qc)?;
        self.process_qc(qc).await;
        Ok(true)
    }

    /// Like `advance_by_qc`, for a TC that would move our round or carries a higher QC.
    pub(super) async fn advance_by_tc(&mut self, tc: &TC) -> Result<bool, ConsensusError> {
        if tc.round < self.pacemaker.round() && tc.high_qc.round <= self.voting.high_qc().round {
            return Ok(false);
        }
        tc.verify(&self.committee)?;
        self.records.witness.tc(tc);
        // Adopt the TC's QC first: a block we propose next must extend it (safety rule 2).
        self.update_high_qc(&tc.high_qc);
        let moved = tc.round >= self.pacemaker.round();
        self.advance_round(tc.round).await;
        if moved {
            self.enter_round_opened_by(Opening::Tc(tc));
        }
        Ok(true)
    }

    /// Rejects a round too far ahead of ours (see `Parameters::max_rounds_ahead`).
    pub(super) fn check_window(&self, round: Round) -> Result<(), ConsensusError> {
        self.pacemaker
            .check_window(round, self.parameters.max_rounds_ahead)
    }
}
