//! Network emulation on real nodes (loopback): every link has a latency, and one node is cut off
//! by the emulation itself (each node's links to it, its links to them) while the others commit;
//! after the heal it commits everything it missed, in the same order. And a committee whose
//! links also have a rate commits in agreement.

mod common;

use common::*;
use config::Parameters;
use crypto::{Digest, KeyPair, PublicKey};
use network::{EmulationSpec, NetEmulation};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(700 + i)).collect()
}

/// A running committee of `keys` whose links are as `spec` says, each node seeing the network
/// through its own emulation view (through which a test cuts its links), each member under a
/// client load of 1,000 tx/s.
struct EmulatedCommittee {
    _loads: Vec<Load>,
    nodes: Vec<TestNode>,
    views: Vec<Arc<NetEmulation>>,
    names: Vec<PublicKey>,
}

fn emulated_committee(
    keys: &[KeyPair],
    parameters: Parameters,
    spec: EmulationSpec,
) -> EmulatedCommittee {
    let names: Vec<_> = keys.iter().map(|k| k.name).collect();
    let committee = committee(keys);
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
    let loads = Load::on_members(&committee, keys, 1_000);
    EmulatedCommittee {
        _loads: loads,
        nodes,
        views,
        names,
    }
}

/// Every link `delay_ms` one way.
fn delay(delay_ms: u64) -> EmulationSpec {
    EmulationSpec {
        default_delay_ms: delay_ms,
        ..EmulationSpec::default()
    }
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
    let EmulatedCommittee {
        names,
        views,
        nodes,
        _loads,
    } = emulated_committee(&keys(4), parameters, delay(20));
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

/// A node is cut off right after it proposed a block with batches, while the others commit that
/// block and move far past the GC window; at the heal it adopts a checkpoint above its block.
/// Its batches committed: proposing them again would get its rounds refused as "already
/// committed" (each one it leads times out) until peers forget them, and then commit them a
/// second time. After the heal: no batch twice anywhere, and none of its rounds times out.
#[test]
fn recovery_a_node_cut_off_right_after_it_proposed_does_not_propose_its_batches_again() {
    let keys: Vec<KeyPair> = (0..4).map(|i| KeyPair::from_seed(760 + i)).collect();
    let parameters = Parameters {
        gc_depth: 10,
        gc_retention_ms: 0,
        checkpoint_rounds: 5,
        ..test_parameters()
    };
    // Every link 50 ms one way: the node's proposal has crossed 50 ms after it left, and
    // nothing of the round it opens (votes to the next leader, whose block) can reach the node
    // before 150 ms. The cut goes in between.
    let EmulatedCommittee {
        names,
        views,
        nodes,
        _loads,
    } = emulated_committee(&keys, parameters, delay(50));
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 20)
    });

    let lagging = 3;
    let proposed = || {
        nodes[lagging]
            .handle
            .metrics
            .proposed_batches
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = proposed();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while proposed() == before {
        assert!(
            std::time::Instant::now() < deadline,
            "the node proposed no block with batches"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(90));
    set_partition(&views, &names, lagging, true);
    let round = nodes[0].round();
    wait_until(
        "the others to move five GC windows on",
        Duration::from_secs(120),
        || nodes[0].round() > round + 50,
    );
    set_partition(&views, &names, lagging, false);
    wait_until(
        "the node to adopt a checkpoint",
        Duration::from_secs(60),
        || !nodes[lagging].restored().is_empty(),
    );
    let back = nodes[lagging].committed_count();
    wait_until("the node to commit again", Duration::from_secs(60), || {
        nodes[lagging].committed_count() > back + 5
    });
    let name = names[lagging].to_string();
    let timed_out = |i: usize| {
        nodes[i]
            .handle
            .metrics
            .snapshot()
            .timed_out_leaders
            .get(&name)
            .copied()
            .unwrap_or(0)
    };
    let timed_out_at_heal: Vec<u64> = (0..4).map(timed_out).collect();
    let from = nodes[0].round();
    // Past two GC windows: a batch proposed again would have committed a second time by then.
    wait_until(
        "the committee to move 30 rounds on",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.round() > from + 30),
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    for (i, sequence) in sequences.iter().enumerate() {
        assert_no_batch_twice(i, sequence);
    }
    assert_prefixes(&sequences);
    let timed_out_after: Vec<u64> = (0..4).map(timed_out).collect();
    assert_eq!(
        timed_out_after, timed_out_at_heal,
        "rounds led by the node timed out after it was back"
    );
}

/// Links of 10 ms and 4 Mbit/s each way: every frame, blocks, votes and batches, goes through
/// its link's token bucket, the load's batches (200 kB/s from each node to each peer) taking
/// about 40% of each link. The committee commits the same sequence, no batch twice.
#[test]
fn a_committee_over_links_of_limited_rate_commits_in_agreement() {
    let spec = EmulationSpec {
        bandwidth_mbit: Some(4.0),
        ..delay(10)
    };
    let EmulatedCommittee { nodes, _loads, .. } =
        emulated_committee(&keys(4), test_parameters(), spec);
    wait_until("commits", Duration::from_secs(90), || {
        nodes.iter().all(|n| n.committed_count() >= 30)
    });
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
    for (i, sequence) in sequences.iter().enumerate() {
        assert_no_batch_twice(i, sequence);
    }
}
