//! More than f nodes crash and come back with fresh state: commits must resume.
//!
//! With 2 of 4 nodes down no quorum exists, so the two survivors sit in some round R and
//! re-broadcast their timeouts for it. The restarted nodes start at round 1. Before the rejoin
//! fixes they dropped the survivors' timeouts as too far ahead (`max_rounds_ahead`) while the
//! survivors ignored their round-1 timeouts as stale, so no TC ever formed again. Now a timeout's
//! high QC moves a node forward even when the timeout itself is out of the window, and f+1
//! timeouts of a higher round make a node join that round (see `Core::handle_timeout`).
//!
//! The restarted nodes here run on fresh in-memory stores, so they have lost their safety state
//! (last voted round, high QC); their operator accepts the risk (`spawn_without_record`, the
//! node's `--risk-equivocation-without-vote-record`), so they ask the survivors what they signed
//! and sign only above the rounds the answers show (`hotstuff/src/safety/recall.rs`). `node run
//! --store` keeps that state (see `hotstuff/src/safety/state.rs`).

mod common;

use common::*;
use crypto::KeyPair;
use std::time::Duration;

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(500 + i)).collect()
}

#[test]
fn commits_resume_after_more_than_f_nodes_restart_with_fresh_state() {
    let keys = keys(4);
    let committee = committee(&keys);
    let parameters = test_parameters();
    let mut nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), parameters.clone()))
        .collect();
    // Load only the survivors: a load thread ends when its node dies.
    let _loads = Load::on_members(&committee, &keys[..2], 1_000);
    wait_until(
        "every node to commit 20 batches",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= 20),
    );
    // The bug needs the survivors further ahead than a restarted node's window.
    wait_until(
        "the committee to pass the round window",
        Duration::from_secs(60),
        || nodes[0].round() > parameters.max_rounds_ahead + 20,
    );

    nodes[2].kill();
    nodes[3].kill();

    // What was certified before the kill may still commit; after each survivor timed out twice
    // nothing can move any more (no quorum for a QC or a TC). From then on, nothing commits.
    let timeouts: Vec<u64> = nodes[..2].iter().map(|n| n.timeouts()).collect();
    wait_until(
        "the survivors to time out twice",
        Duration::from_secs(30),
        || {
            nodes[..2]
                .iter()
                .zip(&timeouts)
                .all(|(n, &t)| n.timeouts() >= t + 2)
        },
    );
    let stalled: Vec<usize> = nodes[..2].iter().map(|n| n.committed_count()).collect();
    let timeouts: Vec<u64> = nodes[..2].iter().map(|n| n.timeouts()).collect();
    wait_until(
        "the survivors to time out three more times",
        Duration::from_secs(30),
        || {
            nodes[..2]
                .iter()
                .zip(&timeouts)
                .all(|(n, &t)| n.timeouts() >= t + 3)
        },
    );
    let after: Vec<usize> = nodes[..2].iter().map(|n| n.committed_count()).collect();
    assert_eq!(after, stalled, "commits while more than f nodes were down");

    // Restart with the same keys and committee, and nothing else: fresh in-memory state.
    for i in [2, 3] {
        nodes[i] =
            TestNode::spawn_without_record(keys[i].clone(), committee.clone(), parameters.clone());
    }
    let target = stalled.iter().copied().max().unwrap_or(0) + 20;
    wait_until(
        "all four nodes to commit 20 batches past the outage",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= target),
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}
