//! The pacemaker's state and its decisions: which round this member is in, who leads it, when
//! a certificate or f+1 members' timeouts move it on, and whom to help catch up. The core acts on
//! what it decides (sends, counts votes, proposes); the decisions themselves read only the state
//! here, so they are tested without a core.

use crate::error::ConsensusError;
use crate::liveness::leader::{LeaderElector, Opening};
use crate::liveness::timer::Timer;
use crate::messages::{Block, Timeout, TC};
use config::{Committee, Parameters, Round, Stake};
use crypto::{Digest, PublicKey};
use std::collections::HashMap;
use std::time::Duration;

pub(crate) struct Pacemaker {
    round: Round,
    /// Fires when the current round has lasted `timeout_delay`.
    timer: Timer,
    /// Per member, the highest round above ours (and within the window) it sent us a valid
    /// timeout for: what timeout joining counts (see `join_timeouts`). One entry per member
    /// at most, whatever the rounds; the timeouts themselves are in the aggregator.
    timeout_rounds: HashMap<PublicKey, Round>,
    /// Who leads each round (see `leader.rs`).
    elector: LeaderElector,
    /// The leader of the current round, if this node can tell: whom its timeout blames.
    round_leader: Option<PublicKey>,
    /// The certificate that opened the current round: while this node cannot tell its leader,
    /// each block that arrives may complete the window (see `Core::lead_once_known`).
    opened_by: Option<OpenedBy>,
    /// Our latest timeout: sent again to a member found behind us (see `help_a_member_behind`).
    last_timeout: Option<Timeout>,
    /// Per member, the round of ours in which we last sent it `last_timeout`.
    helped: HashMap<PublicKey, Round>,
    /// The node resumed a stored safety state: it times out of its round as it starts (see
    /// `Core::start_round`).
    restarted: bool,
}

/// What opened a round, kept (`Opening` borrows).
#[derive(Clone)]
pub(crate) enum OpenedBy {
    Qc(Digest),
    Tc(TC),
}

impl OpenedBy {
    fn of(opening: Opening<'_>) -> Self {
        match opening {
            Opening::Qc(digest) => OpenedBy::Qc(*digest),
            Opening::Tc(tc) => OpenedBy::Tc(tc.clone()),
        }
    }

    pub(crate) fn opening(&self) -> Opening<'_> {
        match self {
            OpenedBy::Qc(digest) => Opening::Qc(digest),
            OpenedBy::Tc(tc) => Opening::Tc(tc),
        }
    }
}

impl Pacemaker {
    /// In `round`; `restarted`: resumed from a stored safety state.
    pub(crate) fn new(
        round: Round,
        restarted: bool,
        committee: &Committee,
        parameters: &Parameters,
    ) -> Self {
        Pacemaker {
            round,
            timer: Timer::new(Duration::from_millis(parameters.timeout_delay)),
            timeout_rounds: HashMap::new(),
            elector: LeaderElector::new(parameters.leader, committee, parameters.leader_window),
            round_leader: None,
            opened_by: None,
            last_timeout: None,
            helped: HashMap::new(),
            restarted,
        }
    }
}

impl Pacemaker {
    pub(crate) fn round(&self) -> Round {
        self.round
    }

    /// The leader of the current round, if this member can tell.
    pub(crate) fn round_leader(&self) -> Option<PublicKey> {
        self.round_leader
    }

    /// Fires when the current round has lasted `timeout_delay`.
    pub(crate) fn timer(&mut self) -> &mut Timer {
        &mut self.timer
    }

    /// Whether this member resumed a stored safety state (see `Core::start_round`).
    pub(crate) fn restarted(&self) -> bool {
        self.restarted
    }

    /// Notes a verified block: the leader of a later round may depend on it (see `leader.rs`).
    pub(crate) fn record_block(&mut self, block: &Block) {
        self.elector.record(block);
    }

    /// Forgets the blocks below `round` (they are being pruned).
    pub(crate) fn prune_below(&mut self, round: Round) {
        self.elector.prune(round);
    }

    /// Keeps `timeout`, ours of the current round, to help members behind us (see `help`).
    pub(crate) fn remember_timeout(&mut self, timeout: Timeout) {
        self.last_timeout = Some(timeout);
    }

    /// Moves to the round after `round`, unless this member is already past it; returns
    /// whether it moved. Nothing of the old round's opening carries over: the callers that
    /// hold the certificate of the round before say who leads (`enter_opened_by`); timeout
    /// joining holds none, and then only a rule that reads the round alone can tell.
    pub(crate) fn advance(&mut self, round: Round) -> bool {
        if round < self.round {
            return false;
        }
        self.timer.reset();
        self.round = round + 1;
        self.opened_by = None;
        self.round_leader = self.elector.leader_of_round(self.round);
        let current = self.round;
        self.timeout_rounds.retain(|_, r| *r > current);
        true
    }

    /// The leader of `round` opened by `opening`, if this member can tell (see `leader.rs`).
    pub(crate) fn leader(&self, round: Round, opening: Opening<'_>) -> Option<PublicKey> {
        self.elector.leader(round, opening)
    }

    /// Notes who leads the round just entered through `opening` (its timeout blames that
    /// leader); keeps the opening while this member cannot tell (see `take_unresolved`).
    pub(crate) fn enter_opened_by(&mut self, opening: Opening<'_>) -> Option<PublicKey> {
        self.round_leader = self.leader(self.round, opening);
        // Kept only while it may still be needed (a TC is a few kilobytes at n = 48).
        self.opened_by = self.round_leader.is_none().then(|| OpenedBy::of(opening));
        self.round_leader
    }

    /// The opening of the current round, taken out while its leader is still unknown: the
    /// caller enters the round by it again once a block may have completed the window.
    pub(crate) fn take_unresolved(&mut self) -> Option<OpenedBy> {
        if self.round_leader.is_some() {
            return None;
        }
        self.opened_by.take()
    }

    /// Timeout joining (Bracha-style amplification, as in DiemBFT v4 / Jolteon): records that
    /// `author` sent a valid timeout of `round`, and returns the round to join when members
    /// with f+1 stake timed out of rounds at or above it and it is above ours (at least one
    /// honest member got there). Each member counts once, with its highest round: a single
    /// (maybe Byzantine) member cannot move us.
    pub(crate) fn join(
        &mut self,
        author: PublicKey,
        round: Round,
        committee: &Committee,
    ) -> Option<Round> {
        if round <= self.round {
            return None;
        }
        let highest = self.timeout_rounds.entry(author).or_insert(round);
        *highest = (*highest).max(round);
        let mut rounds: Vec<(Round, Stake)> = self
            .timeout_rounds
            .iter()
            .map(|(name, r)| (*r, committee.stake(name)))
            .collect();
        rounds.sort_unstable_by_key(|(r, _)| std::cmp::Reverse(*r));
        let threshold = committee.validity_threshold();
        let mut stake: Stake = 0;
        let join = rounds.into_iter().find_map(|(r, s)| {
            stake += s;
            (stake >= threshold).then_some(r)
        })?;
        (join > self.round).then_some(join)
    }

    /// Our timeout of the current round, for `author`, a member that timed out of a round
    /// below ours: once per member and round of ours, and only if we timed out of our round
    /// too (then the TC of our round may wait for it). `None`: nothing to send.
    pub(crate) fn help(&mut self, author: &PublicKey, name: &PublicKey) -> Option<Timeout> {
        let round = self.round;
        let timeout = self.last_timeout.as_ref().filter(|t| t.round == round)?;
        if author == name || self.helped.get(author) >= Some(&round) {
            return None;
        }
        self.helped.insert(*author, round);
        Some(timeout.clone())
    }

    /// Rejects a round too far ahead of ours (see `Parameters::max_rounds_ahead`).
    pub(crate) fn check_window(
        &self,
        round: Round,
        max_ahead: Round,
    ) -> Result<(), ConsensusError> {
        if round > self.round.saturating_add(max_ahead) {
            return Err(ConsensusError::TooFarAhead {
                round,
                current: self.round,
            });
        }
        Ok(())
    }
}

/// What the core's tests set up and look at.
#[cfg(test)]
impl Pacemaker {
    pub(crate) fn set_round(&mut self, round: Round) {
        self.round = round;
    }

    pub(crate) fn last_timeout(&self) -> Option<&Timeout> {
        self.last_timeout.as_ref()
    }

    pub(crate) fn timeout_rounds(&self) -> &HashMap<PublicKey, Round> {
        &self.timeout_rounds
    }

    pub(crate) fn helped(&self) -> &HashMap<PublicKey, Round> {
        &self.helped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys};
    use crate::messages::QC;
    use crypto::{KeyPair, SignatureService};

    fn pacemaker(keys: &[KeyPair], round: Round) -> Pacemaker {
        Pacemaker::new(round, false, &committee(keys), &Parameters::default())
    }

    #[tokio::test]
    async fn one_member_ahead_cannot_move_us_and_f_plus_1_can() {
        let keys = keys(4);
        let committee = committee(&keys);
        let mut pacemaker = pacemaker(&keys, 5);
        // f = 1: one member (maybe Byzantine) says round 9, again and again.
        assert_eq!(pacemaker.join(keys[1].name, 9, &committee), None);
        assert_eq!(pacemaker.join(keys[1].name, 12, &committee), None);
        // A second member at 8: two members are at 8 or above, so an honest one got to 8.
        assert_eq!(pacemaker.join(keys[2].name, 8, &committee), Some(8));
        // Timeouts of our round or below count for nothing.
        assert_eq!(pacemaker.join(keys[3].name, 5, &committee), None);
    }

    #[tokio::test]
    async fn moving_on_forgets_the_timeouts_at_or_below_the_new_round() {
        let keys = keys(4);
        let committee = committee(&keys);
        let mut pacemaker = pacemaker(&keys, 5);
        assert_eq!(pacemaker.join(keys[1].name, 7, &committee), None);
        assert!(pacemaker.advance(7));
        assert_eq!(pacemaker.round, 8);
        // Member 1's round 7 is behind us now: member 2 at 9 alone moves nothing.
        assert_eq!(pacemaker.join(keys[2].name, 9, &committee), None);
        // A certificate of an older round does not move us back.
        assert!(!pacemaker.advance(3));
        assert_eq!(pacemaker.round, 8);
    }

    #[tokio::test]
    async fn a_member_behind_gets_our_timeout_once_per_round_and_only_after_ours() {
        let keys = keys(4);
        let mut pacemaker = pacemaker(&keys, 5);
        let (me, behind) = (keys[0].name, keys[1].name);
        // We have not timed out of round 5: our round may be alive, nothing to send.
        assert!(pacemaker.help(&behind, &me).is_none());
        let service = SignatureService::new(keys[0].secret.clone());
        let timeout = Timeout::new(QC::genesis(), 5, me, &service).await;
        pacemaker.last_timeout = Some(timeout);
        assert_eq!(pacemaker.help(&behind, &me).map(|t| t.round), Some(5));
        assert!(pacemaker.help(&behind, &me).is_none(), "once per round");
        assert!(pacemaker.help(&me, &me).is_none(), "never to ourselves");
        pacemaker.advance(5);
        // Our timeout of round 5 is of no use in round 6.
        assert!(pacemaker.help(&behind, &me).is_none());
    }

    #[tokio::test]
    async fn rounds_beyond_the_window_are_refused() {
        let keys = keys(4);
        let pacemaker = pacemaker(&keys, 10);
        assert!(pacemaker.check_window(30, 20).is_ok());
        assert!(matches!(
            pacemaker.check_window(31, 20),
            Err(ConsensusError::TooFarAhead {
                round: 31,
                current: 10
            })
        ));
    }

    #[tokio::test]
    async fn a_round_opened_by_a_certificate_names_its_leader_under_round_robin() {
        let keys = keys(4);
        let mut pacemaker = pacemaker(&keys, 1);
        let digest = Digest([7; 32]);
        let leader = pacemaker.enter_opened_by(Opening::Qc(&digest));
        assert!(leader.is_some());
        assert_eq!(pacemaker.round_leader, leader);
        // Round-robin always can tell: nothing is kept to resolve later.
        assert!(pacemaker.take_unresolved().is_none());
    }
}
