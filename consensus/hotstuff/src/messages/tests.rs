use super::*;
use config::Authority;
use crypto::{KeyPair, SecretKey};
use std::net::SocketAddr;

pub fn keys(n: u64) -> Vec<KeyPair> {
    let mut keys: Vec<_> = (0..n).map(KeyPair::from_seed).collect();
    keys.sort_by_key(|k| k.name);
    keys
}

pub fn committee(keys: &[KeyPair]) -> Committee {
    let addr = SocketAddr::from(([127, 0, 0, 1], 0));
    Committee {
        authorities: keys
            .iter()
            .map(|k| {
                (
                    k.name,
                    Authority {
                        stake: 1,
                        consensus_address: addr,
                        mempool_address: addr,
                        transactions_address: addr,
                    },
                )
            })
            .collect(),
    }
}

pub fn vote(block_hash: Digest, round: Round, kp: &KeyPair) -> Vote {
    Vote {
        hash: block_hash,
        round,
        author: kp.name,
        signature: Signature::new(&vote_digest(&block_hash, round), &kp.secret),
    }
}

pub fn qc(block_hash: Digest, round: Round, signers: &[KeyPair]) -> QC {
    QC {
        hash: block_hash,
        round,
        votes: signers
            .iter()
            .map(|k| (k.name, vote(block_hash, round, k).signature))
            .collect(),
    }
}

/// A TC of `round` whose signers all report `high_qc`.
pub fn tc(round: Round, high_qc: &QC, signers: &[KeyPair]) -> TC {
    TC {
        round,
        high_qc: high_qc.clone(),
        votes: signers
            .iter()
            .map(|k| {
                let t = timeout(round, high_qc.clone(), k);
                (k.name, t.signature, high_qc.round)
            })
            .collect(),
    }
}

pub fn timeout(round: Round, high_qc: QC, kp: &KeyPair) -> Timeout {
    let signature = Signature::new(&timeout_digest(round, high_qc.round), &kp.secret);
    Timeout {
        high_qc,
        round,
        author: kp.name,
        signature,
    }
}

pub fn signed_block(
    qc: QC,
    tc: Option<TC>,
    round: Round,
    payload: Vec<Digest>,
    author: &KeyPair,
) -> Block {
    let mut block = Block {
        qc,
        tc,
        author: author.name,
        round,
        payload,
        signature: Signature::default(),
    };
    block.signature = Signature::new(&block.digest(), &author.secret);
    block
}

fn outsider() -> (PublicKey, SecretKey) {
    let kp = KeyPair::from_seed(1000);
    (kp.name, kp.secret)
}

#[test]
fn valid_qc_verifies() {
    let keys = keys(4);
    let committee = committee(&keys);
    let qc = qc(Digest::of(b"b"), 3, &keys[..3]);
    assert_eq!(qc.verify(&committee), Ok(()));
    assert_eq!(QC::genesis().verify(&committee), Ok(()));
}

#[test]
fn every_signature_a_certificate_holds_is_counted_as_checked() {
    // Tests of this binary verify concurrently: the counter grows by at least this much.
    let keys = keys(4);
    let committee = committee(&keys);
    let qc = qc(Digest::of(b"b"), 3, &keys[..3]);
    let vote = vote(Digest::of(b"b"), 3, &keys[0]);
    let before = signatures_checked();
    assert_eq!(qc.verify(&committee), Ok(()));
    assert_eq!(vote.verify(&committee), Ok(()));
    assert!(signatures_checked() - before >= 4);
}

#[test]
fn qc_rejects_bad_signature_duplicates_outsiders_and_small_quorums() {
    let keys = keys(4);
    let committee = committee(&keys);
    let hash = Digest::of(b"b");

    let mut bad = qc(hash, 3, &keys[..3]);
    bad.votes[1].1 = vote(Digest::of(b"other"), 3, &keys[1]).signature;
    assert_eq!(bad.verify(&committee), Err(MessageError::InvalidSignature));

    let mut dup = qc(hash, 3, &keys[..2]);
    dup.votes.push(dup.votes[0]);
    assert_eq!(
        dup.verify(&committee),
        Err(MessageError::DuplicateAuthority(keys[0].name))
    );

    let (name, secret) = outsider();
    let mut stranger = qc(hash, 3, &keys[..2]);
    stranger
        .votes
        .push((name, Signature::new(&vote_digest(&hash, 3), &secret)));
    assert_eq!(
        stranger.verify(&committee),
        Err(MessageError::UnknownAuthority(name))
    );

    let small = qc(hash, 3, &keys[..2]);
    assert_eq!(
        small.verify(&committee),
        Err(MessageError::NotEnoughStake { have: 2, need: 3 })
    );
}

#[test]
fn vote_rejects_bad_signature_and_outsider() {
    let keys = keys(4);
    let committee = committee(&keys);
    let hash = Digest::of(b"b");
    let good = vote(hash, 2, &keys[0]);
    assert_eq!(good.verify(&committee), Ok(()));
    let mut forged = good.clone();
    forged.round = 3;
    assert_eq!(
        forged.verify(&committee),
        Err(MessageError::InvalidSignature)
    );
    let (name, secret) = outsider();
    let stranger = Vote {
        hash,
        round: 2,
        author: name,
        signature: Signature::new(&vote_digest(&hash, 2), &secret),
    };
    assert_eq!(
        stranger.verify(&committee),
        Err(MessageError::UnknownAuthority(name))
    );
}

#[test]
fn tc_rejects_bad_signature_duplicates_outsiders() {
    let keys = keys(4);
    let committee = committee(&keys);
    let tc_of = |signers: &[KeyPair]| TC {
        round: 5,
        high_qc: QC::genesis(),
        votes: signers
            .iter()
            .map(|k| {
                let t = timeout(5, QC::genesis(), k);
                (k.name, t.signature, 0)
            })
            .collect(),
    };
    assert_eq!(tc_of(&keys[..3]).verify(&committee), Ok(()));

    let mut lied = tc_of(&keys[..3]);
    lied.votes[0].2 = 4; // claims a higher QC round than it signed...
    lied.high_qc = qc(Digest::of(b"b"), 4, &keys[..3]); // ...even one with a real QC
    assert_eq!(lied.verify(&committee), Err(MessageError::InvalidSignature));

    let mut dup = tc_of(&keys[..2]);
    dup.votes.push(dup.votes[1]);
    assert_eq!(
        dup.verify(&committee),
        Err(MessageError::DuplicateAuthority(keys[1].name))
    );

    let (name, secret) = outsider();
    let mut stranger = tc_of(&keys[..2]);
    stranger
        .votes
        .push((name, Signature::new(&timeout_digest(5, 0), &secret), 0));
    assert_eq!(
        stranger.verify(&committee),
        Err(MessageError::UnknownAuthority(name))
    );
    assert!(matches!(
        tc_of(&keys[..2]).verify(&committee),
        Err(MessageError::NotEnoughStake { .. })
    ));
}

#[test]
fn timeout_checks_its_high_qc() {
    let keys = keys(4);
    let committee = committee(&keys);
    let good = timeout(4, qc(Digest::of(b"b"), 3, &keys[..3]), &keys[0]);
    assert_eq!(good.verify(&committee), Ok(()));
    let weak = timeout(4, qc(Digest::of(b"b"), 3, &keys[..1]), &keys[0]);
    assert!(matches!(
        weak.verify(&committee),
        Err(MessageError::NotEnoughStake { .. })
    ));
}

/// One Byzantine signer claims `high_qc_round = u64::MAX` inside a TC
/// otherwise made of honest timeouts. Every signature is genuine, but no QC of that round
/// exists, so the TC must not verify (it would make every later proposal unvotable).
#[test]
fn byzantine_tc_claiming_an_uncertified_high_qc_round_is_rejected() {
    let keys = keys(4);
    let committee = committee(&keys);
    let honest_qc = qc(Digest::of(b"b3"), 3, &keys[..3]);
    let mut votes: Vec<_> = keys[..2]
        .iter()
        .map(|k| (k.name, timeout(5, honest_qc.clone(), k).signature, 3))
        .collect();
    let byzantine = &keys[3];
    votes.push((
        byzantine.name,
        Signature::new(&timeout_digest(5, Round::MAX), &byzantine.secret),
        Round::MAX,
    ));
    // Whatever QC the forger attaches, it is not one of round u64::MAX.
    let forged = TC {
        round: 5,
        high_qc: honest_qc.clone(),
        votes,
    };
    assert!(matches!(
        forged.verify(&committee),
        Err(MessageError::Malformed(_))
    ));
    let mut claimed = forged.clone();
    claimed.high_qc.round = Round::MAX;
    assert!(claimed.verify(&committee).is_err());
    // The honest part alone plus the Byzantine member's truthful timeout does verify.
    let mut honest = forged;
    honest.votes[2] = (
        byzantine.name,
        timeout(5, honest_qc.clone(), byzantine).signature,
        3,
    );
    assert_eq!(honest.verify(&committee), Ok(()));
    // And the carried QC must be genuine.
    honest.high_qc = qc(Digest::of(b"other"), 3, &keys[..1]);
    assert!(honest.verify(&committee).is_err());
}

/// The block digest binds the TC, so a relay can neither strip a block's TC
/// nor swap it for another one without breaking the leader's signature.
#[test]
fn byzantine_relay_cannot_strip_or_swap_a_blocks_tc() {
    let keys = keys(4);
    let committee = committee(&keys);
    let leader = keys
        .iter()
        .find(|k| k.name == committee.leader(4))
        .expect("leader");
    let tc_of = |high_qc_round: Round| {
        let high_qc = if high_qc_round == 0 {
            QC::genesis()
        } else {
            qc(Digest::of(b"b"), high_qc_round, &keys[..3])
        };
        TC {
            round: 3,
            high_qc: high_qc.clone(),
            votes: keys[..3]
                .iter()
                .map(|k| {
                    let t = timeout(3, high_qc.clone(), k);
                    (k.name, t.signature, high_qc_round)
                })
                .collect(),
        }
    };
    let block = signed_block(QC::genesis(), Some(tc_of(0)), 4, vec![], leader);
    assert_eq!(block.verify(&committee), Ok(()));

    // Stripped, it is malformed (a round after a QC of round 0 with no TC between).
    let mut stripped = block.clone();
    stripped.tc = None;
    assert!(stripped.verify(&committee).is_err());

    let mut swapped = block.clone();
    swapped.tc = Some(tc_of(2));
    assert!(swapped.verify(&committee).is_err());
}

/// A block of round r is opened by the certificate of round r - 1 alone: its QC when it
/// carries no TC, its TC otherwise. A member holding QC(r - 1) could otherwise attach an old
/// TC, whose election (under reputation) names a leader of its choosing, or blames a member
/// it picks for a round it never led. Before, any TC of an earlier round passed.
#[test]
fn byzantine_a_block_carries_only_the_certificate_of_the_round_before() {
    let keys = keys(4);
    let committee = committee(&keys);
    let tc_of = |round: Round| TC {
        round,
        high_qc: QC::genesis(),
        votes: keys[..3]
            .iter()
            .map(|k| (k.name, timeout(round, QC::genesis(), k).signature, 0))
            .collect(),
    };
    let parent = qc(Digest::of(b"b5"), 5, &keys[..3]);
    let block = |qc: QC, tc: Option<TC>, round| signed_block(qc, tc, round, vec![], &keys[0]);
    // The two honest shapes: QC(r - 1), or TC(r - 1) with an older QC.
    assert_eq!(block(parent.clone(), None, 6).verify(&committee), Ok(()));
    assert_eq!(
        block(QC::genesis(), Some(tc_of(5)), 6).verify(&committee),
        Ok(())
    );
    // QC(r - 1) with an old TC, and an old TC alone.
    for (qc, tc) in [(parent.clone(), tc_of(3)), (QC::genesis(), tc_of(3))] {
        assert!(matches!(
            block(qc, Some(tc), 6).check_structure(&committee),
            Err(MessageError::Malformed(_))
        ));
    }
    // A QC of an older round with no TC to account for the rounds between.
    assert!(matches!(
        block(parent, None, 8).check_structure(&committee),
        Err(MessageError::Malformed(_))
    ));
}

/// The leader rule reads who signed a block's QC, so the block's digest must bind them: a
/// proposer, a relay or a sync responder could otherwise hand out one block (one digest)
/// with different valid signer sets, and nodes recording different copies would weigh a
/// member differently and elect different leaders. Before, the digest covered the certified
/// block's hash alone.
#[test]
fn byzantine_one_block_cannot_carry_two_signer_sets() {
    let keys = keys(4);
    let committee = committee(&keys);
    let parent = Digest::of(b"b1");
    let block = signed_block(qc(parent, 1, &keys[..3]), None, 2, vec![], &keys[0]);
    let mut other_signers = block.clone();
    other_signers.qc = qc(parent, 1, &keys[1..]);
    assert_eq!(other_signers.qc.verify(&committee), Ok(()));
    assert_ne!(block.digest(), other_signers.digest());
    assert_eq!(
        other_signers.verify(&committee),
        Err(MessageError::InvalidSignature)
    );
    // The same signers in another order are another copy too.
    let mut reordered = block.clone();
    reordered.qc.votes.reverse();
    assert_ne!(block.digest(), reordered.digest());
}

#[test]
fn block_checks_signature_and_qc() {
    let keys = keys(4);
    let committee = committee(&keys);
    let leader = keys
        .iter()
        .find(|k| k.name == committee.leader(1))
        .expect("leader");
    let block = signed_block(QC::genesis(), None, 1, vec![Digest::of(b"x")], leader);
    assert_eq!(block.verify(&committee), Ok(()));

    let mut tampered = block.clone();
    tampered.payload.push(Digest::of(b"y"));
    assert_eq!(
        tampered.verify(&committee),
        Err(MessageError::InvalidSignature)
    );
}
