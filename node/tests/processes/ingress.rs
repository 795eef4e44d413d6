//! Forgeries sent to one node of four real `hotcrypto` processes: the node drops them before it
//! seals its batches, so no committed block holds one, every valid transaction commits, and the
//! node counts what it dropped.

use super::harness::*;

const ACCOUNTS: u64 = 200;
const BALANCE: u64 = 1_000_000;

#[test]
fn forgeries_sent_to_one_node_are_dropped_there_and_never_committed() {
    let dir = temp_dir("ingress-e2e");
    let committee = write_committee(&dir, 4);
    let genesis = committee.write_genesis(ACCOUNTS, BALANCE);
    let mut nodes = spawn_nodes(
        &committee,
        "hotcrypto",
        &["--genesis", &genesis, "--verifier-threads", "1"],
    );
    // One client, on node 0 only: a fifth of what it sends is forged.
    let mut clients = spawn_clients_on(
        &committee,
        &[0],
        4,
        "hotcrypto",
        &[
            "--rate",
            "1000",
            "--invalid-share",
            "0.2",
            "--genesis",
            &genesis,
        ],
    );
    wait_for_clients(&mut clients);
    let client = last_metrics(&dir.join("client-0.log")).expect("client metrics");
    let (sent, forged) = (
        number(&client, &["sent"]),
        number(&client, &["invalid_sent"]),
    );
    let valid = sent - forged;
    assert!(forged > 0 && valid > 1_000, "sent {sent}, forged {forged}");

    wait_for_executed(&dir, 4, valid, "valid transactions");
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly on SIGTERM");
    }
    for i in 0..4 {
        let last = last_metrics(&dir.join(format!("node-{i}.log"))).expect("node metrics");
        assert_eq!(last["final"], true, "node {i} printed no final line");
        // The committed blocks hold every valid transaction and nothing else, at every node.
        assert_eq!(
            number(&last, &["consensus", "committed_txs"]),
            valid,
            "node {i}: committed transactions"
        );
        assert_eq!(number(&last, &["stages", "executor", "executed"]), valid);
        assert_eq!(
            number(&last, &["stages", "verifier", "invalid"]),
            0,
            "node {i} found a forgery in a committed batch"
        );
        let by_check =
            |check: &str| number(&last, &["stages", "verifier", "batches_by_check", check]);
        let dropped = number(&last, &["consensus", "ingress_invalid_txs"]);
        if i == 0 {
            assert_eq!(dropped, forged, "node 0 counts every forgery it dropped");
            // Its own batches, sealed from checked transactions, are not checked again.
            assert!(by_check("known") > 0);
            assert_eq!(by_check("checked"), 0);
        } else {
            assert_eq!(dropped, 0, "node {i} had no client");
            // Node 0's batches are checked in full by every other node.
            assert!(by_check("checked") > 0);
            assert_eq!(by_check("known"), 0);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
