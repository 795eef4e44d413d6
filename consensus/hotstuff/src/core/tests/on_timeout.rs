//! Timeouts and rounds: the round timer, joining a higher round, and the timeouts a member
//! behind gets.

use super::*;

/// A safety write that fails in a timeout (a full disk) still resets the round timer: the
/// next attempt comes a timeout delay later. Left expired, the timer fired again at once and
/// the core spun on the failing write, a warning per turn.
#[tokio::test(start_paused = true)]
async fn recovery_a_failed_safety_write_in_a_timeout_resets_the_timer() {
    let backend = store::testing::FailingBackend::default();
    let failing = backend.failing.clone();
    let mut h = harness_on(Store::with_backend(backend), Parameters::default());
    let delay = Duration::from_millis(h.core.parameters.timeout_delay);
    tokio::time::advance(delay * 2).await;
    assert!(
        h.core.pacemaker.timer().deadline() <= Instant::now(),
        "the timer expired"
    );
    failing.lock().expect("lock").push(Column::Safety);
    assert!(matches!(
        h.core.local_timeout_round().await,
        Err(ConsensusError::SafetyState(_))
    ));
    assert!(
        h.core.pacemaker.timer().deadline() >= Instant::now() + delay,
        "the timer was left expired: it fires again at once"
    );
}

/// Rejoin rule 1: a timeout beyond the round window is not stored, but the QC it carries
/// still moves the node (DiemBFT v4 processes every certificate it sees). Without this a node
/// restarted at round 1 drops the survivors' timeouts for round R > window forever.
#[tokio::test]
async fn timeout_beyond_the_window_moves_the_node_by_its_qc() {
    let mut h = harness(Parameters::default());
    let signers = h.keys[..3].to_vec();
    let high = qc(Digest::of(b"b299"), 299, &signers);
    let sender = h.keys[1].clone();
    h.core
        .handle_timeout(timeout(300, high.clone(), &sender))
        .await
        .expect("the QC moves us to round 300, where the timeout fits");
    assert_eq!(h.core.pacemaker.round(), 300);
    assert_eq!(*h.core.voting.high_qc(), high);
    assert_eq!(h.core.aggregator.rounds(), 1, "the timeout is counted now");

    // Still beyond the window after its QC: the QC counts, the timeout is not stored.
    let other = h.keys[2].clone();
    assert!(matches!(
        h.core
            .handle_timeout(timeout(1_000, high.clone(), &other))
            .await,
        Err(ConsensusError::TooFarAhead { .. })
    ));
    assert_eq!(h.core.pacemaker.round(), 300);
    assert_eq!(h.core.aggregator.rounds(), 1);

    // A replay of a certificate we are past costs no signature check (a corrupted one
    // shows it is not even looked at).
    let mut replay = high.clone();
    replay.votes[0].1 = vote(Digest::of(b"other"), 299, &signers[0]).signature;
    assert!(matches!(
        h.core.handle_timeout(timeout(1_000, replay, &other)).await,
        Err(ConsensusError::TooFarAhead { .. })
    ));

    // A forged QC above ours moves nothing.
    let mut forged = qc(Digest::of(b"b600"), 600, &signers);
    forged.votes[0].1 = vote(Digest::of(b"other"), 600, &signers[0]).signature;
    assert!(h
        .core
        .handle_timeout(timeout(601, forged, &other))
        .await
        .is_err());
    assert_eq!(h.core.pacemaker.round(), 300);
    assert_eq!(*h.core.voting.high_qc(), high);
}

/// Rejoin rule 1 for TC messages: a TC far ahead moves the round, and its QC the high QC.
#[tokio::test]
async fn tc_far_ahead_moves_the_node() {
    let mut h = harness(Parameters::default());
    let high = qc(Digest::of(b"b299"), 299, &h.keys[..3]);
    let tc = TC {
        round: 500,
        high_qc: high.clone(),
        votes: h.keys[..3]
            .iter()
            .map(|k| (k.name, timeout(500, high.clone(), k).signature, 299))
            .collect(),
    };
    h.core.handle_tc(tc.clone()).await.expect("valid TC");
    assert_eq!(h.core.pacemaker.round(), 501);
    assert_eq!(*h.core.voting.high_qc(), high);
    // A replay is stale: nothing to verify.
    let mut replay = tc;
    replay.votes[0].1 = replay.votes[1].1;
    assert!(h.core.handle_tc(replay).await.is_ok());
}

/// Rejoin rule 2 (Bracha-style amplification): timeouts of a higher round from f+1 distinct
/// members (so at least one honest member is there) make the node join that round and time
/// out of it too; one member alone (maybe Byzantine) moves nothing.
#[tokio::test]
async fn f_plus_one_timeouts_of_a_higher_round_make_the_node_join_it() {
    let mut h = harness(Parameters::default());
    let (a, b) = (h.keys[1].clone(), h.keys[2].clone());
    h.core
        .handle_timeout(timeout(5, QC::genesis(), &a))
        .await
        .expect("valid");
    assert_eq!(h.core.pacemaker.round(), 1, "one member may be Byzantine");
    h.core
        .handle_timeout(timeout(5, QC::genesis(), &b))
        .await
        .expect("valid");
    // We joined round 5 and timed out of it: with the two others that is a quorum, so the
    // TC of round 5 formed and moved us to round 6.
    assert_eq!(h.core.metrics.timeouts.load(Ordering::Relaxed), 1);
    assert_eq!(h.core.pacemaker.round(), 6);
    // Having timed out of round 5, we never vote in it.
    let late = signed_block(
        qc(Digest::of(b"b4"), 4, &h.keys[..3]),
        None,
        5,
        vec![],
        h.leader(5),
    );
    assert!(!h.core.voting.rules_mut().vote(&late));
}

/// Rejoin rule 2's state is bounded: one Byzantine member timing out of every round ahead
/// moves nothing, and leaves one pending timeout, not one per round.
#[tokio::test]
async fn byzantine_timeouts_of_one_member_do_not_make_the_node_join() {
    let mut h = harness(Parameters::default());
    let byzantine = h.keys[3].clone();
    for round in 2..=100 {
        let _ = h
            .core
            .handle_timeout(timeout(round, QC::genesis(), &byzantine))
            .await;
    }
    assert_eq!(h.core.pacemaker.round(), 1);
    assert_eq!(h.core.metrics.timeouts.load(Ordering::Relaxed), 0);
    assert_eq!(h.core.pacemaker.timeout_rounds().len(), 1);
    assert_eq!(
        h.core.pacemaker.timeout_rounds().get(&byzantine.name),
        Some(&100)
    );
}

/// A node restarted on its store times out of the round it resumes in as it starts: its
/// timeout tells the others it is back (see `start_round`). A node on a new store starts its
/// first round as usual.
#[tokio::test]
async fn recovery_a_restarted_node_times_out_of_its_round_as_it_starts() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    for block in h.chain(None, 1, 5) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    let round = h.core.pacemaker.round();
    drop(h);

    let mut fresh = harness(Parameters::default());
    fresh.core.start_round().await.expect("starts");
    assert!(fresh.core.pacemaker.last_timeout().is_none());

    let mut restarted = harness_on(store, Parameters::default());
    assert_eq!(restarted.core.pacemaker.round(), round);
    restarted.core.start_round().await.expect("starts");
    let timeout = restarted.core.pacemaker.last_timeout().cloned();
    assert_eq!(timeout.map(|t| t.round), Some(round));
    assert_eq!(restarted.core.voting.last_voted_round(), round);
}

/// A member that times out of a round below ours while we are stuck in ours (we timed out of
/// it) gets our timeout, once per round of ours however often it asks; a member not behind, a
/// stranger, or a round we have not timed out of gets nothing.
#[tokio::test]
async fn recovery_a_member_behind_gets_our_timeout_once_per_round() {
    let mut h = harness(Parameters::default());
    h.core.advance_round(4).await;
    let behind = timeout(3, QC::genesis(), &h.keys[1]);
    h.core.handle_timeout(behind.clone()).await.expect("stale");
    assert!(
        h.core.pacemaker.helped().is_empty(),
        "not stuck: nothing to help with"
    );

    h.core.local_timeout_round().await.expect("timeout");
    h.core.handle_timeout(behind.clone()).await.expect("stale");
    h.core.handle_timeout(behind).await.expect("stale");
    let stranger = KeyPair::from_seed(9_999);
    h.core
        .handle_timeout(timeout(3, QC::genesis(), &stranger))
        .await
        .expect("stale");
    let helped: Vec<(PublicKey, Round)> = h.core.pacemaker.helped().clone().into_iter().collect();
    assert_eq!(helped, vec![(h.keys[1].name, 5)]);
}

/// Timeout joining moves us to a round that no certificate we hold opened: we must not keep
/// the old round's leader nor its opening. Before, `join_timeouts` left both in place: the
/// timeout of the joined round blamed the old round's leader in the metrics, and under
/// reputation `lead_once_known` could propose in the new round from the old opening. Under
/// round-robin the joined round's leader is known from the round alone; under reputation it
/// is not known until a certificate of the round before arrives.
#[tokio::test]
async fn byzantine_joining_timeouts_keeps_no_stale_opening() {
    for rule in [
        config::LeaderRule::RoundRobin,
        config::LeaderRule::Reputation,
    ] {
        let mut h = harness(Parameters {
            leader: rule,
            ..Parameters::default()
        });
        h.core
            .enter_round_opened_by(Opening::Qc(&QC::genesis().hash));
        let old_leader = h
            .core
            .pacemaker
            .round_leader()
            .expect("genesis names a leader");
        // A round whose round-robin leader is another member.
        let join = (10..)
            .find(|r| h.core.committee.leader(*r) != old_leader)
            .expect("a round");
        for member in [1, 2] {
            let timeout = timeout(join, QC::genesis(), &h.keys[member]);
            h.core.handle_timeout(timeout).await.expect("valid");
        }
        // f + 1 timeouts of `join` moved us there; our own completed the TC of `join`.
        assert_eq!(h.core.pacemaker.round(), join + 1, "{rule:?}");
        let blamed: Vec<(String, u64)> = h
            .core
            .metrics
            .snapshot()
            .timed_out_leaders
            .into_iter()
            .collect();
        let expected = match rule {
            config::LeaderRule::RoundRobin => h.core.committee.leader(join).to_string(),
            config::LeaderRule::Reputation => "?".to_string(),
        };
        assert_eq!(
            blamed,
            vec![(expected, 1)],
            "{rule:?}: whom the timeout blames"
        );
    }
}
