//! End-to-end tests with real processes: `node` replicas and `client` load generators on
//! loopback ports, judged by the METRICS lines they print.

mod byzantine;
mod harness;
mod hostile;
mod ingress;
mod recovery;
mod vote_record;

use harness::*;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn hotstuff_mode_with_real_processes() {
    let dir = temp_dir("hotstuff-e2e");
    let committee = write_committee(&dir, 4);
    let profiles = dir.join("profile-{i}").to_string_lossy().into_owned();
    let mut nodes = spawn_nodes(&committee, "hotstuff", &["--profile", &profiles]);
    let mut clients = spawn_clients(&committee, "hotstuff", &["--rate", "2000", "--size", "200"]);
    wait_for_clients(&mut clients);
    // Let the last batches commit, then stop the nodes as the harness does.
    std::thread::sleep(Duration::from_millis(1500));
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly on SIGTERM");
    }

    let mut sent_samples = HashMap::new();
    let mut sent = 0;
    for i in 0..4 {
        let lines = metrics_lines(&dir.join(format!("client-{i}.log")));
        let last = lines.last().expect("client metrics");
        assert_eq!(last["final"], true);
        sent += last["sent"].as_u64().expect("sent");
        // Present, but possibly 0: the kernel charges CPU time in 10 ms ticks, and a client
        // sending 2,000 small transactions a second for 4 s may use less than one.
        assert!(last["process"]["cpu_ms"].as_f64() >= Some(0.0), "{last}");
        assert!(last["process"]["rss_bytes"].as_f64() > Some(0.0), "{last}");
        assert!(last["process"]["cores"].as_f64() >= Some(1.0), "{last}");
        for line in &lines {
            for s in line["samples"].as_array().expect("samples") {
                sent_samples.insert(
                    s["id"].as_str().expect("id").to_string(),
                    s["t_ms"].as_u64(),
                );
            }
        }
    }
    assert!(sent >= 4 * 2000 * 3, "clients sent only {sent}");

    let mut committed = Vec::new();
    let mut latencies = Vec::new();
    for i in 0..4 {
        let lines = metrics_lines(&dir.join(format!("node-{i}.log")));
        let last = lines.last().expect("node metrics");
        assert_eq!(last["final"], true, "node {i} printed no final line");
        committed.push(last["consensus"]["committed_txs"].as_u64().expect("txs"));
        for line in &lines {
            for s in line["samples"].as_array().expect("samples") {
                let id = s["id"].as_str().expect("id");
                if let Some(Some(t_sent)) = sent_samples.get(id) {
                    latencies.push(s["t_ms"].as_u64().expect("t") as i64 - *t_sent as i64);
                }
            }
        }
    }
    // Every node committed (nearly) everything the clients sent; the same batches everywhere.
    for (i, c) in committed.iter().enumerate() {
        assert!(*c * 100 >= sent * 95, "node {i} committed {c} of {sent}");
        assert!(*c <= sent, "node {i} committed {c} > sent {sent}");
    }
    assert!(!latencies.is_empty(), "no sample was seen committed");
    assert!(
        latencies.iter().all(|&l| l >= 0),
        "negative latency: {latencies:?}"
    );
    for i in 0..4 {
        let lines = metrics_lines(&dir.join(format!("node-{i}.log")));
        check_resources(&lines, &[], &format!("node {i}"));
        check_hops(&lines, &["receive", "seal", "quorum", "commit"], i);
        check_profile(&dir.join(format!("profile-{i}")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CPU of each stage and of the runtime, and the process section, are there and sensible.
fn check_resources(lines: &[Value], stages: &[&str], who: &str) {
    let (first, last) = (&lines[0], &lines[lines.len() - 1]);
    let number = |line: &Value, path: &[&str]| {
        path.iter()
            .fold(line, |v, key| &v[*key])
            .as_f64()
            .unwrap_or_else(|| panic!("{who}: no {} in {line}", path.join(".")))
    };
    for stage in stages {
        let cpu = number(last, &["stages", stage, "cpu_ms"]);
        assert!(cpu > 0.0, "{who}: {stage} used no CPU");
    }
    let runtime = number(last, &["consensus", "cpu_ms"]);
    let process = number(last, &["process", "cpu_ms"]);
    assert!(runtime > 0.0, "{who}: the runtime used no CPU");
    assert!(
        process >= runtime,
        "{who}: process {process} < runtime {runtime}"
    );
    assert!(
        process > number(first, &["process", "cpu_ms"]),
        "{who}: process CPU did not grow"
    );
    let elapsed_ms = number(last, &["time_ms"]) - number(first, &["time_ms"]) + 2_000.0;
    let cores = number(last, &["process", "cores"]);
    assert!(cores >= 1.0, "{who}");
    assert!(
        process <= cores * elapsed_ms + 5_000.0,
        "{who}: {process} ms of CPU in {elapsed_ms} ms on {cores} cores"
    );
    let rss = number(last, &["process", "rss_bytes"]);
    assert!(rss > 1e6 && rss < 1e10, "{who}: rss {rss}");
}

/// The node a client sent to reports the hops of its samples, in order; `events` is the path
/// the mode has.
fn check_hops(lines: &[Value], events: &[&str], node: usize) {
    // Earliest time of each event per sample (a forged copy of a sample is a second transaction
    // with the same id; the earliest times stay in order all the same).
    let mut hops: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for line in lines {
        for s in line["samples"].as_array().expect("samples") {
            let id = s["id"].as_str().expect("id").to_string();
            let event = s["event"].as_str().expect("event").to_string();
            let t = s["t_ms"].as_u64().expect("t_ms");
            let slot = hops.entry(id).or_default().entry(event).or_insert(t);
            *slot = (*slot).min(t);
        }
    }
    let received: Vec<_> = hops
        .values()
        .filter(|h| h.contains_key("receive"))
        .collect();
    assert!(!received.is_empty(), "node {node} received no sample");
    let mut complete = 0;
    for hop in received {
        if !events.iter().all(|e| hop.contains_key(*e)) {
            // Sent at the very end: stopped before it went all the way.
            continue;
        }
        complete += 1;
        let times: Vec<u64> = events.iter().map(|e| hop[*e]).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "node {node}: hops out of order: {events:?} at {times:?}"
        );
    }
    assert!(
        complete > 0,
        "node {node}: no sample went through {events:?}"
    );
}

/// `--profile` wrote a flame graph and folded stacks with lines of `stack count`.
fn check_profile(dir: &Path) {
    let svg = std::fs::read_to_string(dir.join("flamegraph.svg")).expect("flamegraph.svg");
    assert!(svg.contains("<svg"), "not an SVG");
    let folded = std::fs::read_to_string(dir.join("profile.folded")).expect("profile.folded");
    let lines: Vec<&str> = folded.lines().collect();
    assert!(!lines.is_empty(), "no stacks in {}", dir.display());
    for line in &lines {
        let (stack, count) = line.rsplit_once(' ').expect("stack and count");
        assert!(!stack.is_empty(), "{line}");
        assert!(count.parse::<u64>().is_ok_and(|c| c > 0), "{line}");
    }
}

#[test]
fn movevm_profile_and_resources() {
    let dir = temp_dir("movevm-profile");
    let profile = dir.join("profile");
    let output = Command::new(client_bin())
        .args(["--mode", "movevm", "--duration", "2", "--accounts", "100"])
        .arg("--profile")
        .arg(&profile)
        .stderr(Stdio::null())
        .output()
        .expect("client runs");
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("METRICS "))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let last = lines.last().expect("metrics");
    assert_eq!(last["final"], true);
    for stage in ["generator", "decoder", "executor"] {
        let cpu = last["stages"][stage]["cpu_ms"].as_f64().unwrap_or(0.0);
        assert!(cpu > 0.0, "{stage} used no CPU: {last}");
    }
    assert!(last["process"]["cpu_ms"].as_f64() > Some(0.0), "{last}");
    assert!(last["process"]["rss_bytes"].as_f64() > Some(0.0), "{last}");
    assert!(last.get("consensus").is_none(), "{last}");
    check_profile(&profile);
    let folded = std::fs::read_to_string(profile.join("profile.folded")).expect("folded");
    // Symbols survive a release build: frames have names (crate paths), not addresses.
    assert!(folded.contains("executor::"), "no named executor frame");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET /metrics` over a plain TCP connection; returns the body.
fn scrape(address: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("connect to /metrics");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n")
        .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    body.to_string()
}

/// 4 nodes in `mode` checking signatures as `verify` says, 4 clients sending valid transfers
/// plus a share of forged signatures.
fn crypto_mode_run(mode: &str, executor_delay_us: u64, verify: &str) {
    const ACCOUNTS: u64 = 400;
    const BALANCE: u64 = 1_000_000;
    let dir = temp_dir(&format!("{mode}-{verify}-e2e"));
    let committee = write_committee(&dir, 4);
    let genesis = committee.write_genesis(ACCOUNTS, BALANCE);
    let delay = executor_delay_us.to_string();
    let mut nodes = spawn_nodes(
        &committee,
        mode,
        &[
            "--genesis",
            &genesis,
            "--verifier-threads",
            "1",
            "--executor-delay-us",
            &delay,
            "--verify",
            verify,
        ],
    );
    let mut clients = spawn_clients(
        &committee,
        mode,
        &[
            "--rate",
            "500",
            "--invalid-share",
            "0.1",
            "--genesis",
            &genesis,
        ],
    );
    wait_for_clients(&mut clients);

    let (mut sent, mut invalid_sent) = (0, 0);
    for i in 0..4 {
        let last = last_metrics(&dir.join(format!("client-{i}.log"))).expect("client metrics");
        sent += last["sent"].as_u64().expect("sent");
        invalid_sent += last["invalid_sent"].as_u64().expect("invalid_sent");
    }
    let valid = sent - invalid_sent;
    assert!(
        invalid_sent > 0 && valid > 4 * 500 * 3,
        "sent {sent}, invalid {invalid_sent}"
    );

    // Wait until every node has executed every valid transaction (and published its state).
    wait_for_executed(&dir, 4, valid, "valid transactions");
    // The Prometheus endpoint of a running node shows what it executed.
    let scraped = scrape(&committee.prometheus[0]);
    assert!(
        scraped.contains(&format!(
            "hotmove_stage_executed_total{{stage=\"executor\"}} {valid}\n"
        )),
        "{scraped}"
    );
    assert!(
        scraped.contains("hotmove_channel_sent_total{channel=\"verifier->executor\"}"),
        "{scraped}"
    );
    assert!(
        scraped.contains("hotmove_consensus_committed_txs_total"),
        "{scraped}"
    );
    for family in [
        "hotmove_stage_cpu_ms_total{stage=\"verifier\"}",
        "hotmove_stage_cpu_ms_total{stage=\"executor\"}",
        "hotmove_consensus_cpu_ms_total",
        "hotmove_process_cpu_ms_total",
        "hotmove_process_rss_bytes",
        "hotmove_process_cores",
    ] {
        assert!(scraped.contains(family), "no {family} in {scraped}");
    }
    assert!(scraped.ends_with("# EOF\n"), "{scraped}");
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly on SIGTERM");
    }

    let mut digests = Vec::new();
    let mut executed_samples = 0;
    let (mut sealed, mut attested, mut checked_here, mut taken_attested) = (0, 0, 0, 0);
    let (mut committed, mut unattested, mut dropped) = (0, 0, 0);
    for i in 0..4 {
        let lines = metrics_lines(&dir.join(format!("node-{i}.log")));
        let last = lines.last().expect("node metrics");
        sealed += number(last, &["consensus", "sealed_batches"]);
        attested += number(last, &["consensus", "attested_batches"]);
        committed = number(last, &["consensus", "committed_batches"]);
        unattested += number(last, &["consensus", "released_unattested"]);
        if verify == "attested" {
            let by_check = &last["stages"]["verifier"]["batches_by_check"];
            checked_here += by_check["checked"].as_f64().expect("checked") as u64;
            taken_attested += by_check["known"].as_f64().expect("known") as u64;
        }
        assert_eq!(last["final"], true);
        let executor = &last["stages"]["executor"];
        let verifier = &last["stages"]["verifier"];
        assert_eq!(
            executor["executed"], valid,
            "node {i}: every valid transfer executes"
        );
        assert_eq!(executor["failed"], 0, "node {i}");
        assert_eq!(executor["dropped"], 0, "node {i}: no nonce gap, no replay");
        // Each node's ingress check dropped its clients' forgeries: no batch holds one.
        assert_eq!(verifier["invalid"], 0, "node {i}: a forgery was committed");
        dropped += number(last, &["consensus", "ingress_invalid_txs"]);
        assert_eq!(
            executor["total_supply"],
            (ACCOUNTS * BALANCE).to_string(),
            "node {i}: transfers conserve the supply"
        );
        digests.push(
            executor["state_digest"]
                .as_str()
                .expect("digest")
                .to_string(),
        );
        check_resources(&lines, &["verifier", "executor"], &format!("node {i}"));
        check_hops(
            &lines,
            &["receive", "seal", "quorum", "commit", "verify", "execute"],
            i,
        );
        // The delay is spun on the executor's thread: its CPU shows it.
        let executor_cpu = executor["cpu_ms"].as_f64().expect("cpu_ms");
        let spun = valid as f64 * executor_delay_us as f64 / 1000.0;
        assert!(
            executor_cpu >= 0.8 * spun,
            "node {i}: executor used {executor_cpu} ms, spun at least {spun} ms"
        );
        executed_samples += lines
            .iter()
            .flat_map(|l| l["samples"].as_array().cloned().unwrap_or_default())
            .filter(|s| s["event"] == "execute")
            .count();
    }
    assert!(
        digests.iter().all(|d| *d == digests[0]),
        "state digests differ: {digests:?}"
    );
    assert_eq!(
        dropped, invalid_sent,
        "every forged signature is counted where it was dropped, and only those"
    );
    assert!(
        executed_samples > 0,
        "no sample transaction reported as executed"
    );
    if verify == "attested" {
        // Every batch is attested by its author and one other member (f = 1), each once; every
        // honest statement agrees, so an author hands consensus a batch without f+1 of them
        // only when a statement came later than its wait (a few times the committee's statement
        // delay, which a burst of load on a shared machine can exceed): a few at most.
        assert!(
            unattested * 10 <= sealed,
            "{unattested} of {sealed} batches released without their statements"
        );
        assert!(
            2 * committed <= attested && attested <= 2 * sealed,
            "sealed {sealed}, committed {committed}, attested {attested}"
        );
        // A committed batch finds its certificate (or the node's own finding): a node checks a
        // batch again only where a statement was still on its way at the commit.
        assert!(
            checked_here * 10 <= taken_attested,
            "{checked_here} batches checked again, {taken_attested} taken on statements"
        );
    } else {
        assert_eq!(attested, 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hotcrypto_nodes_agree_on_state_and_drop_forgeries() {
    // 50 µs × ~8,000 transfers: 0.4 s of executor CPU per node, a fraction of the machine.
    crypto_mode_run("hotcrypto", 50, "all");
}

/// The same under `--verify=attested`: each batch's signatures are checked by two members, and
/// every node drops exactly the forged transactions all the same.
#[test]
fn hotcrypto_attested_nodes_agree_on_state_and_drop_forgeries() {
    crypto_mode_run("hotcrypto", 50, "attested");
}

#[test]
fn hotmove_nodes_agree_on_state_and_drop_forgeries() {
    crypto_mode_run("hotmove", 0, "all");
}

/// 4 `hotmove` nodes running `workload` under `vm`, 4 clients sending its calls as `payload`:
/// every node executes every transaction (SmallBank's may fail for want of funds, and only for
/// that), ends with the same state digest, and keeps the supply (coins, bank holdings and fees).
fn workload_run(workload: &str, vm: &str, payload: &str) {
    const ACCOUNTS: u64 = 200;
    const BALANCE: u64 = 1_000_000_000;
    let dir = temp_dir(&format!("{workload}-{vm}-{payload}-e2e"));
    let committee = write_committee(&dir, 4);
    let genesis = committee.write_genesis(ACCOUNTS, BALANCE);
    let mut nodes = spawn_nodes(
        &committee,
        "hotmove",
        &[
            "--genesis",
            &genesis,
            "--verifier-threads",
            "1",
            "--vm",
            vm,
            "--workload",
            workload,
        ],
    );
    let mut clients = spawn_clients(
        &committee,
        "hotmove",
        &[
            "--rate",
            "200",
            "--genesis",
            &genesis,
            "--workload",
            workload,
            "--payload",
            payload,
        ],
    );
    wait_for_clients(&mut clients);
    let sent: u64 = (0..4)
        .map(|i| {
            let last = last_metrics(&dir.join(format!("client-{i}.log"))).expect("client metrics");
            last["sent"].as_u64().expect("sent")
        })
        .sum();
    assert!(sent >= 4 * 200 * 3, "sent {sent}");
    wait_for_executed(&dir, 4, sent, workload);
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly on SIGTERM");
    }
    let mut digests = Vec::new();
    for i in 0..4 {
        let last = last_metrics(&dir.join(format!("node-{i}.log"))).expect("node metrics");
        assert_eq!(last["final"], true);
        let executor = &last["stages"]["executor"];
        let (executed, failed) = (
            executor["executed"].as_u64().expect("executed"),
            executor["failed"].as_u64().expect("failed"),
        );
        assert_eq!(executed + failed, sent, "node {i}: {executor}");
        assert_eq!(executor["dropped"], 0, "node {i}: {executor}");
        let short = executor["failed_by_reason"]["insufficient_funds"]
            .as_u64()
            .unwrap_or(0);
        match workload {
            "smallbank" => assert!(failed == short && executed > failed, "node {i}: {executor}"),
            _ => assert_eq!(failed, 0, "node {i}: {executor}"),
        }
        assert_eq!(
            executor["total_supply"],
            (ACCOUNTS * BALANCE).to_string(),
            "node {i}: the workload conserves the money"
        );
        let bank: u128 = executor["bank_holdings"]
            .as_str()
            .and_then(|b| b.parse().ok())
            .expect("bank_holdings");
        assert_eq!(bank > 0, workload == "smallbank", "node {i}: {executor}");
        let fees: u64 = executor["fees_collected"]
            .as_str()
            .and_then(|f| f.parse().ok())
            .expect("fees_collected");
        assert_eq!(fees > 0, vm == "adapter", "node {i}: {executor}");
        digests.push(
            executor["state_digest"]
                .as_str()
                .expect("digest")
                .to_string(),
        );
    }
    assert!(
        digests.iter().all(|d| *d == digests[0]),
        "{workload}: state digests differ: {digests:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hotmove_donothing_nodes_agree() {
    workload_run("donothing", "adapter", "script");
}

#[test]
fn hotmove_cpuheavy_nodes_agree() {
    workload_run("cpuheavy", "bare", "entry");
}

#[test]
fn hotmove_kvstore_nodes_agree() {
    workload_run("kvstore", "adapter", "entry");
}

#[test]
fn hotmove_smallbank_nodes_agree() {
    workload_run("smallbank", "adapter", "script");
}

#[test]
fn bad_files_give_one_clear_error_and_a_nonzero_exit() {
    let dir = temp_dir("bad-files");
    let committee = write_committee(&dir, 1);
    let run = |keys: &Path, parameters: &Path| {
        Command::new(node_bin())
            .arg("run")
            .arg("--keys")
            .arg(keys)
            .arg("--committee")
            .arg(dir.join("committee.json"))
            .arg("--parameters")
            .arg(parameters)
            .args(["--mode", "hotstuff"])
            .output()
            .expect("node runs")
    };
    let missing = run(&dir.join("nope.json"), &dir.join("parameters.json"));
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("nope.json"), "{stderr}");

    let bad_params = dir.join("bad-parameters.json");
    std::fs::write(&bad_params, r#"{"batch_size": "big"}"#).expect("write");
    let output = run(&committee.keys[0], &bad_params);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad-parameters.json"), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--no-instrumentation` (to measure what instrumentation costs): no CPU per stage or for the
/// runtime and no hop of a sample, while the `execute` events that end the end-to-end latency
/// and the process's own CPU stay.
#[test]
fn no_instrumentation_leaves_out_stage_cpu_and_hops() {
    let dir = temp_dir("no-instrumentation");
    let committee = write_committee(&dir, 4);
    let genesis = committee.write_genesis(400, 1_000_000_000);
    let mut nodes = spawn_nodes(
        &committee,
        "hotcrypto",
        &["--genesis", &genesis, "--no-instrumentation"],
    );
    let mut clients = spawn_clients(
        &committee,
        "hotcrypto",
        &["--rate", "500", "--genesis", &genesis],
    );
    wait_for_clients(&mut clients);
    let sent: u64 = (0..4)
        .map(|i| {
            let last = last_metrics(&dir.join(format!("client-{i}.log"))).expect("client metrics");
            last["sent"].as_u64().expect("sent")
        })
        .sum();
    let executed = |i: usize| {
        last_metrics(&dir.join(format!("node-{i}.log")))
            .and_then(|l| l["stages"]["executor"]["executed"].as_u64())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(0..4).all(|i| executed(i) == Some(sent)) {
        assert!(
            Instant::now() < deadline,
            "nodes did not execute all {sent}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly on SIGTERM");
    }
    for i in 0..4 {
        let lines = metrics_lines(&dir.join(format!("node-{i}.log")));
        let last = lines.last().expect("node metrics");
        for stage in ["verifier", "executor"] {
            assert!(last["stages"][stage]["items"].as_u64() > Some(0), "{last}");
            assert!(last["stages"][stage]["cpu_ms"].is_null(), "{last}");
        }
        assert!(last["consensus"]["cpu_ms"].is_null(), "{last}");
        assert!(last["process"]["cpu_ms"].as_f64() > Some(0.0), "{last}");
        let events: HashSet<String> = lines
            .iter()
            .flat_map(|l| l["samples"].as_array().cloned().unwrap_or_default())
            .map(|s| s["event"].as_str().expect("event").to_string())
            .collect();
        assert_eq!(events, HashSet::from(["execute".to_string()]), "node {i}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Nodes that fell behind their clients (each seals one batch and waits for it to commit) stop
/// reading them, and when they are stopped their clients have written transactions no node read
/// yet. At the stop each node reads its clients' connections to the end: what its batch maker
/// got (`received_txs`) and what it found left there (`unread_txs`) are what the clients sent.
#[test]
fn stopped_nodes_count_what_their_clients_wrote_and_they_never_read() {
    let dir = temp_dir("unread");
    let committee = write_committee_with(
        &dir,
        4,
        serde_json::json!({ "max_uncommitted_bytes": 50_000 }),
    );
    let mut nodes = spawn_nodes(&committee, "hotstuff", &[]);
    let all = [0, 1, 2, 3];
    let mut clients = spawn_clients_on(
        &committee,
        &all,
        2,
        "hotstuff",
        &["--rate", "200000", "--size", "200"],
    );
    wait_for_clients(&mut clients);
    // As the harness does: the clients have exited, then the nodes stop.
    for node in &mut nodes.0 {
        assert!(terminate(node), "a node did not exit cleanly on SIGTERM");
    }
    let sent = clients_sent(&dir, &all);
    let (mut received, mut unread) = (0, 0);
    for i in all {
        let last = last_metrics(&committee.node_log(i, 1)).expect("node metrics");
        assert_eq!(last["final"], true, "node {i} printed no final line");
        received += number(&last, &["consensus", "received_txs"]);
        unread += number(&last, &["consensus", "unread_txs"]);
    }
    assert!(
        unread > 0,
        "no node fell behind: {received} received of {sent}"
    );
    assert_eq!(
        received + unread,
        sent,
        "{received} received + {unread} unread"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node whose mempool is full stops reading its clients' connections. Its clients' writes
/// then block, and a client must still report once a second and stop on SIGTERM meanwhile (or
/// the harness would see neither its counters nor its end).
#[test]
fn a_client_blocked_by_its_node_still_reports_and_stops() {
    let dir = temp_dir("blocked-client");
    // A "node" that accepts and never reads.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("address").to_string();
    let held = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for stream in listener.incoming().take(2) {
            kept.push(stream.expect("accept"));
        }
        std::thread::sleep(Duration::from_secs(30));
        drop(kept);
    });
    let log_path = dir.join("client.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let mut client = Processes(vec![Command::new(client_bin())
        .args([
            "--mode", "hotstuff", "--target", &target, "--nodes", &target,
        ])
        .args(["--rate", "2000000", "--duration", "0", "--size", "200"])
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .expect("client starts")]);
    // The socket buffers fill within milliseconds at this rate: from then on every write
    // blocks. Lines keep coming regardless.
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics_lines(&log_path).len() < 3 {
        assert!(
            Instant::now() < deadline,
            "the blocked client stopped reporting"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        terminate(&mut client.0[0]),
        "the blocked client did not stop on SIGTERM"
    );
    let lines = metrics_lines(&log_path);
    assert_eq!(lines.last().expect("lines")["final"], true);
    drop(held);
}

/// A client counts as sent what it wrote to its node. A write its node held back when the run
/// ended is finished before the last report (or taken back out of the count): the audit compares
/// what clients sent with what nodes committed, and a burst counted but never written reads as
/// transactions the system lost.
#[test]
fn a_client_counts_as_sent_only_what_reached_its_node() {
    use std::io::Read;
    let dir = temp_dir("sent-is-written");
    // A "node" that reads nothing for a while (its mempool is full), then everything.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("address").to_string();
    let reader = std::thread::spawn(move || {
        // The first connection is the client's probe that the node is up.
        let mut streams = listener.incoming();
        let _probe = streams.next();
        let mut stream = streams.next().expect("client connects").expect("accept");
        std::thread::sleep(Duration::from_millis(1_300));
        let mut received = Vec::new();
        stream.read_to_end(&mut received).expect("read");
        // Length-delimited frames: a 4-byte big-endian length, then the transaction.
        let mut frames = 0u64;
        let mut at = 0;
        while at + 4 <= received.len() {
            let length = u32::from_be_bytes(received[at..at + 4].try_into().expect("4 bytes"));
            at += 4 + length as usize;
            frames += 1;
        }
        assert_eq!(at, received.len(), "a frame was cut");
        frames
    });
    let log_path = dir.join("client.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let mut client = Command::new(client_bin())
        .args([
            "--mode", "hotstuff", "--target", &target, "--nodes", &target,
        ])
        .args(["--rate", "400000", "--duration", "1", "--size", "200"])
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .expect("client starts");
    let status = client.wait().expect("client ends");
    assert!(status.success(), "client failed: {status}");
    let received = reader.join().expect("reader");
    let last = metrics_lines(&log_path).pop().expect("a final line");
    assert_eq!(last["final"], true);
    assert_eq!(last["sent"].as_u64(), Some(received), "{last}");
}
