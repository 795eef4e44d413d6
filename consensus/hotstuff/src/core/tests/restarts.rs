//! A core restarted on its store: it never votes or proposes twice in a round, and resumes from
//! what it stored.

use super::*;

/// A replica restarted mid-round on its store never votes twice in that round. An
/// equivocating leader's second block of round 1 gets no vote after the restart, while a
/// replica that lost its state (a fresh store) would vote for it.
#[tokio::test]
async fn a_restarted_core_never_votes_twice_in_a_round() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    let first = h.block(None, 1, vec![]);
    h.core.handle_proposal(first).await.expect("valid");
    assert_eq!(h.core.voting.last_vote().map(|v| v.round), Some(1));

    let batch = Digest::of(b"batch");
    let equivocation = h.block(None, 1, vec![batch]);
    drop(h);
    let mut restarted = harness_on(store.clone(), Parameters::default());
    store
        .batches()
        .write(batch, bytes::Bytes::from_static(b"batch"))
        .await
        .expect("write");
    assert_eq!(restarted.core.pacemaker.round(), 1);
    assert_does_not_vote_for(
        &mut restarted,
        equivocation.clone(),
        "voted twice in round 1",
    )
    .await;

    let forgetful = Store::new();
    forgetful
        .batches()
        .write(batch, bytes::Bytes::from_static(b"batch"))
        .await
        .expect("write");
    let mut fresh = harness_on(forgetful, Parameters::default());
    fresh
        .core
        .handle_proposal(equivocation)
        .await
        .expect("valid");
    assert!(fresh.core.voting.last_vote().is_some());
}

/// A replica that timed out of a round and restarts does not vote in it either, and resumes
/// with the high QC it reported (the TC safety argument counts on it).
#[tokio::test]
async fn a_restarted_core_keeps_its_timeouts_and_high_qc() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    let chain = h.chain(None, 1, 2);
    // Round 1 times out before its block arrives.
    h.core.local_timeout_round().await.expect("timeout");
    drop(h);
    let mut restarted = harness_on(store, Parameters::default());
    assert_eq!(restarted.core.pacemaker.round(), 1);
    assert_does_not_vote_for(
        &mut restarted,
        chain[0].clone(),
        "voted in a round it timed out of",
    )
    .await;

    // Round 2's block carries the QC of round 1; the replica times out of round 2.
    restarted
        .core
        .handle_proposal(chain[1].clone())
        .await
        .expect("valid");
    restarted.core.local_timeout_round().await.expect("timeout");
    let high_qc = restarted.core.voting.high_qc().clone();
    assert_eq!(high_qc.round, 1);
    let store = restarted.core.store.clone();
    drop(restarted);
    let again = harness_on(store, Parameters::default());
    assert_eq!(again.core.pacemaker.round(), 2);
    assert!(*again.core.voting.high_qc() == high_qc);
}

/// A leader restarted after proposing does not propose a second block in the round.
#[tokio::test]
async fn a_restarted_leader_does_not_propose_twice() {
    let store = Store::new();
    let mut h = harness_on(store.clone(), Parameters::default());
    // Find a round this core leads and get there.
    let own = h.first_round_led_from(1);
    if own > 1 {
        for block in h.chain(None, 1, own - 1) {
            h.core.handle_proposal(block).await.expect("valid");
        }
    }
    h.enter_round(own);
    h.core.propose(None).await.expect("proposed");
    assert_eq!(h.core.proposals.own_blocks.len(), 1);
    drop(h);
    let mut restarted = harness_on(store, Parameters::default());
    restarted.enter_round(own);
    assert_proposes_nothing(&mut restarted, own).await;
}

/// `restarted` takes `block` as valid and does not vote for it (`why` it would be wrong to).
async fn assert_does_not_vote_for(restarted: &mut Harness, block: Block, why: &str) {
    restarted.core.handle_proposal(block).await.expect("valid");
    assert!(restarted.core.voting.last_vote().is_none(), "{why}");
}

/// A restarted leader of `round`, asked to propose, proposes nothing: it did before the restart.
async fn assert_proposes_nothing(restarted: &mut Harness, round: Round) {
    restarted.core.propose(None).await.expect("no error");
    assert!(
        restarted.core.proposals.own_blocks.is_empty(),
        "proposed twice in round {round}"
    );
}

/// On a durable store every safety write is an fsync, several a round at speed: the leader's
/// round costs it one, its proposal and its own vote written together. A restart after it
/// neither proposes nor votes again in the round.
#[tokio::test]
async fn a_leaders_proposal_and_its_own_vote_are_one_safety_write() {
    let backend = store::testing::RecordingBackend::default();
    let writes = backend.writes.clone();
    let safety_writes = move || {
        let writes = writes.lock().expect("lock");
        writes.iter().filter(|(c, _)| *c == Column::Safety).count()
    };
    let store = Store::with_backend(backend);
    let mut h = harness_on(store.clone(), Parameters::default());
    let own = h.first_round_led_from(2);
    let chain = h.chain(None, 1, own - 1);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // Two more votes for the last block make its QC (with ours): the round we lead.
    let last = chain.last().expect("a block");
    for voter in &h.keys[1..3] {
        let vote = vote(last.digest(), last.round, voter);
        h.core.handle_vote(vote).await.expect("valid");
    }
    assert_eq!(
        (h.core.pacemaker.round(), h.core.voting.high_qc().round),
        (own, own - 1)
    );
    let before = safety_writes();
    h.core.propose(None).await.expect("proposed");
    let block = h.core.proposals.own_blocks.pop_front().expect("a proposal");
    h.core.process_block(&block).await.expect("own block");
    assert_eq!(h.core.voting.last_vote().map(|v| v.round), Some(own));
    assert_eq!(safety_writes() - before, 1);

    drop(h);
    let mut restarted = harness_on(store, Parameters::default());
    assert_eq!(restarted.core.pacemaker.round(), own);
    assert_proposes_nothing(&mut restarted, own).await;
    assert_does_not_vote_for(
        &mut restarted,
        block,
        &format!("voted twice in round {own}"),
    )
    .await;
}

/// Under leader reputation, a node restarted on its store tells who leads the round after its
/// high QC from the blocks it stored, as a node that saw them arrive does. Before, it knew no
/// block until new ones came: the others elected it to rounds it could not tell it led, and
/// each of them timed out.
#[tokio::test]
async fn a_restarted_core_tells_the_reputation_leader_from_its_stored_blocks() {
    let store = Store::new();
    let chain = harness_on(store.clone(), Parameters::default()).chain(None, 1, 12);
    for block in &chain {
        let bytes = wire::encode_block(block).expect("encode");
        store
            .blocks()
            .write(block.digest(), bytes)
            .await
            .expect("write");
    }
    let parameters = Parameters {
        leader: config::LeaderRule::Reputation,
        ..Parameters::default()
    };
    let restarted = harness_on(store, parameters.clone());
    let mut elector = LeaderElector::new(
        config::LeaderRule::Reputation,
        &restarted.core.committee,
        parameters.leader_window,
    );
    for block in &chain {
        elector.record(block);
    }
    let anchor = chain[11].digest();
    let leader = elector.leader(13, Opening::Qc(&anchor));
    assert!(leader.is_some(), "the whole window is there");
    assert_eq!(restarted.core.leader(13, Opening::Qc(&anchor)), leader);
}

/// A node restarted on its durable store resumes from its own last checkpoint: the whole
/// committee may have restarted, and then no peer has one to give.
#[tokio::test]
async fn a_restart_on_a_store_resumes_from_the_own_checkpoint() {
    let store = Store::new();
    let parameters = Parameters {
        gc_retention_ms: 0,
        ..short_gc_window()
    };
    let mut h = harness_on(store.clone(), parameters.clone());
    let chain = h.chain(None, 1, 40);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // The application checkpointed the state after round 35.
    let checkpoint = Checkpoint::new(
        chain[34].digest(),
        35,
        bytes::Bytes::from_static(b"state after 35"),
    );
    h.core.adoption.checkpoints().publish(checkpoint.clone());
    // Its block stays however far commits go: a restart needs it.
    let more = h.chain(Some(&chain[39]), 41, 80);
    for block in &more {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert!(store.blocks().contains(&chain[34].digest()).expect("read"));
    drop(h);

    let restarted = harness_on(store, parameters);
    let restored = restarted.rx_restore.try_recv().expect("restored at start");
    assert_eq!(*restored, checkpoint);
    assert_eq!(restarted.core.committed.last_round(), 35);
    assert_eq!(
        restarted.core.adoption.checkpoints().latest().as_deref(),
        Some(&checkpoint)
    );
}

/// A node restarted on its store hands its committer the blocks of the round window below its
/// checkpoint, not only the checkpoint's: whether a batch proposed again is delivered or
/// skipped depends on what those blocks committed (see `RecentlyCommitted::record`), and must
/// be decided as by the peers that never restarted. Before, blocks below the checkpoint were
/// pruned once the window passed them, and the restarted node delivered batches its peers
/// skipped.
#[tokio::test]
async fn recovery_a_restart_knows_what_the_round_window_below_its_checkpoint_committed() {
    let store = Store::new();
    let parameters = Parameters {
        gc_retention_ms: 0,
        ..short_gc_window()
    };
    let gc_depth = parameters.gc_depth;
    let mut h = harness_on(store.clone(), parameters.clone());
    let chain = h.chain(None, 1, 80);
    h.core.adoption.checkpoints().publish(Checkpoint::new(
        chain[34].digest(),
        35,
        bytes::Bytes::from_static(b"state after 35"),
    ));
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.core.prune_floor(), 35 - gc_depth);
    drop(h);

    let restarted = harness_on(store, parameters);
    let skipped: Vec<Round> = restarted
        .core
        .resumed_root
        .as_ref()
        .map_or(&[][..], |root| &root.skipped)
        .iter()
        .map(|block| block.round)
        .collect();
    let window: Vec<Round> = (35 - gc_depth..=35).collect();
    assert_eq!(skipped, window);
}
