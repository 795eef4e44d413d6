use super::*;
use crate::liveness::leader::LeaderElector;
use crate::messages::tests::{committee, keys, qc, tc};
use crate::messages::{MessageError, QC, TC};
use config::Committee;
use crypto::{Digest, Hash as _};

const TIMEOUT: Duration = Duration::from_millis(1_000);
const LINK: Duration = Duration::from_millis(20);
/// The liar is instance 4 of five; its core's broadcasts reach instances 0 to 3.
const EVERYONE: [usize; 4] = [0, 1, 2, 3];

fn honest() -> Lies {
    Lies {
        liar: 4,
        old_certificates: false,
        equivocate: false,
        withhold: None,
        replay: false,
    }
}

fn liar_with(lies: Lies, rule: LeaderRule, keys: &KeyPair, committee: &Committee) -> Liar {
    Liar::new(Setting {
        instance: 4,
        instances: 5,
        keys: keys.clone(),
        committee,
        rule,
        window: 3,
        seed: 1,
        lies,
        timeout_delay: TIMEOUT,
        max_link_delay: LINK,
    })
}

fn wire(message: ConsensusMessage) -> Bytes {
    encode(&message)
}

fn proposal(forged: &Forged) -> Block {
    match wire::decode(&forged.bytes) {
        Ok(ConsensusMessage::Propose(block)) => block,
        other => panic!("not a proposal: {other:?}"),
    }
}

/// Its own proposal after QC(4), with a TC of round 2 heard: some peers get it with that old TC
/// beside the QC, signed with the member's key (so only the structure check refuses it).
#[test]
fn its_proposal_goes_to_some_peers_with_an_old_tc() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        old_certificates: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::RoundRobin, &keys[0], &committee);
    let old = tc(2, &QC::genesis(), &keys[1..]);
    liar.hear_delivered(&wire(ConsensusMessage::TC(old.clone())));
    let qc4 = qc(Digest::of(b"b4"), 4, &keys[1..]);
    let block = signed_block(qc4.clone(), None, 5, vec![Digest::of(b"x")], &keys[0]);
    let forged = liar.rewrite(&wire(ConsensusMessage::Propose(block.clone())), &EVERYONE);
    assert_eq!(
        forged.iter().map(|f| f.to).collect::<Vec<_>>(),
        EVERYONE.to_vec()
    );
    let aged: Vec<Block> = forged
        .iter()
        .map(proposal)
        .filter(|b| *b != block)
        .collect();
    assert!(!aged.is_empty(), "no peer got an older certificate");
    assert!(aged.len() < EVERYONE.len(), "no peer got the original");
    for lie in &aged {
        assert_eq!(lie.tc, Some(old.clone()));
        assert_eq!((lie.qc.clone(), lie.round), (qc4.clone(), 5));
        assert!(carries_older_certificate(lie));
        assert_eq!(lie.verify_signature(), Ok(()));
        assert!(matches!(
            lie.check_structure(&committee),
            Err(MessageError::Malformed(_))
        ));
    }
    for f in &forged {
        liar.sent(f, 0);
    }
    assert_eq!(liar.told.older_certificates, aged.len() as u64);
    assert_eq!(liar.told.sent, EVERYONE.len() as u64);
}

/// After a TC of round 4, its block of round 5 goes to some peers extending an older QC (one it
/// heard) than its own; the TC stays, so the block is well formed.
#[test]
fn after_a_tc_its_proposal_extends_an_older_qc() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        old_certificates: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::RoundRobin, &keys[0], &committee);
    let qc2 = qc(Digest::of(b"b2"), 2, &keys[1..]);
    let qc3 = qc(Digest::of(b"b3"), 3, &keys[1..]);
    liar.hear_delivered(&wire(ConsensusMessage::Timeout(timeout(
        3,
        qc2.clone(),
        &keys[1],
    ))));
    let tc4 = tc(4, &qc3, &keys[1..]);
    let block = signed_block(qc3, Some(tc4.clone()), 5, vec![], &keys[0]);
    let forged = liar.rewrite(&wire(ConsensusMessage::Propose(block.clone())), &EVERYONE);
    let lies: Vec<Block> = forged
        .iter()
        .map(proposal)
        .filter(|b| *b != block)
        .collect();
    assert!(!lies.is_empty());
    for lie in lies {
        assert_eq!(
            (lie.qc.clone(), lie.tc.clone()),
            (qc2.clone(), Some(tc4.clone()))
        );
        assert_eq!(lie.check_structure(&committee), Ok(()));
        assert_eq!(lie.verify_signature(), Ok(()));
    }
}

/// Blocks B1..B6 (round 3 timed out: B4 carries TC(3), whose high QC certifies B2), heard as
/// proposals; returns them and the TC.
fn chain(keys: &[KeyPair]) -> (Vec<Block>, TC) {
    let b1 = signed_block(QC::genesis(), None, 1, vec![], &keys[1]);
    let qc1 = qc(b1.digest(), 1, &keys[..3]);
    let b2 = signed_block(qc1, None, 2, vec![], &keys[2]);
    let qc2 = qc(b2.digest(), 2, &keys[1..]);
    let tc3 = tc(3, &qc2, &keys[..3]);
    let mut blocks = vec![b1, b2];
    let b4 = signed_block(qc2, Some(tc3.clone()), 4, vec![], &keys[3]);
    blocks.push(b4);
    for (round, author) in [(5, 1), (6, 2)] {
        let parent = blocks.last().expect("a parent");
        let parent_qc = qc(parent.digest(), parent.round, &keys[1..]);
        blocks.push(signed_block(parent_qc, None, round, vec![], &keys[author]));
    }
    (blocks, tc3)
}

/// With the QC of round r - 1 in hand, the liar sends a block of round r carrying an old TC
/// whose election names it, where the QC names another member: it usurps the round.
#[test]
fn an_old_tc_that_elects_the_liar_usurps_a_round() {
    let keys = keys(4);
    let committee = committee(&keys);
    let (blocks, tc3) = chain(&keys);
    // Which member an old TC would make leader where the QC elects another, from an election
    // that heard the same blocks.
    let mut elector = LeaderElector::new(LeaderRule::Reputation, &committee, 3);
    blocks.iter().for_each(|b| elector.record(b));
    let (parent, usurper) = blocks
        .iter()
        .filter(|b| b.round >= 4)
        .find_map(|parent| {
            let round = parent.round + 1;
            let by_tc = elector.leader(round, Opening::Tc(&tc3))?;
            let by_qc = elector.leader(round, Opening::Qc(&parent.digest()))?;
            (by_tc != by_qc).then_some((parent.clone(), by_tc))
        })
        .expect("in some round, the old TC elects another member than the QC");
    let liar_keys = keys.iter().find(|k| k.name == usurper).expect("a member");
    let lies = Lies {
        old_certificates: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::Reputation, liar_keys, &committee);
    let mut forged = Vec::new();
    for block in &blocks {
        forged.extend(liar.hear_delivered(&wire(ConsensusMessage::Propose(block.clone()))));
    }
    let round = parent.round + 1;
    let usurping: Vec<&Forged> = forged
        .iter()
        .filter(|f| proposal(f).round == round)
        .collect();
    assert_eq!(
        usurping.iter().map(|f| f.to).collect::<Vec<_>>(),
        EVERYONE.to_vec(),
        "the usurping block goes to every peer"
    );
    let block = proposal(usurping[0]);
    assert_eq!(block.author, usurper);
    assert_eq!(block.qc.hash, parent.digest());
    assert_eq!(block.tc, Some(tc3.clone()));
    assert_eq!(block.verify_signature(), Ok(()));
    assert!(block.check_structure(&committee).is_err());
    assert!(liar.told.usurpations >= 1);
    // Once per round.
    let again = liar.hear_delivered(&wire(ConsensusMessage::Propose(parent.clone())));
    assert!(again.iter().all(|f| proposal(f).round != round));
}

/// Equivocating, its proposal goes to some peers with another QC signer set (its own vote in
/// place of a signer): both versions are valid blocks with different digests.
#[test]
fn an_equivocated_proposal_has_another_valid_signer_set() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        equivocate: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::RoundRobin, &keys[3], &committee);
    let parent = Digest::of(b"b4");
    let block = signed_block(qc(parent, 4, &keys[..3]), None, 5, vec![], &keys[3]);
    let forged = liar.rewrite(&wire(ConsensusMessage::Propose(block.clone())), &EVERYONE);
    let others: Vec<Block> = forged
        .iter()
        .map(proposal)
        .filter(|b| *b != block)
        .collect();
    assert!(!others.is_empty() && others.len() < EVERYONE.len());
    for other in others {
        assert_eq!(other.verify(&committee), Ok(()));
        assert_ne!(other.digest(), block.digest());
        assert_eq!((other.qc.hash, other.qc.round), (parent, 4));
        assert!(other.qc.votes.iter().any(|(name, _)| *name == keys[3].name));
    }
    assert!(liar.told.equivocations >= 1);
}

/// Equivocating, it votes for the block its core voted for to the next leader, and for another
/// block of the round it heard of to some other peers.
#[test]
fn equivocated_votes_go_to_other_peers() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        equivocate: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::RoundRobin, &keys[3], &committee);
    let qc4 = qc(Digest::of(b"b4"), 4, &keys[..3]);
    let a = signed_block(qc4.clone(), None, 5, vec![], &keys[1]);
    let b = signed_block(qc4, None, 5, vec![Digest::of(b"x")], &keys[1]);
    for block in [&a, &b] {
        liar.hear_delivered(&wire(ConsensusMessage::Propose(block.clone())));
    }
    let own = vote(a.digest(), 5, &keys[3]);
    let forged = liar.rewrite(&wire(ConsensusMessage::Vote(own.clone())), &[2]);
    let votes: Vec<(usize, Vote)> = forged
        .iter()
        .map(|f| match wire::decode(&f.bytes) {
            Ok(ConsensusMessage::Vote(vote)) => (f.to, vote),
            other => panic!("not a vote: {other:?}"),
        })
        .collect();
    assert!(votes.contains(&(2, own)));
    let lies: Vec<&(usize, Vote)> = votes.iter().filter(|(to, _)| *to != 2).collect();
    assert!(!lies.is_empty());
    for (_, lie) in lies {
        assert_eq!((lie.hash, lie.round), (b.digest(), 5));
        assert_eq!(lie.verify(&committee), Ok(()));
    }
}

/// Equivocating, its timeout goes to some peers reporting a lower high QC, one it heard.
#[test]
fn equivocated_timeouts_report_a_lower_high_qc() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        equivocate: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::RoundRobin, &keys[3], &committee);
    let qc2 = qc(Digest::of(b"b2"), 2, &keys[..3]);
    let qc4 = qc(Digest::of(b"b4"), 4, &keys[..3]);
    liar.hear_delivered(&wire(ConsensusMessage::Timeout(timeout(
        3,
        qc2.clone(),
        &keys[0],
    ))));
    let own = timeout(6, qc4.clone(), &keys[3]);
    let forged = liar.rewrite(&wire(ConsensusMessage::Timeout(own.clone())), &EVERYONE);
    let sent: Vec<Timeout> = forged
        .iter()
        .map(|f| match wire::decode(&f.bytes) {
            Ok(ConsensusMessage::Timeout(timeout)) => timeout,
            other => panic!("not a timeout: {other:?}"),
        })
        .collect();
    let lower: Vec<&Timeout> = sent.iter().filter(|t| **t != own).collect();
    assert!(!lower.is_empty() && lower.len() < EVERYONE.len());
    for lie in lower {
        assert_eq!((lie.round, lie.high_qc.clone()), (6, qc2.clone()));
        assert_eq!(lie.verify(&committee), Ok(()));
    }
}

/// Withheld votes never leave; delayed ones leave just under the round timer, less the link's
/// largest delay.
#[test]
fn votes_are_withheld_or_held_until_just_under_the_timeout() {
    let keys = keys(4);
    let committee = committee(&keys);
    let own = wire(ConsensusMessage::Vote(vote(Digest::of(b"b"), 5, &keys[3])));
    let mut dropping = liar_with(
        Lies {
            withhold: Some(Withhold::Drop),
            ..honest()
        },
        LeaderRule::RoundRobin,
        &keys[3],
        &committee,
    );
    assert!(dropping.rewrite(&own, &[1]).is_empty());
    assert_eq!(dropping.told.withheld, 1);
    let mut delaying = liar_with(
        Lies {
            withhold: Some(Withhold::Delay),
            ..honest()
        },
        LeaderRule::RoundRobin,
        &keys[3],
        &committee,
    );
    let forged = delaying.rewrite(&own, &EVERYONE);
    assert_eq!(forged.len(), EVERYONE.len());
    for f in forged {
        assert_eq!(f.bytes, own);
        assert!(f.after < TIMEOUT - LINK, "{:?}", f.after);
        assert!(f.after >= TIMEOUT - LINK - Duration::from_millis(50));
    }
}

/// Replaying, it sends now and then a message of an earlier round it heard, unchanged.
#[test]
fn replays_are_earlier_messages_unchanged() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        replay: true,
        ..honest()
    };
    let mut liar = liar_with(lies, LeaderRule::RoundRobin, &keys[3], &committee);
    let mut heard = BTreeSet::new();
    for round in 1..=3 {
        let bytes = wire(ConsensusMessage::Vote(vote(
            Digest::of(b"b"),
            round,
            &keys[0],
        )));
        liar.hear_delivered(&bytes);
        heard.insert(bytes);
    }
    let mut replayed = 0;
    for round in 4..40 {
        let own = wire(ConsensusMessage::Vote(vote(
            Digest::of(b"c"),
            round,
            &keys[3],
        )));
        for f in liar.rewrite(&own, &[1]) {
            if f.bytes != own {
                assert!(heard.contains(&f.bytes));
                assert!(f.round < round && f.after < TIMEOUT);
                replayed += 1;
            }
        }
        heard.insert(own);
    }
    assert!(replayed > 0);
    assert_eq!(liar.told.replayed, replayed);
}

/// What it knows, and so what it sends next, depends on what it heard, not on the order it
/// heard it in: messages sent at one instant may reach the network in another order in another
/// run of the seed.
#[test]
fn what_it_sends_does_not_depend_on_the_order_it_heard_things() {
    let keys = keys(4);
    let committee = committee(&keys);
    let lies = Lies {
        liar: 4,
        old_certificates: false,
        equivocate: true,
        withhold: Some(Withhold::Delay),
        replay: true,
    };
    let (blocks, _) = chain(&keys);
    let mut messages: Vec<Bytes> = blocks
        .iter()
        .map(|b| wire(ConsensusMessage::Propose(b.clone())))
        .collect();
    let last = blocks.last().expect("a block");
    let qc6 = qc(last.digest(), 6, &keys[..3]);
    for (author, high_qc) in [
        (0, qc6.clone()),
        (1, last.qc.clone()),
        (2, blocks[1].qc.clone()),
    ] {
        messages.push(wire(ConsensusMessage::Timeout(timeout(
            7,
            high_qc,
            &keys[author],
        ))));
    }
    for signer in &keys[..3] {
        messages.push(wire(ConsensusMessage::Vote(vote(last.digest(), 6, signer))));
    }
    let then = |messages: &[Bytes]| {
        let mut liar = liar_with(lies, LeaderRule::Reputation, &keys[3], &committee);
        for message in messages {
            liar.hear_delivered(message);
        }
        let own = signed_block(qc6.clone(), None, 7, vec![], &keys[3]);
        let mut forged = liar.rewrite(&wire(ConsensusMessage::Propose(own)), &EVERYONE);
        let own = timeout(8, qc6.clone(), &keys[3]);
        forged.extend(liar.rewrite(&wire(ConsensusMessage::Timeout(own)), &EVERYONE));
        let mut out: Vec<(usize, Round, Duration, Bytes)> = forged
            .into_iter()
            .map(|f| (f.to, f.round, f.after, f.bytes))
            .collect();
        out.sort();
        (out, liar.told)
    };
    let first = then(&messages);
    let mut shuffled = messages.clone();
    shuffled.reverse();
    shuffled.rotate_left(3);
    assert_eq!(first, then(&shuffled));
    assert!(first.1.equivocations > 0 && first.1.delayed > 0);
}
