//! A core whose store holds no vote record: it signs nothing until the other members answered,
//! then only above what they show (`safety/recall.rs`).

use super::*;
use crate::messages::record::{Act, RecordReply};
use crate::safety::MissingRecord;

/// A harness whose core (on a new store) checks its record under `policy`, started.
async fn without_record(store: Store, policy: MissingRecord) -> Harness {
    let mut h = harness_on(store, Parameters::default());
    h.core = h.core.check_record(policy);
    assert!(h.core.start().await.is_continue());
    h
}

fn reply(from: &KeyPair, act: Option<Act>, high_qc: QC) -> ConsensusMessage {
    ConsensusMessage::RecordReply(RecordReply {
        author: from.name,
        act,
        high_qc,
        high_tc: None,
    })
}

/// Our vote of `round`, as a member that received it holds it.
fn our_vote(h: &Harness, round: Round) -> Act {
    let vote = vote(Digest::of(b"an old block"), round, &h.keys[0]);
    Act::Vote {
        hash: vote.hash,
        round,
        signature: vote.signature,
    }
}

async fn answer(h: &mut Harness, message: ConsensusMessage) -> std::ops::ControlFlow<()> {
    h.core.handle(Input::Message(message)).await
}

#[tokio::test]
async fn a_fresh_committee_votes_in_round_1_once_every_member_answered() {
    let mut h = without_record(Store::new(), MissingRecord::Refuse).await;
    let first = h.block(None, 1, vec![]);
    h.core.handle_proposal(first).await.expect("valid");
    assert!(h.core.voting.last_vote().is_none(), "voted before knowing");
    h.core.local_timeout_round().await.expect("no error");
    assert!(
        h.core.pacemaker.last_timeout().is_none(),
        "timed out before knowing"
    );
    for i in 1..4 {
        let nothing = reply(&h.keys[i], None, QC::genesis());
        assert!(answer(&mut h, nothing).await.is_continue());
    }
    // Nobody holds a signature of ours and no certificate formed: round 1, and the proposal
    // held back gets our vote.
    assert_eq!(h.core.pacemaker.round(), 1);
    assert_eq!(h.core.voting.last_vote().map(|v| v.round), Some(1));
}

#[tokio::test]
async fn a_member_showing_our_vote_stops_a_core_that_did_not_accept_the_risk() {
    let mut h = without_record(Store::new(), MissingRecord::Refuse).await;
    let shown = reply(&h.keys[2], Some(our_vote(&h, 5)), QC::genesis());
    assert!(answer(&mut h, shown).await.is_break());
    let fatal = h.rx_fatal.borrow().clone();
    assert_eq!(
        fatal,
        Some(FatalError::VoteRecordMissing {
            round: 5,
            peer: h.keys[2].name
        })
    );
    assert!(h.core.voting.last_vote().is_none());
}

#[tokio::test]
async fn with_the_risk_accepted_it_signs_only_above_what_the_members_show_and_keeps_it() {
    let store = Store::new();
    let mut h = without_record(store.clone(), MissingRecord::RiskEquivocation).await;
    let chain = h.chain(None, 1, 7);
    let high_qc = qc(chain[3].digest(), 4, &h.keys[..3]);
    // Member 1 holds our vote of round 6; members 2 and 3 show nothing of ours (one of them
    // may lie low: it changes nothing).
    let answers = [
        reply(&h.keys[1], Some(our_vote(&h, 6)), high_qc.clone()),
        reply(&h.keys[2], None, QC::genesis()),
        reply(&h.keys[3], None, high_qc),
    ];
    for message in answers {
        assert!(answer(&mut h, message).await.is_continue());
    }
    assert_eq!(h.core.voting.last_voted_round(), 6);
    assert_eq!(h.core.voting.last_proposed_round(), 6);
    assert_eq!(h.core.voting.high_qc().round, 4);
    assert_eq!(h.core.pacemaker.round(), 7);
    // The blocks of rounds up to 6 get no vote; round 7's does.
    for block in &chain[..6] {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert!(
        h.core.voting.last_vote().is_none(),
        "voted at or below round 6"
    );
    h.core
        .handle_proposal(chain[6].clone())
        .await
        .expect("valid");
    assert_eq!(h.core.voting.last_vote().map(|v| v.round), Some(7));
    // The record is on the store now: restarted on it, the core resumes from it.
    drop(h);
    let again = harness_on(store, Parameters::default());
    assert!(again.core.pacemaker.restarted());
    assert_eq!(again.core.voting.last_voted_round(), 7);
}

#[tokio::test]
async fn a_member_answers_with_the_highest_signature_it_holds_of_the_requester() {
    let mut h = harness(Parameters::default());
    let chain = h.chain(None, 1, 4);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // Blocks 2 to 4 carry QCs of rounds 1 to 3 signed by keys 0 to 2: we hold member 1's vote of
    // round 3 (our own too), nothing of member 3.
    let held = |h: &Harness, i: usize| h.core.records.witness.act_of(&h.keys[i].name);
    assert_eq!(held(&h, 1).map(|act| act.round()), Some(3));
    assert!(held(&h, 3).is_none());
    let t = timeout(9, QC::genesis(), &h.keys[3]);
    h.core.handle_timeout(t).await.expect("valid");
    assert_eq!(held(&h, 3).map(|act| act.round()), Some(9));
    assert!(held(&h, 3).expect("held").verify(&h.keys[3].name).is_ok());
}
