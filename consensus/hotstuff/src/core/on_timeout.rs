//! A timeout: our round's timer firing, and members' timeouts (the pacemaker,
//! `liveness::pacemaker`, decides when f+1 of them make us join a round and whom we help catch
//! up); and our first round, which a restarted node times out of.

use super::Core;
use crate::aggregator::AggregatorError;
use crate::error::ConsensusError;
use crate::liveness::leader::Opening;
use crate::messages::Timeout;
use crate::wire::ConsensusMessage;
use config::Round;
use crypto::PublicKey;
use tracing::{debug, warn};

impl Core {
    /// Our round's timer fired: we time out of the round (unless our vote record is unknown).
    pub(super) async fn local_timeout_round(&mut self) -> Result<(), ConsensusError> {
        if !self.may_sign() {
            debug!(
                "round {} timed out; no timeout of ours leaves while our vote record is unknown",
                self.pacemaker.round()
            );
            self.pacemaker.timer().reset();
            return Ok(());
        }
        warn!("timeout in round {}", self.pacemaker.round());
        // First: whatever fails below, the next attempt is a timeout delay away. A timer left
        // expired fires again at once, and a safety write that keeps failing (a full disk) would
        // spin the core and flood the log.
        self.pacemaker.timer().reset();
        self.metrics.record_timeout(self.pacemaker.round_leader());
        self.voting.timed_out(self.pacemaker.round());
        self.persist_safety().await?;
        // Votes go to the next leader only. If that leader is down, the block we voted for
        // would never be certified and its batches would wait for a later proposal of the same
        // node, which with round-robin leaders lands before the dead leader again: that node
        // would starve. Sending our vote to everyone lets the others certify the block anyway,
        // so the TC that follows carries its QC. (A vote is a vote: this changes no safety
        // argument, only who gets to count it.)
        let round = self.pacemaker.round();
        if let Some(vote) = self.voting.take_vote_of(round) {
            self.broadcast(&ConsensusMessage::Vote(vote.clone()))
                .await?;
            if !self.is_leader(self.pacemaker.round() + 1, Opening::Qc(&vote.hash)) {
                self.handle_vote(vote).await?;
            }
        }
        let timeout = Timeout::new(
            self.voting.high_qc().clone(),
            self.pacemaker.round(),
            self.name,
            &self.signature_service,
        )
        .await;
        self.pacemaker.remember_timeout(timeout.clone());
        self.broadcast(&ConsensusMessage::Timeout(timeout.clone()))
            .await?;
        self.handle_timeout(timeout).await
    }

    /// The first round this core is in: its leader proposes at once. A node restarted on its
    /// store instead times out of the round it resumes in. It does not know whether that round
    /// is alive (while it was down, the others went on, or, with more than f down, sat in some
    /// round timing out), and its timeout tells the others it is back: a member stuck in a
    /// higher round answers with its own timeout (`help_a_member_behind`), f+1 of those make us
    /// join their round, and our timeout of it completes their TC. Without it, commits resumed
    /// after an outage only once the survivors' timers fired again, up to a `timeout_delay`
    /// after the quorum was back.
    pub(super) async fn start_round(&mut self) -> Result<(), ConsensusError> {
        let anchor = self.voting.high_qc().hash;
        self.enter_round_opened_by(Opening::Qc(&anchor));
        if self.pacemaker.restarted() {
            return self.local_timeout_round().await;
        }
        if self.is_leader(self.pacemaker.round(), Opening::Qc(&anchor)) {
            self.try_propose(None).await;
        }
        Ok(())
    }

    /// `author` timed out of a round below ours: it is behind (restarted, or cut off). If we
    /// timed out of our round too, we are stuck in it, and the TC of our round may wait for
    /// that member: our timeout, sent to it alone, lets it join our round (see
    /// `join_timeouts`) at once rather than at our next timeout. Once per member and round of
    /// ours, whatever it sends; only to members.
    pub(super) async fn help_a_member_behind(
        &mut self,
        author: &PublicKey,
    ) -> Result<(), ConsensusError> {
        let Some(authority) = self.committee.authority(author) else {
            return Ok(());
        };
        let address = authority.consensus_address;
        let Some(timeout) = self.pacemaker.help(author, &self.name) else {
            return Ok(());
        };
        let round = timeout.round;
        let bytes = crate::wire::encode(&ConsensusMessage::Timeout(timeout))?;
        debug!("{author} timed out of a round below ours ({round}): sending it our timeout");
        let handler = self.network.sender.send(address, bytes).await;
        self.keep_handlers(vec![handler]);
        Ok(())
    }

    pub(super) async fn handle_timeout(&mut self, timeout: Timeout) -> Result<(), ConsensusError> {
        if timeout.round < self.pacemaker.round() {
            return self.help_a_member_behind(&timeout.author).await;
        }
        timeout.check_structure(&self.committee)?;
        // Its high QC first, even if the timeout itself is out of the window: a node restarted
        // at round 1 learns the survivors' round this way, or it would drop their timeouts for
        // ever while they ignore its own as stale (DiemBFT v4 processes every certificate).
        let qc_checked = self.advance_by_qc(&timeout.high_qc).await?;
        self.check_window(timeout.round)?;
        if self
            .aggregator
            .has_timed_out(timeout.round, &timeout.author)
        {
            return Err(AggregatorError::AuthorityReuse(timeout.author).into());
        }
        timeout.verify_signature()?;
        // The TC we may build carries the highest QC of its timeouts: each must be genuine.
        if !qc_checked && &timeout.high_qc != self.voting.high_qc() {
            timeout.high_qc.verify(&self.committee)?;
        }
        self.records.witness.timeout(&timeout);
        let (author, round) = (timeout.author, timeout.round);
        if let Some(tc) = self.aggregator.add_timeout(timeout)? {
            debug!("assembled {:?}", tc);
            self.records.witness.tc(&tc);
            self.advance_round(tc.round).await;
            self.enter_round_opened_by(Opening::Tc(&tc));
            self.broadcast(&ConsensusMessage::TC(tc.clone())).await?;
            if self.is_leader(self.pacemaker.round(), Opening::Tc(&tc)) {
                self.try_propose(Some(tc)).await;
            }
            return Ok(());
        }
        self.join_timeouts(author, round).await
    }

    /// Timeout joining (see `Pacemaker::join`): without it, nodes stuck in different rounds (a
    /// restarted node whose high QC leaves it below the survivors, who can form no TC without
    /// it) each wait for a TC of their own round that never comes. Only a verified timeout
    /// within the window gets here.
    pub(super) async fn join_timeouts(
        &mut self,
        author: PublicKey,
        round: Round,
    ) -> Result<(), ConsensusError> {
        let Some(join) = self.pacemaker.join(author, round, &self.committee) else {
            return Ok(());
        };
        debug!("joining the timeouts of round {join}");
        // `advance_round(r)` enters round r + 1.
        self.advance_round(join - 1).await;
        // Boxed: a timeout of our own comes back through `handle_timeout`, which got us here
        // (once, as it is of our round now, so the recursion ends there).
        Box::pin(self.local_timeout_round()).await
    }
}
