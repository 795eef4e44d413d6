//! Garbage collection of blocks, batches and direct commits, and the rounds every peer holds.

use super::*;

/// Blocks far below the committed round are deleted, not kept forever.
#[tokio::test]
async fn blocks_below_the_gc_window_are_pruned() {
    // Rounds alone decide here; the time half of the window has its own test.
    let (mut h, chain) = committed_chain(0).await;
    let blocks = h.core.store.blocks();
    // Kept: the last committed block, `gc_depth` rounds below it, and the two uncommitted.
    let kept = blocks.len();
    assert!(kept <= 10 + 3, "{kept} blocks");
    assert!(blocks.contains(&chain[99].digest()).expect("read"));
    assert!(!blocks.contains(&chain[0].digest()).expect("read"));
    // Nor is a late block of a pruned round stored again.
    let stale = h.block(Some(&chain[9]), 11, vec![]);
    let _ = h.core.handle_proposal(stale.clone()).await;
    assert!(!blocks.contains(&stale.digest()).expect("read"));
}

/// Blocks stay as long as their batches (`GcWindow`: rounds *and* time), so a node that
/// lagged more than `gc_depth` rounds but came back within the time can still fetch both.
#[tokio::test]
async fn blocks_within_the_retention_time_are_kept() {
    let (h, chain) = committed_chain(60_000).await;
    let blocks = h.core.store.blocks();
    assert!(blocks.contains(&chain[0].digest()).expect("read"));
    assert_eq!(blocks.len(), 100);
}

/// Blocks a durable store kept across a restart are pruned like the ones stored in this life.
#[tokio::test]
async fn blocks_from_before_a_restart_are_pruned_too() {
    let store = Store::new();
    let parameters = Parameters {
        gc_retention_ms: 0,
        ..short_gc_window()
    };
    // The first life keeps every block (its retention time has not passed)...
    let mut h = harness_on(
        store.clone(),
        Parameters {
            gc_retention_ms: 60_000,
            ..parameters.clone()
        },
    );
    h.application_keeps_up();
    let chain = h.chain(None, 1, 30);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(store.blocks().len(), 30);
    drop(h);
    // ...the second one knows them without having stored them.
    let mut restarted = harness_on(store.clone(), parameters);
    restarted.application_keeps_up();
    // A restarted node replays from genesis: it commits the stored chain again, then
    // prunes below the window, old blocks included.
    let more = restarted.chain(Some(&chain[29]), 31, 60);
    for block in more {
        restarted.core.handle_proposal(block).await.expect("valid");
    }
    assert!(!store.blocks().contains(&chain[0].digest()).expect("read"));
    assert!(
        store.blocks().len() <= 10 + 3,
        "{} blocks",
        store.blocks().len()
    );
}

/// What the helper builds its proofs from: every direct commit's child QC, pruned with the
/// blocks.
#[tokio::test]
async fn direct_commits_are_recorded_and_pruned_with_the_blocks() {
    let (h, chain) = committed_chain(0).await;
    let commits = &h.core.committed.direct();
    let qc = commits.first_at_or_above(98).expect("round 98 committed");
    assert_eq!((qc.hash, qc.round), (chain[98].digest(), 99));
    assert!(commits.first_at_or_above(99).is_none());
    let floor = h.core.prune_floor();
    assert!(floor > 1);
    let oldest = commits.first_at_or_above(0).expect("some kept");
    assert_eq!(oldest.round, floor + 1);
}

/// The committer frees a batch early only for rounds every peer signed a QC of: the core
/// must report the signers of the QCs it processes, and a member that never signs (behind,
/// or down) must hold the round back.
#[tokio::test]
async fn reports_the_round_every_peer_certified() {
    let mut h = harness(Parameters::default());
    // QCs of rounds 1 to 4 signed by members 0, 1 and 2: member 3 holds nothing we know of.
    let chain = h.chain(None, 1, 5);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(*h.rx_held_by_all.borrow(), 0);
    // Members 1, 2 and 3 certify round 5.
    let parent = &chain[4];
    let qc = qc(parent.digest(), parent.round, &h.keys[1..]);
    let block = signed_block(qc, None, 6, vec![], h.leader(6));
    h.core.handle_proposal(block).await.expect("valid");
    assert_eq!(*h.rx_held_by_all.borrow(), 5);
}

/// Batches a member sent that never commit (a Byzantine member's, or ones that committed in a
/// stretch this node skipped and were resent at the heal) counted against their sender for
/// good, and stayed stored for good. The core drains them as it commits: one that has waited
/// `gc_depth` rounds of commits is deleted and no longer counts, unless a block this node
/// stored that may still commit names it. Decided by the core, which checks blocks' batches,
/// so no batch is deleted between that check and its block's commit.
#[tokio::test]
async fn byzantine_batches_that_never_commit_leave_the_quota_and_the_store() {
    let mut h = harness(short_gc_window());
    let sender = h.keys[1].name;
    let (orphan, named) = (Digest::of(b"orphan"), Digest::of(b"named"));
    for digest in [orphan, named] {
        assert_eq!(
            h.core.quota.admit(sender, digest),
            mempool::Admission::Store
        );
        h.core
            .store
            .batches()
            .write(digest, bytes::Bytes::from_static(b"batch"))
            .await
            .expect("write");
    }
    // A block of round 40 this node stored names `named`.
    let later = h.block(None, 40, vec![named]);
    h.core.payload.named(&later);
    let chain = h.chain(None, 1, 20);
    for block in &chain {
        h.core.handle_proposal(block.clone()).await.expect("valid");
    }
    assert_eq!(h.committed().last(), Some(&18));
    let held =
        |h: &Harness, digest: &Digest| h.core.store.batches().contains(digest).expect("read");
    assert!(!held(&h, &orphan), "a batch nobody names is still stored");
    assert!(
        held(&h, &named),
        "a batch a block may still commit was deleted"
    );
    // Round 40 passed without it: it waits its rounds once more, then goes.
    for block in h.chain(Some(&chain[19]), 21, 60) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    assert!(!held(&h, &named));
    // Both left their sender's count: it may send as many again.
    for i in 0..h.core.parameters.max_uncommitted_batches_per_author {
        let fresh = Digest::of(&(i as u64).to_le_bytes());
        assert_eq!(h.core.quota.admit(sender, fresh), mempool::Admission::Store);
    }
}
