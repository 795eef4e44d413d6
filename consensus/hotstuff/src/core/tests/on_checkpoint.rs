//! State sync: which checkpoints a node adopts, and what becomes of the chain below one.

use super::*;

/// A member's report of the checkpoint after `root` (of `chain`, consecutive rounds), with
/// the proof that it committed: its child in `chain` and that child's QC.
fn report(
    keys: &[KeyPair],
    member: usize,
    chain: &[Block],
    root: usize,
    state: &'static [u8],
) -> CheckpointReply {
    let child = &chain[root + 1];
    CheckpointReply {
        author: keys[member].name,
        block: chain[root].clone(),
        proof: CommitProof {
            descendants: vec![child.clone()],
            qc: qc(child.digest(), child.round, &keys[..3]),
        },
        state: bytes::Bytes::from_static(state),
    }
}

/// State sync: a node that has nothing (a restart on an empty store) and asked for a
/// checkpoint adopts one once f+1 members report it, hands its state to the application,
/// and from then on commits the blocks after it, and only those, without any block below it.
#[tokio::test]
async fn a_checkpoint_reported_by_f_plus_one_members_becomes_the_root() {
    let mut h = harness(short_gc_window());
    // The committee's chain, rounds 1 to 60; this node saw none of it.
    let chain = h.chain(None, 1, 60);
    assert!(
        h.core.adoption.state_sync().should_request(),
        "a request goes out"
    );
    h.core
        .handle_checkpoint(report(&h.keys, 1, &chain, 49, b"state after round 50"))
        .await
        .expect("valid");
    assert!(h.rx_restore.try_recv().is_err(), "one member is not enough");
    h.core
        .handle_checkpoint(report(&h.keys, 2, &chain, 49, b"state after round 50"))
        .await
        .expect("valid");
    let restored = h.rx_restore.try_recv().expect("f+1 members agree");
    let root = chain[49].clone();
    assert_eq!(restored.round, 50);
    assert_eq!(restored.block, root.digest());
    assert_eq!(restored.state.as_ref(), b"state after round 50");
    assert_eq!(h.core.committed.last_round(), 50);

    // The blocks after the root arrive (as sync replies would bring them): those two rounds
    // behind the tip commit, nothing at or below the root does.
    for block in &chain[50..] {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed(), (51..=58).collect::<Vec<Round>>());
}

/// Members push reports of a real checkpoint, each with a valid proof, that this node never
/// asked for: however many agree, it does not adopt one (it would hand the application a
/// state in the middle of its own replay). Before, unrequested replies counted as any other.
#[tokio::test]
async fn byzantine_checkpoint_replies_nobody_asked_for_are_ignored() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 60);
    for member in 1..4 {
        let pushed = report(&h.keys, member, &chain, 49, b"pushed state");
        h.core.handle_checkpoint(pushed).await.expect("ignored");
    }
    assert!(
        h.rx_restore.try_recv().is_err(),
        "adopted unrequested reports"
    );
    assert_eq!(h.core.committed.last_round(), 0);
    assert_eq!(
        h.core.adoption.state_sync().held(),
        0,
        "unrequested reports were kept"
    );
}

/// A node that asked for a checkpoint and then caught up by replaying the chain no longer
/// looks at replies: reports pushed after it caught up, however many agree, are not adopted
/// (the application would get a state in the middle of its own replay). Before, the request
/// stayed open until some checkpoint was adopted.
#[tokio::test]
async fn byzantine_reports_pushed_after_replay_caught_up_are_ignored() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 70);
    assert!(h.core.adoption.state_sync().should_request(), "a request");
    for block in &chain[..62] {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.core.committed.last_round(), 60, "replay caught up");
    for member in 1..4 {
        let pushed = report(&h.keys, member, &chain, 64, b"pushed state");
        h.core.handle_checkpoint(pushed).await.expect("ignored");
    }
    assert!(
        h.rx_restore.try_recv().is_err(),
        "adopted reports pushed after the node caught up"
    );
    assert_eq!(h.core.committed.last_round(), 60);
    assert_eq!(h.core.adoption.state_sync().held(), 0);
}

/// Reports of a block the chain never committed (certified, but its child is two rounds
/// later), or of a block with a forged certificate, are refused however many members send
/// them: the block would become the node's root. Before, the block's structure was all that
/// was checked.
#[tokio::test]
async fn byzantine_a_checkpoint_of_an_uncommitted_block_is_not_adopted() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 60);
    // Round 50's block, then a child of round 52 certified by a QC: 50 is not committed.
    let orphan_child = h.block(Some(&chain[49]), 52, vec![]);
    let keys = h.keys.clone();
    let uncommitted = |member: usize| CheckpointReply {
        proof: CommitProof {
            descendants: vec![orphan_child.clone()],
            qc: qc(orphan_child.digest(), 52, &keys[..3]),
        },
        ..report(&keys, member, &chain, 49, b"forged state")
    };
    // A committed block whose certificate was swapped for one with too few signers (the
    // block digest does not cover the signatures).
    let forged_qc = |member: usize| {
        let mut reply = report(&keys, member, &chain, 49, b"forged state");
        reply.block.qc.votes.truncate(1);
        reply
    };
    assert!(h.core.adoption.state_sync().should_request());
    for member in 1..4 {
        assert!(h.core.handle_checkpoint(uncommitted(member)).await.is_err());
    }
    *h.core.adoption.state_sync() =
        StateSync::new(h.core.committee.clone(), Duration::from_secs(1));
    assert!(h.core.adoption.state_sync().should_request());
    for member in 1..4 {
        assert!(h.core.handle_checkpoint(forged_qc(member)).await.is_err());
    }
    assert!(
        h.rx_restore.try_recv().is_err(),
        "adopted an unproven block"
    );
    assert_eq!(h.core.committed.last_round(), 0);
}

/// A checkpoint not past what the node committed is ignored, however many report it.
#[tokio::test]
async fn a_checkpoint_behind_the_last_commit_is_ignored() {
    let (mut h, chain) = committed_chain(0).await;
    assert!(h.core.adoption.state_sync().should_request());
    for member in 1..4 {
        let reply = report(&h.keys, member, &chain, 49, b"old");
        h.core.handle_checkpoint(reply).await.expect("valid");
    }
    assert!(h.rx_restore.try_recv().is_err());
    assert_eq!(h.core.committed.last_round(), 98);
}

/// A node restarted on its store holds old blocks, but not necessarily their batches (its
/// own GC deleted them, and peers freed them too): far behind, it asks for a checkpoint
/// even when the block's parent is stored.
#[tokio::test]
async fn far_behind_asks_for_a_checkpoint_even_with_the_parent_stored() {
    let mut h = harness(short_gc_window());
    let chain = h.chain(None, 1, 61);
    for block in &chain[..60] {
        h.core
            .store
            .blocks()
            .write(block.digest(), wire::encode_block(block).expect("encode"))
            .await
            .expect("write");
    }
    assert!(
        h.core.adoption.state_sync().should_request(),
        "nothing asked yet"
    );
    *h.core.adoption.state_sync() =
        StateSync::new(h.core.committee.clone(), Duration::from_secs(60));
    h.core
        .handle_proposal(chain[60].clone())
        .await
        .expect("valid");
    assert!(
        !h.core.adoption.state_sync().should_request(),
        "a checkpoint request went out"
    );
}

/// A chain of consecutive rounds `from..=to` extending `parent` whose block of `mine` is
/// the one this node proposed (`own`, of that round).
fn chain_through(h: &Harness, own: &Block, to: Round) -> Vec<Block> {
    let mut chain = vec![own.clone()];
    chain.extend(h.chain(Some(own), own.round + 1, to));
    chain
}

/// This node proposes a block carrying a batch, is cut off while the others commit it, and
/// comes back by adopting a checkpoint above it: the batch is committed, so it must not be
/// proposed again (peers refuse it as committed for the GC window, so every round this node
/// leads times out, and once they forget it the batch commits a second time). The mempool
/// hears that the block committed (its batches no longer count against their author) and
/// the committer gets it to collect its batches. Before, `take_root` queued the batch again.
#[tokio::test]
async fn recovery_a_checkpoint_above_our_own_block_does_not_make_us_propose_it_again() {
    let mut h = harness(short_gc_window());
    let mine = h.first_round_led_from(2);
    let before = h.chain(None, 1, mine - 1);
    for block in &before {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    let batch = Digest::of(b"our batch");
    h.core.proposals.buffer.push(batch);
    // Our round, entered by the QC of the block before it.
    h.core.pacemaker.set_round(mine);
    h.core.voting.set_high_qc(qc(
        before[before.len() - 1].digest(),
        mine - 1,
        &h.keys[..3],
    ));
    h.core.propose(None).await.expect("proposes");
    let own = h.core.proposals.own_blocks.pop_front().expect("proposed");
    assert_eq!(own.payload, vec![batch]);
    // Cut off: the others commit our block and go on; the node asks for a checkpoint.
    let chain = chain_through(&h, &own, 60);
    assert!(h.core.adoption.state_sync().should_request());
    for member in [1, 2] {
        h.core
            .handle_checkpoint(report(&h.keys, member, &chain, 40, b"state"))
            .await
            .expect("valid");
    }
    assert_eq!(h.core.committed.last_round(), own.round + 40);
    assert!(
        h.core.proposals.buffer.is_empty(),
        "the committed batch is queued to be proposed again"
    );
    let (released, abandoned) = h.settled();
    assert!(
        released.is_empty(),
        "our block is not stored: not known committed"
    );
    assert_eq!(
        abandoned,
        vec![batch],
        "our batch leaves our mempool's backlog all the same, or the backlog fills for good"
    );
    let skipped = h.skipped();
    assert_eq!(
        skipped,
        vec![own.round + 40],
        "the root goes to the committer"
    );
}

/// The same with our block stored (we saw it and its successors before the cut): the blocks
/// between our last commit and the root are known committed, so their batches are released
/// from their authors' quotas and handed to the committer for collection. Before, they
/// counted against their authors for good.
#[tokio::test]
async fn recovery_blocks_below_an_adopted_checkpoint_release_their_batches() {
    let mut h = harness(short_gc_window());
    let batch = Digest::of(b"a peer's batch");
    let first = h.block(None, 1, vec![batch]);
    let mut chain = vec![first.clone()];
    chain.extend(h.chain(Some(&first), 2, 60));
    // Stored as sync would store them, without committing (no QC of their children here).
    for block in &chain[..3] {
        h.core.store_block(block).await.expect("stored");
    }
    h.core.payload.committed(&Block::genesis());
    assert!(h.core.adoption.state_sync().should_request());
    // Root at round 3: its ancestors 1 and 2 are stored.
    for member in [1, 2] {
        h.core
            .handle_checkpoint(report(&h.keys, member, &chain, 2, b"state"))
            .await
            .expect("valid");
    }
    assert_eq!(h.core.committed.last_round(), 3);
    let released = h.released();
    assert_eq!(released, vec![batch]);
    let skipped = h.skipped();
    assert_eq!(skipped, vec![1, 2, 3]);
}
