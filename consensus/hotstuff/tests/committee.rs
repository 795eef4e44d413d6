//! Multi-node consensus tests: real nodes on loopback ports, real TCP load.

mod common;

use common::*;
use config::LeaderRule;
use config::Parameters;
use crypto::KeyPair;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

fn keys(n: u64) -> Vec<KeyPair> {
    (0..n).map(|i| KeyPair::from_seed(100 + i)).collect()
}

#[test]
fn four_nodes_commit_the_same_sequence() {
    let keys = keys(4);
    let committee = committee(&keys);
    let nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), test_parameters()))
        .collect();
    let mut loads = Load::on_members(&committee, &keys, 2_000);
    wait_until(
        "every node to commit 40 batches",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= 40),
    );
    for load in &mut loads {
        load.stop();
    }
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
    // No batch is committed twice.
    let longest = sequences.iter().max_by_key(|s| s.len()).expect("nodes");
    let distinct: HashSet<_> = longest.iter().collect();
    assert_eq!(distinct.len(), longest.len(), "a batch was committed twice");
    // Batches from every node's mempool made it in.
    let sealed: Vec<u64> = nodes
        .iter()
        .map(|n| {
            n.mempool
                .sealed_batches
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .collect();
    assert!(sealed.iter().all(|&s| s > 0), "sealed per node: {sealed:?}");
}

#[test]
fn three_of_four_keep_committing_when_one_never_starts() {
    let keys = keys(4);
    let committee = committee(&keys);
    // The last node never boots.
    let nodes: Vec<_> = keys[..3]
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), test_parameters()))
        .collect();
    let mut loads = Load::on_members(&committee, &keys[..3], 1_000);
    wait_until(
        "three nodes to commit 20 batches",
        Duration::from_secs(90),
        || nodes.iter().all(|n| n.committed_count() >= 20),
    );
    for load in &mut loads {
        load.stop();
    }
    // No live node starves: every batch any of them sealed commits, including those of the node
    // whose turn to lead comes just before the dead node's (its votes go to the dead leader).
    let sealed = || -> usize {
        nodes
            .iter()
            .map(|n| n.mempool.sealed_batches.load(Ordering::Relaxed) as usize)
            .sum()
    };
    wait_until(
        "every sealed batch to commit",
        Duration::from_secs(60),
        || nodes.iter().all(|n| n.committed_count() >= sealed()),
    );
    assert_prefixes(&nodes.iter().map(|n| n.committed()).collect::<Vec<_>>());
    // The dead node's rounds can only end by timeout.
    assert!(nodes.iter().any(|n| n.timeouts() > 0));
}

/// Round-robin gives a member that never started every fourth round, and each of them ends in a
/// timeout. By reputation it falls out of the history once the first window of blocks passed
/// without it, and the committee stops timing out on it.
#[test]
fn reputation_stops_electing_a_member_that_never_started() {
    let keys = keys(4);
    let committee = committee(&keys);
    let parameters = Parameters {
        leader: LeaderRule::Reputation,
        ..test_parameters()
    };
    let nodes: Vec<_> = keys[..3]
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), parameters.clone()))
        .collect();
    let _loads = Load::on_members(&committee, &keys[..3], 1_000);
    // Past the first window: the dead member was never in the history.
    wait_until("the first commits", Duration::from_secs(90), || {
        nodes
            .iter()
            .all(|n| n.round() > 2 * parameters.leader_window as u64)
    });
    let round = nodes.iter().map(|n| n.round()).max().expect("nodes");
    let timeouts: Vec<u64> = nodes.iter().map(|n| n.timeouts()).collect();
    let committed = nodes[0].committed_count();
    wait_until("a hundred more rounds", Duration::from_secs(120), || {
        nodes.iter().all(|n| n.round() > round + 100)
    });
    // Round-robin would have timed out on about 25 of them. Weight 1 in 3,001 makes even one
    // unlikely; two per node would be a rule that does not skip the member.
    for (node, before) in nodes.iter().zip(&timeouts) {
        assert!(
            node.timeouts() <= before + 2,
            "timeouts went from {before} to {}",
            node.timeouts()
        );
    }
    assert!(nodes[0].committed_count() > committed);
    assert_prefixes(&nodes.iter().map(|n| n.committed()).collect::<Vec<_>>());
}

#[test]
fn commits_resume_after_the_leader_is_killed() {
    let keys = keys(4);
    let committee = committee(&keys);
    let mut nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), test_parameters()))
        .collect();
    let _loads = Load::on_members(&committee, &keys, 1_000);
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 10)
    });
    // Kill the leader of the round after next, while the committee is running.
    let round = nodes.iter().map(|n| n.round()).max().expect("nodes");
    let leader = committee.leader(round + 2);
    let victim = nodes
        .iter()
        .position(|n| n.keys.name == leader)
        .expect("leader is a node");
    wait_until(
        "the round before the victim's",
        Duration::from_secs(30),
        || nodes.iter().any(|n| n.round() > round),
    );
    nodes[victim].kill();
    let survivors: Vec<usize> = (0..4).filter(|&i| i != victim).collect();
    let before: Vec<usize> = survivors
        .iter()
        .map(|&i| nodes[i].committed_count())
        .collect();
    let timeouts_before: u64 = survivors.iter().map(|&i| nodes[i].timeouts()).sum();
    wait_until(
        "commits to resume after the kill",
        Duration::from_secs(60),
        || {
            survivors
                .iter()
                .zip(&before)
                .all(|(&i, &b)| nodes[i].committed_count() >= b + 20)
        },
    );
    let timeouts_after: u64 = survivors.iter().map(|&i| nodes[i].timeouts()).sum();
    assert!(
        timeouts_after > timeouts_before,
        "the dead leader's rounds should have timed out"
    );
    let sequences: Vec<_> = nodes.iter().map(|n| n.committed()).collect();
    assert_prefixes(&sequences);
}

/// Writes `bytes` to `address` and reports whether the node closed the connection on us.
fn send_and_expect_close(address: SocketAddr, bytes: &[u8]) -> bool {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return false;
    };
    // Peer ports wait up to the handshake timeout (5 s) for a proof of membership that bytes
    // shorter than an answer never complete; give them well over that to close on us.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(15)));
    if stream.write_all(bytes).is_err() {
        return true; // already reset
    }
    let mut buffer = [0u8; 64];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue, // an ack, then the close
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                )
            }
        }
    }
}

#[test]
fn garbage_and_oversized_frames_leave_nodes_running() {
    let keys = keys(4);
    let committee = committee(&keys);
    let parameters = test_parameters();
    let nodes: Vec<_> = keys
        .iter()
        .map(|k| TestNode::spawn(k.clone(), committee.clone(), parameters.clone()))
        .collect();
    let _loads = Load::on_members(&committee, &keys, 1_000);
    wait_until("first commits", Duration::from_secs(60), || {
        nodes.iter().all(|n| n.committed_count() >= 5)
    });

    let oversized = ((parameters.max_frame_size as u32) + 1).to_be_bytes();
    let mut garbage_frame = 64u32.to_be_bytes().to_vec();
    garbage_frame.extend_from_slice(&[0xAB; 64]);
    // Every attack on its own connection, all at once: a peer port may wait out its handshake
    // timeout (5 s) before it closes on bytes that never complete a handshake, and one after
    // the other the sixteen would take over a minute.
    let mut attacks: Vec<(SocketAddr, &str, Vec<u8>)> = Vec::new();
    for authority in committee.authorities.values() {
        // Frames that claim to be larger than the limit must close the connection.
        for port in [authority.consensus_address, authority.mempool_address] {
            attacks.push((port, "an oversized frame", oversized.to_vec()));
            attacks.push((port, "a garbage frame", garbage_frame.clone()));
        }
        // The transactions port takes opaque bytes, so only size is checked there.
        attacks.push((
            authority.transactions_address,
            "an oversized frame",
            oversized.to_vec(),
        ));
        // Raw noise must not crash anything either.
        let _ = TcpStream::connect(authority.transactions_address)
            .and_then(|mut s| s.write_all(&[0xFF; 3]));
    }
    let attacks: Vec<_> = attacks
        .into_iter()
        .map(|(port, what, bytes)| {
            let closed = std::thread::spawn(move || send_and_expect_close(port, &bytes));
            (port, what, closed)
        })
        .collect();
    for (port, what, closed) in attacks {
        assert!(closed.join().expect("attack thread"), "{port} kept {what}");
    }

    let before: Vec<usize> = nodes.iter().map(|n| n.committed_count()).collect();
    wait_until("commits after the attack", Duration::from_secs(60), || {
        nodes
            .iter()
            .zip(&before)
            .all(|(n, &b)| n.committed_count() >= b + 10)
    });
    assert_prefixes(&nodes.iter().map(|n| n.committed()).collect::<Vec<_>>());
}
