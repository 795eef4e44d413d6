//! Network emulation on real nodes (loopback): every link has a latency, and one node is cut off
//! by the emulation itself (each node's links to it, its links to them) while the others commit;
//! after the heal it commits everything it missed, in the same order.

mod common;

use common::*;
use consensus::network::{EmulationSpec, NetEmulation};
use consensus::{Committee, Parameters};
use crypto::{Digest, KeyPair, PublicKey};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(700 + i)).collect()
}

fn transactions_address(committee: &Committee, name: &PublicKey) -> SocketAddr {
    committee
        .authority(name)
        .expect("member")
        .transactions_address
}

fn assert_no_batch_twice(node: usize, sequence: &[Digest]) {
    let mut seen = HashSet::new();
    for digest in sequence {
        assert!(seen.insert(*digest), "node {node} committed {digest} twice");
    }
}

/// Cuts (or heals) every link between `lagging` and the others, at both ends.
fn set_partition(views: &[Arc<NetEmulation>], names: &[PublicKey], lagging: usize, cut: bool) {
    for (i, view) in views.iter().enumerate() {
        for (j, name) in names.iter().enumerate() {
            if i != j && (i == lagging || j == lagging) {
                view.link_of(name).expect("link").set_cut(cut);
            }
        }
    }
}

#[test]
fn a_node_cut_off_by_the_emulation_catches_up_after_the_heal() {
    let keys = keys(4);
    let names: Vec<_> = keys.iter().map(|k| k.name).collect();
    let committee = committee(&keys);
    let parameters = Parameters {
        // Small per-peer buffers: the partition outlasts them, so part of what the node missed
        // must come through block and batch sync rather than retransmission.
        channel_capacity: 50,
        batch_size: 5_000,
        // Peers keep what the node missed however long the cut lasts on a loaded machine:
        // fetching from beyond the GC window is another feature's (snapshot catch-up).
        gc_depth: 100_000,
        gc_retention_ms: 600_000,
        ..test_parameters()
    };
    // Every link 20 ms one way: the emulation's delay queues carry the whole run.
    let spec = EmulationSpec {
        default_delay_ms: 20,
        ..EmulationSpec::default()
    };
    let views: Vec<_> = names
        .iter()
        .map(|me| Arc::new(NetEmulation::new(&spec, me, &committee)))
        .collect();
    let nodes: Vec<_> = keys
        .iter()
        .zip(&views)
        .map(|(k, view)| {
            TestNode::spawn_emulated(
                k.clone(),
                committee.clone(),
                parameters.clone(),
                Some(view.clone()),
            )
        })
        .collect();
    let _loads: Vec<_> = names
        .iter()
        .map(|name| Load::start(transactions_address(&committee, name), 1_000, 200))
        .collect();
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 5)
    });

    let lagging = 3;
    set_partition(&views, &names, lagging, true);
    let round = nodes[0].round();
    let committed_at_cut = nodes[0].committed_count();
    wait_until(
        "the others to commit well past the cut",
        Duration::from_secs(90),
        || nodes[0].round() > round + 60 && nodes[0].committed_count() > committed_at_cut + 60,
    );
    let missed = nodes[0]
        .committed_count()
        .saturating_sub(nodes[lagging].committed_count());
    set_partition(&views, &names, lagging, false);

    let target = nodes[0].committed();
    wait_until(
        "the node cut off to commit everything it missed",
        Duration::from_secs(90),
        || nodes[lagging].committed_count() >= target.len(),
    );
    assert!(
        missed > 0,
        "the partition should have made the node miss commits"
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
    assert_eq!(&sequences[lagging][..target.len()], &target[..]);
    for (i, sequence) in sequences.iter().enumerate() {
        assert_no_batch_twice(i, sequence);
    }
    // And the committee, the node included, goes on committing.
    let after = nodes[0].committed_count();
    wait_until(
        "commits to go on after the heal",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() > after + 10),
    );
}
