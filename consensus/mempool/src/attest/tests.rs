//! Statements, who attests, and what a node concludes from the statements it holds.

use super::*;
use config::{Authority, Committee, Stake};
use crypto::KeyPair;
use crypto::{Digest, PublicKey};
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

fn limits(statements: usize) -> Limits {
    Limits {
        statements,
        ..Limits::default()
    }
}

/// A batch number of `author`'s whose attesters (besides the author) exclude `not`.
fn seq_without(committee: &Committee, author: &PublicKey, not: &PublicKey) -> u64 {
    (0u64..)
        .find(|seq| !attesters(committee, author, *seq).contains(not))
        .expect("some number")
}

/// The batch numbers of `author`'s that `member` attests, beside the author.
fn seqs_naming(committee: &Committee, author: &PublicKey, member: &PublicKey) -> Vec<u64> {
    (0u64..64)
        .filter(|seq| attesters(committee, author, *seq)[1..].contains(member))
        .collect()
}

/// A batch of ten transactions whose invalid ones are `invalid`.
fn finding(invalid: Vec<u32>) -> Finding {
    Finding {
        tx_count: 10,
        invalid,
    }
}

fn statement(
    keys: &[KeyPair],
    attester: &PublicKey,
    batch: Digest,
    (author, seq): (PublicKey, u64),
    invalid: Vec<u32>,
) -> Attestation {
    Attestation::new(
        batch,
        author,
        seq,
        finding(invalid),
        *attester,
        &key_of(keys, attester).secret,
    )
}

#[test]
fn a_statement_verifies_and_a_changed_one_does_not() {
    let (_, keys) = committee_of(&[1, 1, 1, 1]);
    let batch = (keys[0].name, 3);
    let good = statement(&keys, &keys[1].name, Digest::of(b"b"), batch, vec![2, 7]);
    good.verify(10).expect("valid");
    let mut fewer = good.clone();
    fewer.invalid = vec![2];
    assert!(matches!(
        fewer.verify(10),
        Err(AttestationError::Signature(_))
    ));
    let mut other_author = good.clone();
    other_author.author = keys[2].name;
    assert!(other_author.verify(10).is_err());
    let mut other_seq = good.clone();
    other_seq.seq = 4;
    assert!(other_seq.verify(10).is_err());
    for positions in [vec![7, 2], vec![2, 2]] {
        let unordered = statement(&keys, &keys[1].name, Digest::of(b"b"), batch, positions);
        assert!(matches!(
            unordered.verify(10),
            Err(AttestationError::Unordered)
        ));
    }
}

/// A member could name any number of positions in a statement, for a batch that does not exist:
/// about 2,000,000 positions fit in a frame, 8 MB kept by every node. Now a statement names no
/// more transactions than a batch holds, and no position beyond them.
#[test]
fn byzantine_a_statement_naming_more_than_a_batch_holds_is_refused() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let table = Attestations::new(
        keys[3].name,
        committee,
        Limits {
            max_batch_txs: 1_000,
            ..Limits::default()
        },
    );
    let sign = |tx_count: u32, invalid: Vec<u32>| {
        Attestation::new(
            Digest::of(b"made up"),
            author,
            0,
            Finding { tx_count, invalid },
            author,
            &keys[0].secret,
        )
    };
    assert!(matches!(
        table.insert(sign(200_000, (0..200_000).collect())),
        Err(AttestationError::TooManyTransactions { .. })
    ));
    assert!(matches!(
        table.insert(sign(10, vec![3, 10])),
        Err(AttestationError::BeyondTheBatch { position: 10, .. })
    ));
    table
        .insert(sign(1_000, (0..1_000).collect()))
        .expect("every position of the fullest batch");
    assert_eq!(table.held(), 1);
}

/// A flood of the largest statements, for made-up batches, from one member: its statements
/// stay within its bytes (what the table counts, and what the allocator saw), and the others'
/// statements stay.
#[test]
fn byzantine_a_flood_of_the_largest_statements_stays_within_the_members_bytes() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let observer = keys[3].name;
    let seq = seq_without(&committee, &author, &observer);
    let other = attesters(&committee, &author, seq)[1];
    let real = Digest::of(b"real");
    let max_batch_txs = 100_000;
    let bound = 4 << 20;
    let (table, peak) = plumbing::test_alloc::peak_during(|| {
        let table = Attestations::new(
            observer,
            committee.clone(),
            Limits {
                statements: 4_096,
                bytes: bound,
                max_batch_txs,
                max_batch_bytes: usize::MAX,
            },
        );
        table
            .insert(statement(&keys, &other, real, (author, seq), vec![]))
            .expect("kept");
        for i in 0u32..64 {
            let made_up = Digest::of(&i.to_le_bytes());
            let everything = Finding {
                tx_count: max_batch_txs,
                invalid: (0..max_batch_txs).collect(),
            };
            let flood = Attestation::new(made_up, author, 0, everything, author, &keys[0].secret);
            table.insert(flood).expect("kept");
            assert!(table.bytes_of(&author) <= bound);
        }
        table
    });
    // 64 statements of 400 KB were sent: ten fit in the bound.
    assert!(table.held() <= 11);
    assert!(table.bytes_of(&author) > bound / 2);
    assert_eq!(
        table.statements(&real),
        1,
        "the other member's statement stays"
    );
    // What the allocator saw: the bound, one statement being built and one being decoded
    // beside it, and the maps.
    assert!(peak < bound + (2 << 20), "the flood held {peak} bytes");
}

#[test]
fn a_statement_crosses_the_wire_and_garbage_does_not() {
    use crate::message::MempoolMessage;
    let (_, keys) = committee_of(&[1, 1, 1, 1]);
    let good = statement(
        &keys,
        &keys[1].name,
        Digest::of(b"b"),
        (keys[0].name, 9),
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

/// The attesters of an author's batches follow its numbers: each member attests exactly its
/// share, in turn, whatever the batches hold. Before, the digest named them, and the digest
/// hashes the seal time, which the author picks: a few tries named any victim.
#[test]
fn the_author_and_f_others_attest_and_every_member_its_exact_share() {
    let (committee, keys) = committee_of(&[1; 7]);
    for author in keys.iter().map(|k| k.name) {
        let mut load: BTreeMap<PublicKey, usize> = BTreeMap::new();
        for seq in 0u64..600 {
            let named = attesters(&committee, &author, seq);
            // n = 7: f = 2, so the author and two others.
            assert_eq!(named.len(), 3);
            assert_eq!(named[0], author);
            let distinct: std::collections::BTreeSet<_> = named.iter().collect();
            assert_eq!(distinct.len(), 3);
            for name in &named[1..] {
                *load.entry(*name).or_default() += 1;
            }
        }
        // Six others share 2 × 600 statements: 200 each, exactly.
        assert_eq!(load.len(), 6);
        assert!(load.values().all(|count| *count == 200), "{load:?}");
    }
    // Batch 0 of different authors starts at different members.
    let firsts: std::collections::BTreeSet<_> = keys
        .iter()
        .map(|k| attesters(&committee, &k.name, 0)[1])
        .collect();
    assert!(firsts.len() > 1);
}

#[test]
fn attesters_hold_f_plus_one_stake_when_stakes_differ() {
    let (committee, keys) = committee_of(&[1, 1, 1, 6]);
    // Total 9: f+1 stake is 3.
    for seq in 0u64..50 {
        let named = attesters(&committee, &keys[0].name, seq);
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
    assert_eq!(attesters(&alone, &keys[0].name, 5), vec![keys[0].name]);
}

#[test]
fn matching_statements_of_f_plus_one_certify_and_disagreeing_ones_do_not() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let observer = keys[3].name;
    let author = keys[0].name;
    let seq = seq_without(&committee, &author, &observer);
    let place = (author, seq);
    let batch = Digest::of(b"batch");
    let other = attesters(&committee, &author, seq)[1];
    let honest = |name: &PublicKey| statement(&keys, name, batch, place, vec![4]);
    let fresh = || Attestations::new(observer, committee.clone(), limits(16));

    // Certified: the author's and the other attester's statements agree.
    let table = fresh();
    table.insert(honest(&author)).expect("kept");
    assert_eq!(
        table.verdict(&batch),
        Verdict::Unattested,
        "one statement is not f+1"
    );
    table.insert(honest(&other)).expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Attested(vec![4]));

    // A Byzantine author calls its forgery valid; the honest attester names it: no certificate.
    let table = fresh();
    table
        .insert(statement(&keys, &author, batch, place, vec![]))
        .expect("kept");
    table.insert(honest(&other)).expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // A Byzantine attester calls it valid: no certificate either.
    let table = fresh();
    table.insert(honest(&author)).expect("kept");
    table
        .insert(statement(&keys, &other, batch, place, vec![]))
        .expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // Statements that agree on the positions but not on the batch's size do not match.
    let table = fresh();
    table.insert(honest(&author)).expect("kept");
    let resized = Attestation::new(
        batch,
        author,
        seq,
        Finding {
            tx_count: 11,
            invalid: vec![4],
        },
        other,
        &key_of(&keys, &other).secret,
    );
    table.insert(resized).expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // A member that is no attester of the batch is refused, however it signs.
    let table = fresh();
    table.insert(honest(&author)).expect("kept");
    let outsider = statement(&keys, &observer, batch, place, vec![4]);
    assert!(matches!(
        table.insert(outsider),
        Err(AttestationError::NotAnAttester { .. })
    ));
    assert_eq!(table.verdict(&batch), Verdict::Unattested);

    // An attester that signs two different statements for a batch: the first stands.
    let table = fresh();
    table.insert(honest(&author)).expect("kept");
    table
        .insert(statement(&keys, &other, batch, place, vec![]))
        .expect("kept");
    table.insert(honest(&other)).expect("kept, ignored");
    assert_eq!(table.verdict(&batch), Verdict::Unattested);
}

/// A member that is no attester of a batch named itself its author (an author always attests
/// its own batch): its statement was kept, and counted with the real attesters', since the
/// table pooled every statement on the digest. Now statements count only with those naming
/// the same author and number.
#[test]
fn byzantine_a_member_naming_itself_author_does_not_count_for_another_authors_batch() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let observer = keys[3].name;
    let seq = seq_without(&committee, &author, &observer);
    let named = attesters(&committee, &author, seq);
    let outsider = keys
        .iter()
        .map(|k| k.name)
        .find(|k| !named.contains(k) && *k != observer)
        .expect("a member that does not attest the batch");
    let batch = Digest::of(b"author's batch");
    let table = Attestations::new(observer, committee, limits(16));
    table
        .insert(statement(&keys, &named[1], batch, (author, seq), vec![4]))
        .expect("kept");
    table
        .insert(statement(&keys, &outsider, batch, (outsider, 0), vec![4]))
        .expect("kept: it is an attester of the batch it claims");
    assert_eq!(
        table.verdict(&batch),
        Verdict::Unattested,
        "an outsider's statement counted"
    );
    // The real author's statement completes the real attesters' set.
    table
        .insert(statement(&keys, &author, batch, (author, seq), vec![4]))
        .expect("kept");
    assert_eq!(table.verdict(&batch), Verdict::Attested(vec![4]));
}

#[test]
fn a_node_that_checked_a_batch_trusts_its_own_finding() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[1].name;
    let author = keys[0].name;
    let seq = seqs_naming(&committee, &author, &me)[0];
    let batch = Digest::of(b"mine");
    let table = Attestations::new(me, committee, limits(16));
    // Whatever the others say.
    let liar = statement(&keys, &author, batch, (author, seq), vec![]);
    table.insert(liar).expect("kept");
    table.insert_own(statement(&keys, &me, batch, (author, seq), vec![3]));
    assert_eq!(table.verdict(&batch), Verdict::Checked(vec![3]));
    table.forget(&batch);
    assert_eq!(table.verdict(&batch), Verdict::Unattested);
    assert_eq!(table.held(), 0);
    assert_eq!(table.bytes_of(&me), 0);
    assert_eq!(table.bytes_of(&author), 0);
}

#[test]
fn a_flooding_member_only_pushes_out_its_own_statements() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let observer = keys[3].name;
    let table = Attestations::new(observer, committee.clone(), limits(8));
    let seq = seq_without(&committee, &author, &observer);
    let other = attesters(&committee, &author, seq)[1];
    let batch = Digest::of(b"real");
    table
        .insert(statement(&keys, &other, batch, (author, seq), vec![]))
        .expect("kept");
    // The author states a hundred made-up batches: only its latest 8 are kept.
    for i in 0u32..100 {
        let made_up = Digest::of(&(1_000 + i).to_le_bytes());
        table
            .insert(statement(&keys, &author, made_up, (author, 0), vec![]))
            .expect("kept");
    }
    assert_eq!(table.held(), 9);
    assert_eq!(
        table.statements(&batch),
        1,
        "the other attester's statement stays"
    );
}

#[tokio::test(start_paused = true)]
async fn the_wait_for_a_certificate_ends_when_it_forms_or_times_out() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let author = keys[0].name;
    let batch = Digest::of(b"waited");
    let other = attesters(&committee, &author, 0)[1];
    let timed_out = Attestations::new(author, committee.clone(), limits(16));
    timed_out.sealed(batch, 0);
    timed_out.insert_own(statement(&keys, &author, batch, (author, 0), vec![]));
    let start = tokio::time::Instant::now();
    assert!(!timed_out.certified(&batch, 0).await);
    // No statement delays measured yet: the longest wait.
    assert_eq!(start.elapsed(), MAX_WAIT);
    let table = Attestations::new(author, committee, limits(16));
    table.sealed(batch, 0);
    table.insert_own(statement(&keys, &author, batch, (author, 0), vec![]));
    let later = table.clone();
    let waiter = tokio::spawn(async move { later.certified(&batch, 0).await });
    tokio::task::yield_now().await;
    table
        .insert(statement(&keys, &other, batch, (author, 0), vec![]))
        .expect("kept");
    assert!(waiter.await.expect("waited"));
}

/// The batches of `me` that `member` attests, sealed and stated by `me` (the author), and each
/// stated by `member` `delay` after its sealing.
async fn answered(
    table: &Attestations,
    keys: &[KeyPair],
    seqs: &[u64],
    member: &PublicKey,
    delay: Duration,
) {
    let me = table.me();
    for seq in seqs {
        let batch = Digest::of(&seq.to_le_bytes());
        table.sealed(batch, *seq);
        table.insert_own(statement(keys, &me, batch, (me, *seq), vec![]));
        tokio::time::sleep(delay).await;
        table
            .insert(statement(keys, member, batch, (me, *seq), vec![]))
            .expect("kept");
        assert!(table.certified(&batch, *seq).await);
    }
}

/// A member that withholds its statements: the first batch it attests waits until the wait
/// ends, and the wait is a few times what the committee's statements take, not a second; the
/// next batches are handed on at once (checked by every node), until it states again.
#[tokio::test(start_paused = true)]
async fn a_withholding_attester_holds_back_one_short_wait_not_every_batch() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[0].name;
    let table = Attestations::new(me, committee.clone(), limits(64));
    // Every member's statements took 40 ms so far.
    for member in &keys[1..] {
        let seqs = seqs_naming(&committee, &me, &member.name);
        answered(
            &table,
            &keys,
            &seqs[..4],
            &member.name,
            Duration::from_millis(40),
        )
        .await;
    }
    assert_eq!(table.wait(), Duration::from_millis(120));
    let withholder = keys[1].name;
    let seqs: Vec<u64> = seqs_naming(&committee, &me, &withholder)[4..7].to_vec();
    let batches: Vec<Digest> = seqs.iter().map(|s| Digest::of(&s.to_le_bytes())).collect();
    for (batch, seq) in batches.iter().zip(&seqs) {
        table.sealed(*batch, *seq);
        table.insert_own(statement(&keys, &me, *batch, (me, *seq), vec![]));
    }
    let start = tokio::time::Instant::now();
    assert!(!table.certified(&batches[0], seqs[0]).await);
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(120),
        "one short wait"
    );
    assert!(table.is_silent(&withholder));
    let again = tokio::time::Instant::now();
    assert!(!table.certified(&batches[1], seqs[1]).await);
    assert_eq!(
        again.elapsed(),
        Duration::ZERO,
        "a silent attester is not waited for"
    );
    // It states again, for a batch of ours it attests: it is waited for again, and certifies.
    table
        .insert(statement(
            &keys,
            &withholder,
            batches[2],
            (me, seqs[2]),
            vec![],
        ))
        .expect("kept");
    assert!(!table.is_silent(&withholder));
    assert!(table.certified(&batches[2], seqs[2]).await);
}

/// Any statement of a silent member's, for any digest, cleared its mark, before the check for
/// a repeat: a withholder that sent one made-up statement after each wait made every batch
/// naming it wait the whole wait. Now only its first statement for one of this node's batches
/// that it attests clears the mark.
#[tokio::test(start_paused = true)]
async fn byzantine_a_made_up_or_repeated_statement_does_not_unmark_a_silent_attester() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[0].name;
    let member = keys[1].name;
    let table = Attestations::new(me, committee.clone(), limits(64));
    let seqs = seqs_naming(&committee, &me, &member);
    let stated = Digest::of(b"stated");
    table.sealed(stated, seqs[0]);
    table
        .insert(statement(&keys, &member, stated, (me, seqs[0]), vec![]))
        .expect("kept");
    let withheld = Digest::of(b"withheld");
    table.sealed(withheld, seqs[1]);
    table.insert_own(statement(&keys, &me, withheld, (me, seqs[1]), vec![]));
    assert!(!table.certified(&withheld, seqs[1]).await);
    assert!(table.is_silent(&member));
    // A made-up batch it names itself author of.
    table
        .insert(statement(
            &keys,
            &member,
            Digest::of(b"made up"),
            (member, 0),
            vec![],
        ))
        .expect("kept");
    assert!(table.is_silent(&member), "a made-up statement unmarked it");
    // A made-up batch of ours, with a number it attests.
    table
        .insert(statement(
            &keys,
            &member,
            Digest::of(b"not ours"),
            (me, seqs[2]),
            vec![],
        ))
        .expect("kept");
    assert!(
        table.is_silent(&member),
        "a statement for no batch of ours unmarked it"
    );
    // A repeat of a statement it made before.
    table
        .insert(statement(&keys, &member, stated, (me, seqs[0]), vec![]))
        .expect("kept, ignored");
    assert!(table.is_silent(&member), "a repeated statement unmarked it");
    // Its statement for the batch it withheld: late, but asked for.
    table
        .insert(statement(&keys, &member, withheld, (me, seqs[1]), vec![]))
        .expect("kept");
    assert!(!table.is_silent(&member));
}

/// Every attester stated and they disagree: the answer is known, nothing is waited for.
#[tokio::test(start_paused = true)]
async fn disagreeing_statements_end_the_wait_at_once() {
    let (committee, keys) = committee_of(&[1, 1, 1, 1]);
    let me = keys[0].name;
    let batch = Digest::of(b"disputed");
    let other = attesters(&committee, &me, 0)[1];
    let table = Attestations::new(me, committee, limits(16));
    table.sealed(batch, 0);
    table.insert_own(statement(&keys, &me, batch, (me, 0), vec![2]));
    table
        .insert(statement(&keys, &other, batch, (me, 0), vec![]))
        .expect("kept");
    let start = tokio::time::Instant::now();
    assert!(!table.certified(&batch, 0).await);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(!table.is_silent(&other), "it stated: it is not silent");
}
