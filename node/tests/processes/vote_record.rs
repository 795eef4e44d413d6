//! A node started on a store that holds no vote record (a new `--store` path) after its key
//! signed: it asks the other members, refuses to start without
//! `--risk-equivocation-without-vote-record`, and with it signs only above what they show.

use super::harness::*;
use serde_json::Value;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const NODE: &str = "hotstuff";

/// The last voted round in the vote record of the store at `path` (None: never written). The
/// record is the safety state as the core encodes it (bincode, fixed-width integers): its
/// first field is the last voted round, a little-endian u64.
fn last_voted_round(path: &Path) -> Option<u64> {
    let store = store::Store::open(path).expect("the store opens");
    let record = store
        .safety()
        .read(&crypto::Digest([0; 32]))
        .expect("the record reads")?;
    let first: [u8; 8] = record.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(first))
}

/// Waits up to `timeout` for `child` to exit; its status code, or None if it still runs.
fn exit_code(child: &mut Child, timeout: Duration) -> Option<i32> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn messages(committee: &Committee, i: usize, life: usize) -> String {
    std::fs::read_to_string(committee.node_messages(i, life)).unwrap_or_default()
}

/// `(c, f)` of a node's "none holds a signature of this key; the highest certificate shown is of
/// round c; voting only above round f" line, if it logged one.
fn fresh_floor(said: &str) -> Option<(u64, u64)> {
    let line = said
        .lines()
        .find(|line| line.contains("none holds a signature of this key"))?;
    Some((
        number_after(line, "the highest certificate shown is of round ")?,
        number_after(line, "voting only above round ")?,
    ))
}

/// Four `hotstuff` nodes start on new stores (a fresh committee: no flag, no wait beyond their
/// answers) and commit. Node 1 is killed (SIGKILL) and started on a new store path: its peers
/// hold its signatures, so it stops before signing anything, with a clear error and exit status
/// 3, its new store's record never written. Started on another new path with
/// `--risk-equivocation-without-vote-record`, it rebuilds a floor from its peers' answers at or
/// above the last round it voted in before (read from its first store), votes again only above
/// it, and the committee commits on with it: no node stops on a safety error, and each of the
/// others ends cleanly.
#[test]
fn vote_record_a_node_on_a_new_store_refuses_to_start_and_with_the_flag_votes_only_above_its_past()
{
    let dir = temp_dir("vote-record");
    let committee = write_committee(&dir, 4);
    let store = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let first = store("store-{i}");
    let mut nodes = spawn_nodes(&committee, NODE, &["--store", &first]);
    let mut clients = spawn_clients_on(
        &committee,
        &[0, 2, 3],
        60,
        NODE,
        &["--rate", "900", "--size", "200"],
    );
    let last =
        |i: usize, life: usize| last_metrics(&committee.node_log(i, life)).unwrap_or(Value::Null);
    let round = |line: &Value| number(line, &["consensus", "round"]);
    let committed = |line: &Value| number(line, &["consensus", "committed_txs"]);
    wait_until(
        "every node to pass round 20 and commit",
        Duration::from_secs(60),
        || (0..4).all(|i| round(&last(i, 1)) > 20 && committed(&last(i, 1)) > 0),
    );
    // A fresh committee: every node learnt that nobody holds a signature of its key. One that
    // asked before any certificate formed starts in round 1 (floor 0); one that started late,
    // after the others certified round c, votes only above c + 1 (it skips the round in
    // progress, as the vote record's rule says).
    for i in 0..4 {
        let said = messages(&committee, i, 1);
        let (certified, floor) = fresh_floor(&said)
            .unwrap_or_else(|| panic!("node {i} did not start as a fresh member: {said}"));
        let expected = if certified == 0 { 0 } else { certified + 1 };
        assert_eq!(floor, expected, "node {i}: {said}");
    }

    let restarted = 1;
    let killed = nodes.0[restarted]
        .kill()
        .and_then(|()| nodes.0[restarted].wait());
    assert!(killed.is_ok(), "cannot kill node 1: {killed:?}");
    let voted_before = last_voted_round(&dir.join("store-1")).expect("node 1 voted");
    assert!(voted_before > 0);

    // A new store path, no flag: it stops before it signs anything.
    let second = store("store-1-second");
    nodes.0[restarted] = spawn_node(&committee, restarted, 2, NODE, &["--store", &second], &[]);
    let code = exit_code(&mut nodes.0[restarted], Duration::from_secs(30));
    let said = messages(&committee, restarted, 2);
    assert_eq!(code, Some(3), "node 1 on a new store did not stop: {said}");
    assert!(
        said.contains("VOTE RECORD") && said.contains("holds this node's signature of round"),
        "no clear error: {said}"
    );
    let shown = number_after(&said, "signature of round ").expect("the round shown");
    assert!(shown > 0 && shown <= voted_before, "shown round {shown}");
    assert_eq!(
        last_voted_round(Path::new(&second)),
        None,
        "node 1 wrote a vote record (so it could have voted) before it stopped"
    );

    // Another new path, with the flag: it starts, above what its peers show and above its past.
    let third = store("store-1-third");
    let risk = "--risk-equivocation-without-vote-record";
    nodes.0[restarted] = spawn_node(
        &committee,
        restarted,
        3,
        NODE,
        &["--store", &third, risk],
        &[],
    );
    wait_until(
        "node 1 to rebuild its vote record from its peers",
        Duration::from_secs(30),
        || messages(&committee, restarted, 3).contains("vote record rebuilt"),
    );
    let said = messages(&committee, restarted, 3);
    let floor = number_after(&said, "only above round ").expect("the floor");
    assert!(
        floor >= voted_before,
        "node 1 may vote again at or below round {voted_before}, where it voted before: its \
         floor is {floor}"
    );
    let others_committed = |i: usize| committed(&last(i, 1));
    let before: Vec<u64> = [0, 2, 3].iter().map(|&i| others_committed(i)).collect();
    wait_until(
        "node 1 to take part ten rounds past its floor, and the others to commit on",
        Duration::from_secs(60),
        || {
            let line = last(restarted, 3);
            round(&line) > floor + 10
                && committed(&line) > 0
                && [0, 2, 3]
                    .iter()
                    .zip(&before)
                    .all(|(&i, &b)| others_committed(i) > b + 1_000)
        },
    );
    for client in &mut clients.0 {
        assert!(terminate(client), "a client did not stop on SIGTERM");
    }
    for (i, node) in nodes.0.iter_mut().enumerate() {
        // Exit status 0: a node that met a fork (`SAFETY`) exits with 3.
        assert!(terminate(node), "node {i} did not end cleanly");
    }
    let voted_after = last_voted_round(Path::new(&third)).expect("node 1 voted again");
    assert!(
        voted_after > floor,
        "node 1 did not vote above its floor ({voted_after} <= {floor})"
    );
    eprintln!(
        "node 1 voted up to round {voted_before}; a peer showed its signature of round {shown}; \
         with the flag its floor was {floor}, and it voted up to round {voted_after}"
    );
    for i in [0, 2, 3] {
        let said = messages(&committee, i, 1);
        assert!(!said.contains("SAFETY"), "node {i}: {said}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
