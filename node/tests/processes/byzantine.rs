//! A hostile member among real nodes (see `hostile.rs`): three `hotcrypto` node processes under
//! client load, and the fourth member's key and ports held by a stand-in that relays handshakes
//! and forges checkpoint reports.

use super::harness::*;
use super::hostile::HostileMember;
use crypto::KeyPair;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::Duration;

const ACCOUNTS: u64 = 200;
const BALANCE: u64 = 1_000_000;
const NODE: &str = "hotcrypto";

/// Two honest nodes run with the hostile member from the start; the third joins once they are
/// well past the GC window, so it can only catch up by state sync: it asks every member for a
/// checkpoint and adopts the one f+1 members report. The hostile member relays the first dials of
/// its ports to other honest nodes (each dialer must refuse: the hello names a key other than the
/// one it dialled), pushes forged reports (a block the chain has not committed, a state it never
/// produced) to members that did not ask, and answers the late node's real request with a block
/// that lacks a valid commit proof. The honest nodes must keep committing and executing, the late
/// node must adopt the honest checkpoint, and wherever two honest nodes reported the same
/// executed height they must report the same state digest (the harness audit's rule).
#[test]
fn byzantine_member_relaying_handshakes_and_forging_checkpoints_splits_no_honest_node() {
    let dir = temp_dir("byzantine-member");
    // A GC window of 6 rounds and no time (checkpoints every 3 rounds, below it): what the late
    // node would need to replay the chain from genesis is gone by the time it starts. A short
    // round timeout: until the late node is in, two leaders of four (it, and the hostile member,
    // which never proposes) time out.
    let committee = write_committee_with(
        &dir,
        4,
        json!({
            "gc_depth": 6,
            "gc_retention_ms": 0,
            "checkpoint_rounds": 3,
            "leader_window": 3,
            "timeout_delay": 300,
        }),
    );
    let genesis = committee.write_genesis(ACCOUNTS, BALANCE);
    let names: Vec<String> = committee
        .keys
        .iter()
        .map(|file| {
            let keys: KeyPair = config::read_json(file).expect("key file");
            keys.name.to_hex()
        })
        .collect();
    // Roles by the round-robin order of the keys: the two early nodes lead consecutive rounds, so
    // one certifies the other's block at once and blocks commit while the late node is away (with
    // the late node and the hostile member between them, no two certified rounds would be
    // consecutive and nothing would commit: two members out of four is more than f).
    let mut order: Vec<usize> = (0..4).collect();
    order.sort_by_key(|&i| names[i].clone());
    let [a, b, late, hostile] = [order[0], order[1], order[2], order[3]];
    let honest = [a, b, late];
    let keys: KeyPair = config::read_json(&committee.keys[hostile]).expect("key file");
    let hostile_name = keys.name.to_string();
    let members = config::Committee::load(&committee.file()).expect("committee file");
    let stand_in = HostileMember::spawn(keys, members);
    let attacks = &stand_in.attacks;

    // Every honest node logs the checkpoint reports it ignores (debug), besides the usual.
    let adoption_log = [("RUST_LOG", "info,hotstuff::core::on_checkpoint=debug")];
    let args = ["--genesis", genesis.as_str(), "--verifier-threads", "1"];
    let mut nodes = Processes(
        [a, b]
            .iter()
            .map(|&i| spawn_node(&committee, i, 1, NODE, &args, &adoption_log))
            .collect(),
    );
    let mut clients = spawn_clients_on(
        &committee,
        &[a, b],
        60,
        NODE,
        &["--rate", "300", "--genesis", &genesis],
    );
    let last = |i: usize| last_metrics(&committee.node_log(i, 1)).unwrap_or(Value::Null);
    let round = |i: usize| number(&last(i), &["consensus", "round"]);
    let executed = |i: usize| number(&last(i), &["stages", "executor", "state_executed"]);
    wait_until(
        "the early nodes to execute past round 14, two GC windows on",
        Duration::from_secs(60),
        || [a, b].iter().all(|&i| round(i) > 14 && executed(i) > 0),
    );

    // The late node's messages to the other honest nodes take 150 ms (its link emulation), those
    // to the hostile member none: the hostile member's answer to its checkpoint request comes
    // first, as from an attacker next door, and meets the commit proof check rather than a
    // request the honest replies already settled.
    let far = json!({ "delays_ms": { names[late].clone(): { names[a].clone(): 150, names[b].clone(): 150 } } });
    let emulation = dir.join("late-node-links.json");
    std::fs::write(&emulation, far.to_string()).expect("emulation file");
    let emulation = emulation.to_string_lossy().into_owned();
    let late_args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--net-emulation", emulation.as_str()])
        .collect();
    nodes.0.push(spawn_node(
        &committee,
        late,
        1,
        NODE,
        &late_args,
        &adoption_log,
    ));
    let restored_height = |line: &Value| number(line, &["stages", "executor", "restored_height"]);
    wait_until(
        "the late node to adopt a checkpoint and execute past it",
        Duration::from_secs(60),
        || {
            let line = last(late);
            number(&line, &["consensus", "checkpoints_adopted"]) > 0
                && executed(late) > restored_height(&line)
        },
    );
    wait_until(
        "every attack of the hostile member to have run",
        Duration::from_secs(60),
        || {
            let relays = attacks.relays_refused.load(Ordering::Relaxed)
                + attacks.relays_entered.load(Ordering::Relaxed);
            relays >= 6
                && attacks.unasked_reports.load(Ordering::Relaxed) >= 10
                && attacks.unproven_answers.load(Ordering::Relaxed) >= 1
                && attacks.votes.load(Ordering::Relaxed) > 0
                && attacks.record_answers.load(Ordering::Relaxed) > 0
        },
    );
    // The honest nodes go on under attack: each executes 500 more of the clients' transfers.
    let before: Vec<u64> = honest.iter().map(|&i| executed(i)).collect();
    wait_until(
        "the honest nodes to execute 500 more transactions each",
        Duration::from_secs(60),
        || {
            honest
                .iter()
                .zip(&before)
                .all(|(&i, &before)| executed(i) >= before + 500)
        },
    );

    for client in &mut clients.0 {
        assert!(terminate(client), "a client did not stop on SIGTERM");
    }
    let sent = clients_sent(&dir, &[a, b]);
    wait_until(
        &format!("every honest node to execute all {sent} transactions sent"),
        Duration::from_secs(60),
        || honest.iter().all(|&i| executed(i) == sent),
    );
    for node in &mut nodes.0 {
        assert!(terminate(node), "an honest node did not exit cleanly");
    }

    assert_eq!(
        attacks.relays_entered.load(Ordering::Relaxed),
        0,
        "a relayed handshake got the hostile member into an honest port as another member"
    );
    let lives: Vec<(String, Vec<Value>)> = honest
        .iter()
        .map(|&i| {
            (
                format!("node-{i}"),
                metrics_lines(&committee.node_log(i, 1)),
            )
        })
        .collect();
    let common = assert_digests_agree(&lives);
    let restored = lives[2].1.iter().map(restored_height).max().unwrap_or(0);
    assert!(
        common
            .iter()
            .any(|(height, who)| *height > restored && who.len() == 3),
        "the late node shared no executed height with both others past its checkpoint's \
         ({restored}): {common:?}"
    );
    for (who, lines) in &lives {
        let line = lines.last().expect("metrics");
        assert_eq!(line["final"], true, "{who} printed no final line");
        assert_eq!(
            line["stages"]["executor"]["total_supply"],
            (ACCOUNTS * BALANCE).to_string(),
            "{who}: transfers conserve the supply"
        );
        assert_eq!(
            number(line, &["stages", "executor", "restore_failures"]),
            0,
            "{who} could not restore a checkpoint"
        );
        // Only the late node was ever behind: nobody else had a reason to adopt anything.
        let adopted = number(line, &["consensus", "checkpoints_adopted"]);
        assert_eq!(
            adopted > 0,
            *who == format!("node-{late}"),
            "{who} adopted {adopted} checkpoints"
        );
    }
    let messages = |i: usize| std::fs::read_to_string(committee.node_messages(i, 1)).expect("log");
    // The early nodes got the forged reports nobody asked for, and did not even look at them:
    // none met the commit proof check. An early node may itself fall gc_depth rounds behind on
    // a loaded machine (rounds of the absent members time out) and ask; a request admits one
    // reply per member, so it examines at most one forged report per request of its own.
    let ignored = format!("from {hostile_name}) was not asked for; ignored");
    let examined = |line: &str| {
        line.contains("rejected message")
            && (line.contains("commit proof") || line.contains("certificate has stake 1,"))
    };
    for i in [a, b] {
        let messages = messages(i);
        assert!(
            messages.contains(&ignored),
            "node {i} logged no forged report it ignored"
        );
        let asked = messages
            .lines()
            .filter(|line| line.contains("asking peers for a checkpoint"))
            .count();
        let looked_at = messages.lines().filter(|line| examined(line)).count();
        assert!(
            looked_at <= asked,
            "node {i} examined {looked_at} forged reports and asked for a checkpoint {asked} times"
        );
    }
    // The hostile member's answer to the late node's request was looked at, and refused on its
    // proof (a QC of one vote, or no block at all, where the commit needs a quorum's).
    assert!(
        messages(late).lines().any(examined),
        "the late node never examined the answer without a commit proof"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
