//! Statements, who attests, and what a node concludes from the statements it holds.

use super::*;
use config::Authority;
use crypto::KeyPair;
use std::collections::BTreeMap;
use std::time::Duration;

fn committee_of(stakes: &[Stake]) -> (Committee, Vec<KeyPair>) {
    let keys: Vec<KeyPair> = (0..stakes.len() as u64).map(KeyPair::from_seed).collect();
    let address = "127.0.0.1:1".parse().expect("address");
    let authorities: BTreeMap<_, _> = keys
        .iter()
        .zip(stakes)
        .map(|(k, stake)| {
            let authority = Authority {
                stake: *stake,
                consensus_address: address,
                mempool_address: address,
                transactions_address: address,
            };
            (k.name, authority)
        })
        .collect();
    (Committee { authorities }, keys)
}

fn key_of<'a>(keys: &'a [KeyPair], name: &PublicKey) -> &'a KeyPair {
    keys.iter().find(|k| k.name == *name).expect("a member")
}

/// A batch digest whose attesters (besides `author`) exclude `not`, for a committee of four.
fn digest_without(committee: &Committee, author: &PublicKey, not: &PublicKey) -> Digest {
    (0u32..)
        .map(|i| Digest::of(&i.to_le_bytes()))
        .find(|d| !attesters(committee, d, author).contains(not))
        .expect("some digest")
}

fn statement(
    keys: &[KeyPair],
    attester: &PublicKey,
    batch: Digest,
    author: PublicKey,
    invalid: Vec<u32>,
) -> Attestation {
    Attestation::new(
        batch,
        author,
        invalid,
        *attester,
        &key_of(keys, attester).secret,
    )
}

#[test]
fn a_statement_verifies_and_a_changed_one_does_not() {
    let (_, keys) = committee_of(&[1, 1, 1, 1]);
    let good = statement(
        &keys,
        &keys[1].name,
        Digest::of(b"b"),
        keys[0].name,
        vec![2, 7],
    );
    good.verify().expect("valid");
    let mut fewer = good.clone();
    fewer.invalid = vec![2];
    assert!(matches!(
        fewer.verify(),
        Err(AttestationError::Signature(_))
    ));
    let mut other_author = good.clone();
    other_author.author = keys[2].name;
    assert!(other_author.verify().is_err());
    let unordered = statement(
        &keys,
        &keys[1].name,
        Digest::of(b"b"),
        keys[0].name,
        vec![7, 2],
    );
    assert!(matches!(
        unordered.verify(),
        Err(AttestationError::Unordered)
    ));
    let repeated = statement(
        &keys,
        &keys[1].name,
        Digest::of(b"b"),
        keys[0].name,
        vec![2, 2],
    );
    assert!(matches!(
        repeated.verify(),
        Err(AttestationError::Unordered)
    ));
}

#[test]
fn a_statement_crosses_the_wire_and_garbage_does_not() {
    use crate::message::MempoolMessage;
    let (_, keys) = committee_of(&[1, 1, 1, 1]);
    let good = statement(
        &keys,
        &keys[1].name,
        Digest::of(b"b"),
        keys[0].name,
        vec![1, 5],
    );
    let frame = MempoolMessage::encode_attestation(&good);
    assert_eq!(
        MempoolMessage::decode(frame.clone()).expect("decodes"),
        MempoolMessage::Attestation(good)
    );
    assert!(MempoolMessage::decode(frame.slice(..frame.len() - 1)).is_err());
    let mut longer = frame.to_vec();
    longer.push(0);
    assert!(MempoolMessage::decode(longer.into()).is_err());
}

#[test]
fn the_author_and_f_others_attest_and_the_work_spreads_evenly() {
    let (committee, keys) = committee_of(&[1; 7]);
    let author = keys[0].name;
    let mut load: BTreeMap<PublicKey, usize> = BTreeMap::new();
    let batches = 3_000;
    for i in 0u32..batches {
        let named = attesters(&committee, &Digest::of(&i.to_le_bytes()), &author);
        // n = 7: f = 2, so the author and two others.
        assert_eq!(named.len(), 3);
        assert_eq!(named[0], author);
        let distinct: std::collections::BTreeSet<_> = named.iter().collect();
        assert_eq!(distinct.len(), 3);
        for name in &named[1..] {
            *load.entry(*name).or_default() += 1;
        }
    }
    // Six others share 2 × 3,000 attestations: 1,000 each, within a few percent.
    assert_eq!(load.len(), 6);
    for (name, count) in load {
        assert!((900..=1_100).contains(&count), "{name} attested {count}");
    }
}

#[test]
fn attesters_hold_f_plus_one_stake_when_stakes_differ() {
    let (committee, keys) = committee_of(&[1, 1, 1, 6]);
    // Total 9: f+1 stake is 3.
    for i in 0u32..50 {
        let named = attesters(&committee, &Digest::of(&i.to_le_bytes()), &keys[0].name);
        let stake: Stake = named.iter().map(|n| committee.stake(n)).sum();
        assert!(stake >= committee.validity_threshold());
        // No member is named once the stake is reached.
        let without_last: Stake = named[..named.len() - 1]
            .iter()
            .map(|n| committee.stake(n))
            .sum();
        assert!(without_last < committee.validity_threshold());
    }
    // A lone member attests alone.
    let (alone, keys) = committee_of(&[1]);
    assert_eq!(
        attesters(&alone, &Digest::of(b"x"), &keys[0].name),
        vec![keys[0].name]
    );
}

#[test]
fn matching_statements_of_f_plus_one_certify_and_disagreeing_ones_do_not() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let observer = keys[3].name;
    let author = keys[0].name;
    let batch = digest_without(&committee, &author, &observer);
    let other = attesters(&committee, &batch, &author)[1];
    let honest = |name: &PublicKey| statement(&keys, name, batch, author, vec![4]);

    // Certified: the author's and the other attester's statements agree.
    let table = Attestations::new(observer, committee.clone(), 16);
    table.insert(honest(&author)).expect("kept");
    assert_eq!(
        table.verdict(&batch),
        Verdict::Unattested,
        "one statement is not f+1"
    );
    table.insert(honest(&other)).expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Attested(vec![4]));

    // A Byzantine author calls its forgery valid; the honest attester names it: no certificate.
    let table = Attestations::new(observer, committee.clone(), 16);
    table
        .insert(statement(&keys, &author, batch, author, vec![]))
        .expect("kept");
    table.insert(honest(&other)).expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // A Byzantine attester calls it valid: no certificate either.
    let table = Attestations::new(observer, committee.clone(), 16);
    table.insert(honest(&author)).expect("kept");
    table
        .insert(statement(&keys, &other, batch, author, vec![]))
        .expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // A member that is no attester of the batch is not counted, however it signs.
    let table = Attestations::new(observer, committee.clone(), 16);
    table
        .insert(statement(&keys, &author, batch, author, vec![]))
        .expect("kept");
    let outsider = statement(&keys, &keys[3].name, batch, author, vec![]);
    assert!(matches!(
        table.insert(outsider),
        Err(AttestationError::NotAnAttester { .. })
    ));
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // An attester that signs two different statements: the first stands.
    let table = Attestations::new(observer, committee, 16);
    table.insert(honest(&author)).expect("kept");
    table
        .insert(statement(&keys, &other, batch, author, vec![]))
        .expect("kept");
    table.insert(honest(&other)).expect("kept, ignored");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);
}

#[test]
fn a_node_that_checked_a_batch_trusts_its_own_finding() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[1].name;
    let batch = Digest::of(b"mine");
    let table = Attestations::new(me, committee, 16);
    // Whatever the others say.
    let liar = statement(&keys, &keys[0].name, batch, keys[0].name, vec![]);
    table.insert(liar).expect("kept");
    table.insert_own(batch, vec![3]);
    assert_eq!(table.verdict(&batch), Verdict::Checked(vec![3]));
    table.forget(&batch);
    assert_eq!(table.verdict(&batch), Verdict::Unattested);
    assert_eq!(table.held(), 0);
}

#[test]
fn a_flooding_member_only_pushes_out_its_own_statements() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let observer = keys[3].name;
    let table = Attestations::new(observer, committee.clone(), 8);
    let batch = digest_without(&committee, &author, &observer);
    let other = attesters(&committee, &batch, &author)[1];
    table
        .insert(statement(&keys, &other, batch, author, vec![]))
        .expect("kept");
    // The author states a hundred made-up batches: only its latest 8 are kept.
    for i in 0u32..100 {
        let made_up = Digest::of(&(1_000 + i).to_le_bytes());
        table
            .insert(statement(&keys, &author, made_up, author, vec![]))
            .expect("kept");
    }
    assert_eq!(table.held(), 9);
    assert_eq!(
        table.statements(&batch),
        1,
        "the other attester's statement stays"
    );
}

#[tokio::test]
async fn the_wait_for_a_certificate_ends_when_it_forms_or_times_out() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let batch = Digest::of(b"waited");
    let other = attesters(&committee, &batch, &author)[1];
    let timed_out = Attestations::new(author, committee.clone(), 16);
    timed_out.insert_own(batch, vec![]);
    assert!(!timed_out.certified(&batch, Duration::from_millis(50)).await);
    let table = Attestations::new(author, committee, 16);
    table.insert_own(batch, vec![]);
    let later = table.clone();
    let statement = statement(&keys, &other, batch, author, vec![]);
    let waiter =
        tokio::spawn(async move { later.certified(&batch, Duration::from_secs(30)).await });
    tokio::task::yield_now().await;
    table.insert(statement).expect("kept");
    assert!(waiter.await.expect("waited"));
}

/// A member that withholds its statements: the first batch it attests waits the whole timeout,
/// the next ones are handed on at once (checked by every node), until it states again.
#[tokio::test(start_paused = true)]
async fn a_withholding_attester_holds_back_one_batch_not_every_one() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[0].name;
    let table = Attestations::new(me, committee.clone(), 64);
    let batches: Vec<Digest> = (0u32..)
        .map(|i| Digest::of(&i.to_le_bytes()))
        .filter(|d| attesters(&committee, d, &me)[1] == keys[1].name)
        .take(3)
        .collect();
    let wait = Duration::from_secs(1);
    for batch in &batches {
        table.insert_own(*batch, vec![]);
    }
    let start = tokio::time::Instant::now();
    assert!(!table.certified(&batches[0], wait).await);
    assert_eq!(start.elapsed(), wait, "the first batch waits the timeout");
    assert!(table.is_silent(&keys[1].name));
    let again = tokio::time::Instant::now();
    assert!(!table.certified(&batches[1], wait).await);
    assert_eq!(
        again.elapsed(),
        Duration::ZERO,
        "a silent attester is not waited for"
    );
    // It states again: it is waited for again, and certifies.
    table
        .insert(statement(&keys, &keys[1].name, batches[2], me, vec![]))
        .expect("kept");
    assert!(!table.is_silent(&keys[1].name));
    assert!(table.certified(&batches[2], wait).await);
}

/// Every attester stated and they disagree: the answer is known, nothing is waited for.
#[tokio::test(start_paused = true)]
async fn disagreeing_statements_end_the_wait_at_once() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[0].name;
    let batch = Digest::of(b"disputed");
    let other = attesters(&committee, &batch, &me)[1];
    let table = Attestations::new(me, committee, 16);
    table.insert_own(batch, vec![2]);
    table
        .insert(statement(&keys, &other, batch, me, vec![]))
        .expect("kept");
    let start = tokio::time::Instant::now();
    assert!(!table.certified(&batch, Duration::from_secs(1)).await);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(!table.is_silent(&other), "it stated: it is not silent");
}
