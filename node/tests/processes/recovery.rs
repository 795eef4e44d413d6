//! Crash and restart of a real node process on its durable store (`--store`).

use super::harness::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

const ACCOUNTS: u64 = 400;
const BALANCE: u64 = 1_000_000;
const NODE: &str = "hotcrypto";

/// The rounds and batch counts of the blocks a node's log says it committed (`committed B..`).
fn committed_blocks(messages: &str) -> Vec<(u64, u64)> {
    messages
        .lines()
        .filter_map(|line| {
            let block = line.split("committed B").nth(1)?;
            let (round, rest) = block.split_once('(')?;
            let batches = rest.strip_suffix(" batches)")?.rsplit(", ").next()?;
            Some((round.parse().ok()?, batches.parse().ok()?))
        })
        .collect()
}

/// Four nodes on `--store`; node 1's executor spins 3 ms per transaction, so it falls behind its
/// commits and its latest checkpoint (which the executor makes) trails what it committed by
/// hundreds of transactions. Node 1 is killed (SIGKILL) and started again on its store (its
/// executor no longer slowed). It must resume from its own checkpoint, replay the blocks it had
/// committed after it with their batches (read from its own store), take part in what the committee commits next, and end with the others'
/// state: wherever two nodes (or two lives of node 1) reported the same executed height, the
/// same state digest.
#[test]
fn recovery_a_lagging_executor_killed_and_restarted_on_its_store_replays_and_agrees() {
    let dir = temp_dir("recovery-lagging");
    // A checkpoint every 5 rounds, so node 1's trails its commits by its executor's lag more
    // than by the interval. A GC window of 1,000 rounds, which node 1's lag and absence stay
    // well inside: it has nothing to catch up on but its own blocks, and replays them. (Back
    // from further behind than the window, a node also asks its peers for a checkpoint and
    // adopts theirs if their replies come before its replay is done; the in-crate test
    // `recovery_a_restart_replays_the_batches_a_lagging_executor_had_not_reached` restarts the
    // whole committee for that case, so that no peer is ahead.)
    let committee = write_committee_with(
        &dir,
        4,
        json!({ "checkpoint_rounds": 5, "gc_depth": 1_000 }),
    );
    let genesis = committee.write_genesis(ACCOUNTS, BALANCE);
    let store = dir.join("store-{i}").to_string_lossy().into_owned();
    let args = [
        "--genesis",
        genesis.as_str(),
        "--verifier-threads",
        "1",
        "--store",
        store.as_str(),
    ];
    let lagging = 1;
    let lagging_args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--executor-delay-us", "3000"])
        .collect();
    let mut nodes = Processes(
        (0..4)
            .map(|i| match i {
                1 => spawn_node(&committee, i, 1, NODE, &lagging_args, &[]),
                _ => spawn_node(&committee, i, 1, NODE, &args, &[]),
            })
            .collect(),
    );
    // 600 transfers a second; node 1's executor runs about 330.
    let all = [0, 1, 2, 3];
    let mut clients = spawn_clients_on(
        &committee,
        &all,
        60,
        NODE,
        &["--rate", "150", "--genesis", &genesis],
    );
    let last =
        |i: usize, life: usize| last_metrics(&committee.node_log(i, life)).unwrap_or(Value::Null);
    let executed = |line: &Value| number(line, &["stages", "executor", "state_executed"]);
    let committed = |line: &Value| number(line, &["consensus", "committed_txs"]);
    wait_until(
        "node 1's executor to fall 400 transactions behind its commits",
        Duration::from_secs(60),
        || {
            let line = last(lagging, 1);
            executed(&line) >= 300 && committed(&line) >= executed(&line) + 400
        },
    );
    let killed = nodes.0[lagging]
        .kill()
        .and_then(|()| nodes.0[lagging].wait());
    assert!(killed.is_ok(), "cannot kill node 1: {killed:?}");
    let life_1 = metrics_lines(&committee.node_log(lagging, 1));
    let committed_before = life_1.last().map_or(0, committed);
    let messages_1 =
        std::fs::read_to_string(committee.node_messages(lagging, 1)).expect("node 1's log");
    let last_round_before = committed_blocks(&messages_1)
        .iter()
        .map(|(round, _)| *round)
        .max()
        .expect("node 1 committed blocks before the kill");
    let others_at_restart = [0, 2, 3]
        .iter()
        .map(|&i| committed(&last(i, 1)))
        .max()
        .unwrap_or(0);

    nodes.0[lagging] = spawn_node(&committee, lagging, 2, NODE, &args, &[]);
    wait_until(
        "node 1 to commit 300 transactions sent after its restart",
        Duration::from_secs(60),
        || {
            // Its second life counts from its checkpoint's height; what it executes past all
            // the others had committed when it came back was sent after that.
            executed(&last(lagging, 2)) >= others_at_restart + 300
        },
    );
    for client in &mut clients.0 {
        assert!(terminate(client), "a client did not stop on SIGTERM");
    }
    let sent = clients_sent(&dir, &all);
    let life_of = |i: usize| if i == lagging { 2 } else { 1 };
    wait_until(
        &format!("every node to execute all {sent} transactions sent"),
        Duration::from_secs(60),
        || all.iter().all(|&i| executed(&last(i, life_of(i))) == sent),
    );
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly");
    }

    // It resumed from its store: the safety state, and its own checkpoint, which the executor
    // restored.
    let messages_2 =
        std::fs::read_to_string(committee.node_messages(lagging, 2)).expect("node 1's log");
    assert!(
        messages_2.contains("resuming from the stored safety state"),
        "node 1 did not read its safety state back"
    );
    let resumed_round = number_after(&messages_2, "resuming from our own checkpoint of round ")
        .expect("node 1 did not resume from its own checkpoint");
    let restored = format!("restored the state after round {resumed_round} from a checkpoint");
    let restored_height = messages_2
        .lines()
        .find(|line| line.contains(&restored))
        .and_then(|line| number_after(line, "): "))
        .expect("node 1's executor did not restore its checkpoint");
    // The checkpoint trailed what node 1 had committed: the replay had real transactions to
    // execute, and executed them (no checkpoint was adopted from peers to skip them).
    assert!(
        committed_before >= restored_height + 300,
        "node 1's checkpoint at height {restored_height} was not behind its commits \
         ({committed_before})"
    );
    let life_2 = metrics_lines(&committee.node_log(lagging, 2));
    assert!(
        life_2
            .iter()
            .all(|line| number(line, &["consensus", "checkpoints_adopted"]) == 0),
        "node 1 adopted a peer's checkpoint instead of replaying its own blocks"
    );
    let replayed: BTreeSet<u64> = committed_blocks(&messages_2)
        .into_iter()
        .filter(|&(round, batches)| {
            round > resumed_round && round <= last_round_before && batches > 0
        })
        .map(|(round, _)| round)
        .collect();
    assert!(
        !replayed.is_empty(),
        "node 1 replayed no block with batches between its checkpoint (round {resumed_round}) \
         and its last commit before the kill (round {last_round_before})"
    );

    let mut lives: Vec<(String, Vec<Value>)> = [0, 2, 3]
        .iter()
        .map(|&i| {
            (
                format!("node-{i}"),
                metrics_lines(&committee.node_log(i, 1)),
            )
        })
        .collect();
    lives.push(("node-1".into(), life_1));
    lives.push(("node-1 (life 2)".into(), life_2));
    let common = assert_digests_agree(&lives);
    assert!(
        common.iter().any(|(height, who)| {
            *height > committed_before && who.iter().any(|w| w == "node-1 (life 2)")
        }),
        "node 1's second life shared no executed height with the others past what it had \
         committed before the kill ({committed_before}): {common:?}"
    );
    for (who, lines) in &lives {
        for line in lines {
            if let Some(supply) = line["stages"]["executor"]["total_supply"].as_str() {
                assert_eq!(supply, (ACCOUNTS * BALANCE).to_string(), "{who}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A crash of the machine loses the batch records not yet written back (they are written
/// without an fsync): here node 1 is killed and its whole batch log deleted. `node recover`
/// deletes its blocks, batches and checkpoints and keeps its safety state; started again on
/// the same path, node 1 reads its vote record back (it votes only where that record lets it)
/// and rejoins from its peers, ending with their state. Before, the advice was a new store
/// path, which discarded the vote record with the rest.
#[test]
fn recovery_a_node_recovered_after_losing_its_batches_keeps_its_vote_record_and_rejoins() {
    let dir = temp_dir("recovery-recover");
    let committee = write_committee_with(&dir, 4, json!({ "checkpoint_rounds": 5 }));
    let genesis = committee.write_genesis(ACCOUNTS, BALANCE);
    let store = dir.join("store-{i}").to_string_lossy().into_owned();
    let args = [
        "--genesis",
        genesis.as_str(),
        "--verifier-threads",
        "1",
        "--store",
        store.as_str(),
    ];
    let mut nodes = spawn_nodes(&committee, NODE, &args);
    let all = [0, 1, 2, 3];
    let mut clients = spawn_clients_on(
        &committee,
        &all,
        40,
        NODE,
        &["--rate", "150", "--genesis", &genesis],
    );
    let last =
        |i: usize, life: usize| last_metrics(&committee.node_log(i, life)).unwrap_or(Value::Null);
    let executed = |line: &Value| number(line, &["stages", "executor", "state_executed"]);
    let recovering = 1;
    wait_until(
        "node 1 to execute 300 transactions",
        Duration::from_secs(60),
        || executed(&last(recovering, 1)) >= 300,
    );
    let killed = nodes.0[recovering]
        .kill()
        .and_then(|()| nodes.0[recovering].wait());
    assert!(killed.is_ok(), "cannot kill node 1: {killed:?}");
    let life_1 = metrics_lines(&committee.node_log(recovering, 1));
    let own_store = dir.join("store-1");
    let part = |name: &str| dir.join(format!("store-1.{name}"));
    std::fs::remove_dir_all(part("batches")).expect("node 1's batch log");

    let recover = std::process::Command::new(node_bin())
        .args(["recover", "--store"])
        .arg(&own_store)
        .output()
        .expect("node recover runs");
    let said = String::from_utf8_lossy(&recover.stdout);
    assert!(recover.status.success(), "node recover failed: {recover:?}");
    assert!(
        said.contains("kept") && said.contains("store-1.safety"),
        "{said}"
    );
    assert!(part("safety").exists(), "the vote record was deleted");
    assert!(!part("blocks").exists() && !own_store.exists());

    let others_at_restart = [0, 2, 3]
        .iter()
        .map(|&i| executed(&last(i, 1)))
        .max()
        .unwrap_or(0);
    nodes.0[recovering] = spawn_node(&committee, recovering, 2, NODE, &args, &[]);
    wait_until(
        "node 1 to execute 300 transactions sent after its recovery",
        Duration::from_secs(60),
        || executed(&last(recovering, 2)) >= others_at_restart + 300,
    );
    for client in &mut clients.0 {
        assert!(terminate(client), "a client did not stop on SIGTERM");
    }
    let sent = clients_sent(&dir, &all);
    let life_of = |i: usize| if i == recovering { 2 } else { 1 };
    wait_until(
        &format!("every node to execute all {sent} transactions sent"),
        Duration::from_secs(60),
        || all.iter().all(|&i| executed(&last(i, life_of(i))) == sent),
    );
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly");
    }
    let messages_2 =
        std::fs::read_to_string(committee.node_messages(recovering, 2)).expect("node 1's log");
    let voted = number_after(&messages_2, "last voted round ")
        .expect("node 1 did not read its safety state back");
    assert!(voted > 0, "node 1's vote record was empty");

    let mut lives: Vec<(String, Vec<Value>)> = [0, 2, 3]
        .iter()
        .map(|&i| {
            (
                format!("node-{i}"),
                metrics_lines(&committee.node_log(i, 1)),
            )
        })
        .collect();
    lives.push(("node-1".into(), life_1));
    lives.push((
        "node-1 (life 2)".into(),
        metrics_lines(&committee.node_log(recovering, 2)),
    ));
    let common = assert_digests_agree(&lives);
    assert!(
        common
            .iter()
            .any(|(height, who)| *height > others_at_restart
                && who.iter().any(|w| w == "node-1 (life 2)")),
        "node 1's second life shared no executed height with the others: {common:?}"
    );

    // A store with no vote record has nothing to keep: refused.
    let without = std::process::Command::new(node_bin())
        .args(["recover", "--store"])
        .arg(dir.join("no-such-store"))
        .output()
        .expect("node recover runs");
    assert!(!without.status.success());
    assert!(String::from_utf8_lossy(&without.stderr).contains("no vote record to keep"));
    let _ = std::fs::remove_dir_all(&dir);
}
