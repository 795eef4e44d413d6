//! Our own proposals: what a block carries and when it goes out.

use super::*;

/// While the application is more than `max_unexecuted_bytes` behind, the blocks this node
/// leads carry no batches (they stay queued); once it caught up, they go in.
#[tokio::test]
async fn a_leader_whose_application_is_behind_proposes_no_batches() {
    let mut h = harness(Parameters::default());
    let ours: Vec<Round> = (1..20)
        .filter(|r| h.core.committee.leader(*r) == h.keys[0].name)
        .take(2)
        .collect();
    let batch = Digest::of(b"batch");
    h.core.proposals.buffer.push(batch);
    h.progress
        .delivered(h.core.parameters.max_unexecuted_bytes + 1);
    h.enter_round(ours[0]);
    h.core.propose(None).await.expect("propose");
    let withheld = h.core.proposals.own_blocks.pop_front().expect("a block");
    assert!(withheld.payload.is_empty());
    assert_eq!(h.core.metrics.withheld_proposals.load(Ordering::Relaxed), 1);
    // The application catches up: the queued batch goes into the next block we lead.
    h.progress
        .applied(h.core.parameters.max_unexecuted_bytes + 1);
    h.enter_round(ours[1]);
    h.core.propose(None).await.expect("propose");
    let block = h.core.proposals.own_blocks.pop_front().expect("a block");
    assert_eq!(block.payload, vec![batch]);
}

/// Under leader reputation the leader of round r + 1 is drawn from the chain ending in the
/// block of round r, and the votes for that block (small, from many members) can reach that
/// leader before the block itself does. Their QC opens the round while the leader cannot yet
/// tell it leads; once the block arrives it must propose, as the core's loop has it do after
/// every message. Before, it never did: the round timed out, on fault-free committees too.
#[tokio::test]
async fn a_reputation_leader_that_got_the_votes_before_the_block_proposes_once_it_arrives() {
    let parameters = Parameters {
        leader: config::LeaderRule::Reputation,
        ..Parameters::default()
    };
    let mut h = harness(parameters.clone());
    // The committee's chain, each block by the leader its parent elects, up to a block after
    // which this core leads.
    let mut elector = LeaderElector::new(
        config::LeaderRule::Reputation,
        &h.core.committee,
        parameters.leader_window,
    );
    let mut chain: Vec<Block> = Vec::new();
    let us = h.keys[0].name;
    loop {
        let round = chain.len() as Round + 1;
        let (parent, parent_qc) = match chain.last() {
            None => (Digest::default(), QC::genesis()),
            Some(p) => (p.digest(), qc(p.digest(), p.round, &h.keys[..3])),
        };
        let author = elector.leader(round, Opening::Qc(&parent)).expect("window");
        let author = h.keys.iter().find(|k| k.name == author).expect("member");
        let block = signed_block(parent_qc, None, round, vec![], author);
        elector.record(&block);
        let digest = block.digest();
        chain.push(block);
        if round >= 3 && elector.leader(round + 1, Opening::Qc(&digest)) == Some(us) {
            break;
        }
        assert!(round < 100, "this core is never elected");
    }
    let (last, before) = chain.split_last().expect("a chain");
    for block in before {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    // The votes for the last block arrive first: they open the round after it.
    for voter in &h.keys[1..] {
        let vote = vote(last.digest(), last.round, voter);
        h.core.handle_vote(vote).await.expect("valid");
    }
    assert_eq!(h.core.pacemaker.round(), last.round + 1);
    assert_eq!(h.core.pacemaker.round_leader(), None, "cannot tell yet");
    assert!(h.core.proposals.own_blocks.is_empty());
    h.core.proposals.buffer.push(Digest::of(b"a batch of ours"));

    h.core.handle_proposal(last.clone()).await.expect("valid");
    h.core.lead_once_known().await;
    assert_eq!(h.core.pacemaker.round_leader(), Some(us));
    let proposed = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(proposed.round, last.round + 1);
    assert_eq!(proposed.qc.hash, last.digest());
    // Once: more messages do not make it propose again.
    h.core.lead_once_known().await;
    assert!(h.core.proposals.own_blocks.is_empty());
}

/// Batch theft: a leader puts our acknowledged digests into its own block, which commits.
/// They must leave our queue, and our in-flight blocks too, or we propose them again: peers
/// refuse such a block as naming a committed batch (every round we lead times out), and once
/// they forget the commit the batch commits a second time. Before, only our own committed
/// blocks cleared our buffer.
#[tokio::test]
async fn byzantine_a_batch_committed_by_another_leader_is_not_proposed_again() {
    let mut h = harness(Parameters::default());
    let (queued, in_flight, ours) = (
        Digest::of(b"queued"),
        Digest::of(b"in flight"),
        Digest::of(b"ours alone"),
    );
    h.store_batches(&[queued, in_flight, ours]).await;
    // Our block of round `mine` carries `in_flight` and `ours`, and is never certified.
    let mine = h.first_round_led_from(2);
    h.core.proposals.buffer.push(in_flight);
    h.core.proposals.buffer.push(ours);
    h.enter_round(mine);
    h.core.propose(None).await.expect("proposes");
    let orphan = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(orphan.payload, vec![in_flight, ours]);
    h.core.proposals.buffer.push(queued);
    // Another leader's block, after a timeout of our round, steals `queued` and `in_flight`;
    // it and its two successors commit it.
    let thief_round = mine + 1;
    let thief = h.leader(thief_round).clone();
    assert_ne!(thief.name, h.keys[0].name);
    let timed_out = tc(mine, &QC::genesis(), &h.keys[..3]);
    let stolen = signed_block(
        QC::genesis(),
        Some(timed_out),
        thief_round,
        vec![queued, in_flight],
        &thief,
    );
    let mut chain = vec![stolen.clone()];
    chain.extend(h.chain(Some(&stolen), thief_round + 1, thief_round + 2));
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed(), vec![thief_round]);
    // Our next proposal carries what is still ours alone, once.
    let next = h.first_round_led_from(thief_round + 3);
    h.enter_round(next);
    h.core.propose(None).await.expect("proposes");
    let block = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(
        block.payload,
        vec![ours],
        "a committed batch proposed again"
    );
    assert!(h.core.proposals.buffer.is_empty());
}

/// Whether a block's batches are fresh (none committed before) is this node's view: another
/// honest node that had not committed the earlier block yet votes for it, and the block may be
/// certified. A certified block must then be stored and committed by every honest node, or
/// those that refused it stall behind it for good (every later block extends it). Freshness
/// may only decide a node's vote, and a batch committed again within the window is skipped at
/// delivery, by every node alike. The Twins generator found an honest node stuck so: a
/// Byzantine leader's twin proposed a batch its other twin's block had just committed.
#[tokio::test]
async fn byzantine_a_certified_block_naming_a_committed_batch_is_stored_and_committed() {
    let mut h = harness(Parameters::default());
    let (again, fresh) = (Digest::of(b"again"), Digest::of(b"fresh"));
    h.store_batches(&[again, fresh]).await;
    let first = h.block(None, 1, vec![]);
    let second = h.block(Some(&first), 2, vec![again]);
    let mut chain = vec![first, second.clone()];
    chain.extend(h.chain(Some(&second), 3, 4));
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed(), vec![1, 2], "round 2 committed `again`");
    // Round 5 names `again` once more; a quorum that had not committed round 2 yet certified
    // it, and rounds 6 and 7 extend it.
    let repeat = h.block(Some(&chain[3]), 5, vec![again, fresh]);
    h.core
        .handle_proposal(repeat.clone())
        .await
        .expect("a block a quorum may certify is taken");
    assert!(
        h.core.voting.last_vote().is_none_or(|v| v.round != 5),
        "no vote of ours for a block naming a batch we saw commit"
    );
    for block in h.chain(Some(&repeat), 6, 7) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    assert_eq!(
        h.committed(),
        vec![3, 4, 5],
        "the certified chain commits through it"
    );
}
