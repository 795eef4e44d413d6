//! State sync: a node that comes back after its peers deleted the start of the chain rejoins by
//! adopting a checkpoint that f+1 of them report, then commits what follows with them.
//!
//! The GC window here is 10 rounds and no time, so the blocks and batches a restarted node would
//! need to replay from genesis are gone long before it is back. Without state sync it stores no
//! block (every block needs its ancestors back to genesis) and commits nothing, for ever.

mod common;

use common::*;
use config::Parameters;
use crypto::KeyPair;
use std::time::Duration;
use store::Store;

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(700 + i)).collect()
}

fn parameters() -> Parameters {
    Parameters {
        gc_depth: 10,
        gc_retention_ms: 0,
        checkpoint_rounds: 5,
        ..test_parameters()
    }
}

#[test]
fn a_node_restarted_after_peers_pruned_the_chain_rejoins_from_a_checkpoint() {
    let keys = keys(4);
    let committee = committee(&keys);
    let parameters = parameters();
    let mut nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), parameters.clone()))
        .collect();
    // Load the survivors only: a load thread ends when its node dies.
    let _loads = Load::on_members(&committee, &keys[..3], 1_000);
    wait_until(
        "every node to commit 20 batches",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= 20),
    );

    nodes[3].kill();
    let killed_at = nodes[0].round();
    // Well past the GC window: what node 3 would need to replay is deleted everywhere.
    wait_until(
        "the survivors to move 5 GC windows on",
        Duration::from_secs(120),
        || nodes[..3].iter().all(|n| n.round() > killed_at + 50),
    );

    // Back with nothing: a fresh in-memory store, as after a crash without `--store`.
    nodes[3] =
        TestNode::spawn_without_record(keys[3].clone(), committee.clone(), parameters.clone());
    wait_until(
        "node 3 to adopt a checkpoint",
        Duration::from_secs(60),
        || !nodes[3].restored().is_empty(),
    );
    let restored = nodes[3].restored()[0];
    assert!(
        restored > killed_at,
        "adopted round {restored}, from before the crash at round {killed_at}"
    );
    // It then follows the others: it commits what they commit, 20 batches past where they were.
    let target = nodes[..3]
        .iter()
        .map(|n| n.committed_count())
        .max()
        .unwrap_or(0)
        + 20;
    wait_until(
        "node 3 to commit 20 batches past the others' count at its restore",
        Duration::from_secs(60),
        || nodes[3].committed_count() >= target,
    );
    // One sequence: node 3's list is the checkpoint's (the others' prefix) plus what it
    // committed itself.
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}

/// The same on an idle chain: after the load stops, blocks still commit (empty ones) and peers
/// still prune, so checkpoints must go on too, or the newest one is older than what peers keep
/// and a node restarted then adopts a root it cannot build on. Found by the 60 s leader-kill run:
/// once its clients had stopped, the nodes restarted last never committed again.
#[test]
fn a_node_restarted_while_the_chain_is_idle_rejoins_from_a_recent_checkpoint() {
    let keys: Vec<KeyPair> = (0..4).map(|i| KeyPair::from_seed(740 + i)).collect();
    let committee = committee(&keys);
    let parameters = parameters();
    let mut nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), parameters.clone()))
        .collect();
    let mut loads = Load::on_members(&committee, &keys[..3], 1_000);
    wait_until(
        "every node to commit 20 batches",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= 20),
    );
    for load in &mut loads {
        load.stop();
    }
    // What was sealed or still filling at the stop commits over the next rounds (a partial
    // batch seals after `max_batch_delay`, an idle round lasts about as long): only then is the
    // chain idle. (Counting from the stop itself let those batches fail the check below.)
    let stopped_at = nodes[0].round();
    wait_until(
        "the batches in flight at the stop to commit",
        Duration::from_secs(60),
        || nodes[0].round() > stopped_at + 10,
    );
    nodes[3].kill();
    let killed_at = nodes[0].round();
    let idle_from = nodes[0].committed_count();
    wait_until(
        "the idle survivors to move 5 GC windows on",
        Duration::from_secs(120),
        || nodes[..3].iter().all(|n| n.round() > killed_at + 50),
    );
    assert!(
        nodes[0].committed_count() <= idle_from + 3,
        "the chain was not idle: batches still came in"
    );

    nodes[3] =
        TestNode::spawn_without_record(keys[3].clone(), committee.clone(), parameters.clone());
    wait_until(
        "node 3 to adopt a checkpoint",
        Duration::from_secs(60),
        || !nodes[3].restored().is_empty(),
    );
    let restored = nodes[3].restored()[0];
    assert!(
        restored > killed_at + 40,
        "adopted round {restored}, from before the idle stretch (crash at round {killed_at})"
    );
    let _loads = Load::on_members(&committee, &keys, 1_000);
    let target = nodes[..3]
        .iter()
        .map(|n| n.committed_count())
        .max()
        .unwrap_or(0)
        + 20;
    wait_until(
        "node 3 to commit 20 batches with the others",
        Duration::from_secs(60),
        || nodes[3].committed_count() >= target,
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}

/// A node that is only briefly away (well within the GC window) replays the blocks it missed,
/// as before: it asks for no checkpoint.
#[test]
fn a_node_back_within_the_gc_window_replays_instead() {
    let keys = keys(4);
    let committee = committee(&keys);
    let parameters = Parameters {
        gc_depth: 1_000,
        checkpoint_rounds: 5,
        ..test_parameters()
    };
    let mut nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), parameters.clone()))
        .collect();
    let _loads = Load::on_members(&committee, &keys[..3], 1_000);
    wait_until(
        "every node to commit 20 batches",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= 20),
    );
    nodes[3].kill();
    let killed_at = nodes[0].round();
    wait_until(
        "the survivors to move 20 rounds on",
        Duration::from_secs(60),
        || nodes[..3].iter().all(|n| n.round() > killed_at + 20),
    );
    nodes[3] =
        TestNode::spawn_without_record(keys[3].clone(), committee.clone(), parameters.clone());
    let target = nodes[0].committed_count() + 20;
    wait_until(
        "node 3 to replay the chain and commit with the others",
        Duration::from_secs(60),
        || nodes[3].committed_count() >= target,
    );
    assert!(nodes[3].restored().is_empty(), "a checkpoint was adopted");
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}

/// The whole committee crashes and comes back on its stores (`--store`). Peers have deleted
/// the start of the chain everywhere, so nobody could replay it from genesis, and nobody has
/// a checkpoint to give but itself: each node resumes from its own last checkpoint, kept in
/// its store, and the committee commits on.
#[test]
fn the_whole_committee_restarts_on_its_stores_and_resumes_from_its_own_checkpoints() {
    let keys: Vec<KeyPair> = (0..4).map(|i| KeyPair::from_seed(720 + i)).collect();
    let committee = committee(&keys);
    let parameters = parameters();
    let stores: Vec<Store> = keys.iter().map(|_| Store::new()).collect();
    let spawn = |i: usize| {
        TestNode::spawn_on(
            keys[i].clone(),
            committee.clone(),
            parameters.clone(),
            None,
            stores[i].clone(),
        )
    };
    let mut nodes: Vec<TestNode> = (0..4).map(spawn).collect();
    let mut running = Load::on_members(&committee, &keys, 1_000);
    wait_until(
        "every node to commit well past the GC window",
        Duration::from_secs(60),
        || {
            nodes
                .iter()
                .all(|n| n.committed_count() >= 40 && n.round() > 60)
        },
    );
    for load in &mut running {
        load.stop();
    }
    for node in &mut nodes {
        node.kill();
    }
    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    for k in &keys {
        wait_ports_free(&committee, &k.name);
    }
    nodes = (0..4).map(spawn).collect();
    let _running = Load::on_members(&committee, &keys, 1_000);
    wait_until(
        "every node to resume from its own checkpoint",
        Duration::from_secs(30),
        || nodes.iter().all(|n| !n.restored().is_empty()),
    );
    let target = before.iter().copied().max().unwrap_or(0) + 20;
    wait_until(
        "the committee to commit 20 batches past the crash",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= target),
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}

/// The whole committee crashes and comes back on its stores while node 3's application lags
/// its commits by far more than the GC window (an executor that is the bottleneck): node 3
/// resumes from its own last checkpoint, well behind, and replays the blocks after it from its
/// store. Their batches must still be there: before, batch collection ignored the checkpoint,
/// the replay found them deleted and skipped them ("was collected; skipped"), and node 3's state
/// silently left the others'.
#[test]
fn recovery_a_restart_replays_the_batches_a_lagging_executor_had_not_reached() {
    let keys: Vec<KeyPair> = (0..4).map(|i| KeyPair::from_seed(780 + i)).collect();
    let committee = committee(&keys);
    let parameters = Parameters {
        // The lagging node's back-pressure would otherwise only stop its own proposals: the
        // others still commit at full speed, and its executor falls behind all the same.
        max_unexecuted_bytes: u64::MAX,
        ..parameters()
    };
    let stores: Vec<Store> = keys.iter().map(|_| Store::new()).collect();
    let spawn = |i: usize, delay: Duration| {
        TestNode::spawn_lagging(
            keys[i].clone(),
            committee.clone(),
            parameters.clone(),
            stores[i].clone(),
            delay,
        )
    };
    let lagging = 3;
    let mut nodes: Vec<TestNode> = (0..4)
        .map(|i| spawn(i, Duration::from_millis(if i == lagging { 40 } else { 0 })))
        .collect();
    let mut running = Load::on_members(&committee, &keys, 1_000);
    let delivered = |node: &TestNode| {
        node.handle
            .metrics
            .committed_batches
            .load(std::sync::atomic::Ordering::Relaxed) as usize
    };
    // Its executor 100 batches behind what it committed: tens of rounds, past the GC window of
    // 10 rounds (its committer holds at most 1,000 batches, so its consensus keeps up).
    wait_until(
        "node 3's executor to fall 100 batches behind its commits",
        Duration::from_secs(60),
        || {
            let node = &nodes[lagging];
            node.committed_count() >= 10 && delivered(node) > node.committed_count() + 100
        },
    );
    for load in &mut running {
        load.stop();
    }
    let killed_at = nodes[lagging].round();
    for node in &mut nodes {
        node.kill();
    }
    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    for k in &keys {
        wait_ports_free(&committee, &k.name);
    }
    nodes = (0..4).map(|i| spawn(i, Duration::ZERO)).collect();
    let _running = Load::on_members(&committee, &keys, 1_000);
    wait_until(
        "node 3 to resume from its own checkpoint",
        Duration::from_secs(30),
        || !nodes[lagging].restored().is_empty(),
    );
    let resumed = nodes[lagging].restored()[0];
    assert!(
        resumed + parameters.gc_depth < killed_at,
        "resumed at round {resumed}, within the GC window of round {killed_at}: nothing to replay"
    );
    let target = before.iter().copied().max().unwrap_or(0) + 20;
    wait_until(
        "the committee to commit 20 batches past the crash",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= target),
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}
