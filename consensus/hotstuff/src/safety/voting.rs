//! What the core votes with: the voting rules (`rules.rs`) and what they must not forget across a
//! crash (`state.rs`), kept together so that no vote, timeout or proposal leaves the node before
//! the state it commits us to is on disk.

use crate::messages::{Block, Vote, QC};
use crate::safety::rules::SafetyRules;
use crate::safety::state::{SafetyState, SafetyStateError, SafetyStore};
use config::Round;
use store::Store;
use tracing::info;

/// The voting rules and what they must keep across a restart.
pub(crate) struct Voting {
    rules: SafetyRules,
    /// Where `rules`, `last_proposed_round` and `high_qc` are kept across restarts.
    store: SafetyStore,
    /// An honest leader proposes once per round, however many certificates reach it.
    last_proposed_round: Round,
    /// The highest certificate we know of: what our blocks extend and our timeouts report.
    high_qc: QC,
    /// Our latest vote, re-broadcast if its round times out (see `take_vote_of`).
    last_vote: Option<Vote>,
}

impl Voting {
    /// Loads the safety state a durable store kept from before a restart (none on a new
    /// store); returns it, the round to resume in, and whether there was one to load.
    pub(crate) fn resume(store: &Store) -> Result<(Self, Round, bool), SafetyStateError> {
        let mut safety_store = SafetyStore::new(store.safety());
        let resumed = safety_store.load()?;
        if let Some(state) = &resumed {
            info!(
                "resuming from the stored safety state: last voted round {}, last proposed \
                 round {}, high QC of round {}",
                state.last_voted_round, state.last_proposed_round, state.high_qc.round
            );
        }
        let restarted = resumed.is_some();
        let resumed = resumed.unwrap_or_default();
        let round = resumed.resume_round();
        let voting = Voting {
            rules: SafetyRules::resume(resumed.last_voted_round),
            store: safety_store,
            last_proposed_round: resumed.last_proposed_round,
            high_qc: resumed.high_qc,
            last_vote: None,
        };
        Ok((voting, round, restarted))
    }
}

impl Voting {
    /// The highest certificate we know of: what our blocks extend and our timeouts report.
    pub(crate) fn high_qc(&self) -> &QC {
        &self.high_qc
    }

    /// The round of our latest proposal: an honest leader proposes once per round.
    pub(crate) fn last_proposed_round(&self) -> Round {
        self.last_proposed_round
    }

    /// Our latest vote (`remember_vote`).
    pub(crate) fn last_vote(&self) -> Option<&Vote> {
        self.last_vote.as_ref()
    }

    /// Keeps `vote`, just cast: sent again to everyone if its round times out, and taken on
    /// trust when it comes back to us inside a QC (see `Core::check_qc`).
    pub(crate) fn remember_vote(&mut self, vote: Vote) {
        self.last_vote = Some(vote);
    }

    /// Our latest vote if it is of `round`, taken out to be sent again as the round times out
    /// (the one of an older round is dropped: it is moot).
    pub(crate) fn take_vote_of(&mut self, round: Round) -> Option<Vote> {
        self.last_vote.take().filter(|vote| vote.round == round)
    }

    /// We timed out of `round`: no vote of ours in it or below from now on.
    pub(crate) fn timed_out(&mut self, round: Round) {
        self.rules.timed_out(round);
    }

    /// What must survive a crash, as of now.
    pub(crate) fn state(&self) -> SafetyState {
        SafetyState {
            last_voted_round: self.rules.last_voted_round(),
            last_proposed_round: self.last_proposed_round,
            high_qc: self.high_qc.clone(),
        }
    }

    /// Writes `state()` (see `state.rs`); called before a vote, timeout or proposal leaves the
    /// node, which must not leave if this fails.
    pub(crate) async fn persist(&mut self) -> Result<(), SafetyStateError> {
        let state = self.state();
        self.store.save(state).await
    }

    /// Whether the rules let us vote for `block`; the vote is recorded, and on disk, when this
    /// says yes. Not voting is always safe; a vote the node could forget is not.
    pub(crate) async fn may_vote(&mut self, block: &Block) -> Result<bool, SafetyStateError> {
        if !self.rules.vote(block) {
            return Ok(false);
        }
        self.persist().await?;
        Ok(true)
    }

    /// Records our proposal of `round`. The leader votes for its own block next, so the write
    /// that records the proposal records that vote too: its vote then finds the state on disk
    /// already, and the round costs this node one synced write, not two. Recording a vote early
    /// only restrains a restarted node (it will not vote in this round), which is always safe.
    pub(crate) async fn record_proposal(&mut self, round: Round) -> Result<(), SafetyStateError> {
        self.last_proposed_round = round;
        let mut state = self.state();
        state.last_voted_round = state.last_voted_round.max(round);
        self.store.save(state).await
    }

    /// Signs nothing at or below `floor` from now on: a node that rebuilt its record from what
    /// the other members hold (`recall.rs`).
    pub(crate) fn raise_floor(&mut self, floor: Round) {
        self.rules.timed_out(floor);
        self.last_proposed_round = self.last_proposed_round.max(floor);
    }

    /// Adopts `qc` as our high QC if it is higher.
    pub(crate) fn raise_high_qc(&mut self, qc: &QC) {
        if qc.round > self.high_qc.round {
            self.high_qc = qc.clone();
        }
    }
}

/// What the core's tests set up by hand.
#[cfg(test)]
impl Voting {
    pub(crate) fn last_voted_round(&self) -> Round {
        self.rules.last_voted_round()
    }

    pub(crate) fn set_high_qc(&mut self, qc: QC) {
        self.high_qc = qc;
    }

    pub(crate) fn rules_mut(&mut self) -> &mut SafetyRules {
        &mut self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::keys;
    use crypto::{Digest, SignatureService};

    async fn block(round: Round, parent_round: Round) -> Block {
        let keys = keys(1);
        let qc = QC {
            hash: Digest([parent_round as u8; 32]),
            round: parent_round,
            votes: Vec::new(),
        };
        let service = SignatureService::new(keys[0].secret.clone());
        Block::new(qc, None, keys[0].name, round, Vec::new(), &service).await
    }

    #[tokio::test]
    async fn a_vote_is_on_the_store_before_it_is_allowed_and_survives_a_restart() {
        let store = Store::new();
        let (mut voting, round, restarted) = Voting::resume(&store).expect("a new store");
        assert_eq!((round, restarted), (1, false));
        assert!(voting.may_vote(&block(1, 0).await).await.expect("written"));
        // Never twice in a round.
        assert!(!voting.may_vote(&block(1, 0).await).await.expect("no write"));
        let (mut again, _, restarted) = Voting::resume(&store).expect("the stored state");
        assert!(restarted);
        assert_eq!(again.rules.last_voted_round(), 1);
        assert!(!again.may_vote(&block(1, 0).await).await.expect("no write"));
    }

    #[tokio::test]
    async fn the_high_qc_only_rises() {
        let store = Store::new();
        let (mut voting, _, _) = Voting::resume(&store).expect("a new store");
        let qc = |round| QC {
            hash: Digest([round as u8; 32]),
            round,
            votes: Vec::new(),
        };
        voting.raise_high_qc(&qc(5));
        voting.raise_high_qc(&qc(3));
        assert_eq!(voting.high_qc.round, 5);
        assert_eq!(voting.state().high_qc.round, 5);
    }
}
