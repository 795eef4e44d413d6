//! A vote record request or reply, and the timer that asks again: the core's side of a missing
//! vote record (`safety::recall` decides, `safety::witness` holds what others signed): answering
//! members that lost theirs, and, when our own store holds none, asking the others, signing
//! nothing until they answered, then signing only above the floor their answers set.
//!
//! While the record is unknown the core runs as usual (it follows the rounds, stores and commits
//! blocks, counts votes), but no vote, timeout or proposal of ours leaves: `may_sign` says so
//! where each is made.

use super::records::RecordCheck;
use super::Core;
use crate::error::{ConsensusError, FatalError};
use crate::liveness::leader::Opening;
use crate::messages::record::RecordReply;
use crate::messages::Block;
use crate::safety::recall::{Decision, MissingRecord, Recall};
use crate::wire::{self, ConsensusMessage};
use crypto::PublicKey;
use plumbing::clock::{self, Instant};
use std::time::Duration;
use tracing::{debug, info, warn};

/// How often a node without its record asks again the members that have not answered (a
/// request is a key; the members answer at most once per `ANSWER_INTERVAL` each).
const ASK_AGAIN: Duration = Duration::from_millis(200);

/// How often, while it waits, it says for whom.
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// A member gets at most one answer from us per this interval: a request is a few bytes and an
/// answer two certificates, so unthrottled a member could make us send at its own pace.
const ANSWER_INTERVAL: Duration = Duration::from_millis(100);

impl Core {
    /// Whether our votes, timeouts and proposals may leave: not while our record is unknown.
    pub(super) fn may_sign(&self) -> bool {
        self.records.check.is_none()
    }

    /// A node whose store held no record (a new store) asks the others before it signs
    /// anything; what it does when one shows that its key signed before is `policy`'s. A core
    /// built without this call trusts its store (tests that drive the core).
    pub fn check_record(mut self, policy: MissingRecord) -> Self {
        if self.pacemaker.restarted() {
            return self;
        }
        let recall = Recall::new(
            self.name,
            self.committee.clone(),
            policy,
            Duration::from_millis(self.parameters.timeout_delay),
            Instant::now(),
        );
        self.records.check = Some(RecordCheck {
            recall,
            reported: Instant::now(),
            held: None,
        });
        self
    }

    /// Notes `block` as the proposal of our round we did not vote for (see `RecordCheck::held`).
    pub(super) fn hold_for_record(&mut self, block: &Block) {
        if let Some(check) = &mut self.records.check {
            check.held = Some(block.clone());
        }
    }

    /// At start: asks every other member, or goes on at once if nobody else need answer.
    pub(super) async fn ask_for_record(&mut self) -> Result<(), ConsensusError> {
        let Some(check) = &self.records.check else {
            return Ok(());
        };
        let (_, quorum) = check.recall.stake();
        info!(
            "no vote record on this store: asking the other members what they hold of this \
             key's signatures; no vote, timeout or proposal of ours leaves until members with \
             {quorum} stake, ours included, answered"
        );
        self.record_due().await
    }

    /// Asks the members that have not answered, says whom it waits for now and then, and
    /// decides once the answers allow.
    pub(super) async fn record_due(&mut self) -> Result<(), ConsensusError> {
        let Some(check) = &mut self.records.check else {
            return Ok(());
        };
        let now = Instant::now();
        let missing = check.recall.missing();
        if now.duration_since(check.reported) >= REPORT_EVERY {
            check.reported = now;
            let (stake, quorum) = check.recall.stake();
            warn!(
                "vote record unknown: members with {stake} of the {quorum} stake needed (ours \
                 included) answered; not voting, timing out or proposing until then; waiting for \
                 {}",
                names(&missing)
            );
        }
        let request = wire::encode(&ConsensusMessage::RecordRequest(self.name))?;
        for member in &missing {
            if let Some(authority) = self.committee.authority(member) {
                let address = authority.consensus_address;
                self.records.sender.send(address, request.clone()).await;
            }
        }
        clock::reset(self.records.due.as_mut(), now + ASK_AGAIN);
        self.decide_record(now).await
    }

    pub(super) async fn handle_record_reply(
        &mut self,
        reply: RecordReply,
    ) -> Result<(), ConsensusError> {
        let Some(check) = &mut self.records.check else {
            return Ok(());
        };
        let now = Instant::now();
        if let Err(e) = check.recall.accept(&reply, now) {
            debug!("record reply from {}: {e}", reply.author);
            return Ok(());
        }
        self.decide_record(now).await
    }

    /// A member without its record asks: what we hold of its signatures, and our highest
    /// certificates.
    pub(super) async fn answer_record_request(
        &mut self,
        origin: PublicKey,
    ) -> Result<(), ConsensusError> {
        let now = Instant::now();
        if let Some(at) = self.records.answered_at.get(&origin) {
            if now.duration_since(*at) < ANSWER_INTERVAL {
                return Ok(());
            }
        }
        let Some(address) = self
            .committee
            .authority(&origin)
            .map(|a| a.consensus_address)
        else {
            return Ok(());
        };
        self.records.answered_at.insert(origin, now);
        let reply = RecordReply {
            author: self.name,
            act: self.records.witness.act_of(&origin),
            high_qc: self.voting.high_qc().clone(),
            high_tc: self.records.witness.high_tc().cloned(),
        };
        let bytes = wire::encode(&ConsensusMessage::RecordReply(reply))?;
        self.records.sender.send(address, bytes).await;
        Ok(())
    }

    async fn decide_record(&mut self, now: Instant) -> Result<(), ConsensusError> {
        let Some(check) = &self.records.check else {
            return Ok(());
        };
        match check.recall.decide(now) {
            Decision::Wait => Ok(()),
            Decision::Refuse { round, peer } => {
                Err(FatalError::VoteRecordMissing { round, peer }.into())
            }
            Decision::Start { floor, signed } => self.settle_record(floor, signed).await,
        }
    }

    /// Signs only above `floor` from now on, the record on the store first, then adopts the
    /// certificates the members showed and takes part in the round it is in.
    async fn settle_record(
        &mut self,
        floor: config::Round,
        signed: Option<config::Round>,
    ) -> Result<(), ConsensusError> {
        let Some(check) = self.records.check.take() else {
            return Ok(());
        };
        self.voting.raise_floor(floor);
        self.persist_safety().await?;
        let (high_qc, high_tc) = check.recall.certificates();
        let answered = self.committee.size() - 1 - check.recall.missing().len();
        match signed {
            Some(round) => warn!(
                "vote record rebuilt from {answered} members' answers: this key signed in round \
                 {round} before; the highest certificate shown is of round {}; voting, timing \
                 out and proposing only above round {floor}",
                check.recall.certified()
            ),
            None => info!(
                "vote record: {answered} members answered, none holds a signature of this key; \
                 the highest certificate shown is of round {}; voting only above round {floor}",
                check.recall.certified()
            ),
        }
        // Verified when they arrived; they move us as any certificate we verify does.
        if high_qc.round > self.voting.high_qc().round {
            self.records.witness.qc(&high_qc);
            self.process_qc(&high_qc).await;
        }
        if let Some(tc) = high_tc.filter(|tc| tc.round >= self.pacemaker.round()) {
            self.records.witness.tc(&tc);
            self.update_high_qc(&tc.high_qc);
            self.advance_round(tc.round).await;
            self.enter_round_opened_by(Opening::Tc(&tc));
        }
        if self.pacemaker.round() <= floor {
            self.advance_round(floor).await;
        }
        match check.held.filter(|b| b.round == self.pacemaker.round()) {
            Some(block) => self.process_block(&block).await?,
            None => {
                let anchor = self.voting.high_qc().hash;
                if self.is_leader(self.pacemaker.round(), Opening::Qc(&anchor)) {
                    self.try_propose(None).await;
                }
            }
        }
        Ok(())
    }
}

fn names(members: &[PublicKey]) -> String {
    let names: Vec<String> = members.iter().map(ToString::to_string).collect();
    names.join(", ")
}
