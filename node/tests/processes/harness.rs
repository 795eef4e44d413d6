//! Running real `node` and `client` processes on loopback: their files (keys, committee,
//! parameters, genesis), starting and stopping them, and reading the METRICS lines they print.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn node_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_node"))
}

/// The client binary, built beside the node binary. `cargo test` builds only the binaries of
/// the package under test, so the client is built here (once per test process), with the same
/// profile as the node binary: the name of the directory it is in (`debug` is `dev`'s).
pub fn client_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let node = node_bin();
            let path = node.with_file_name("client");
            let profile = node
                .parent()
                .and_then(Path::file_name)
                .and_then(|name| name.to_str())
                .map_or("dev", |name| if name == "debug" { "dev" } else { name });
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "-p", "client", "--bin", "client"]);
            cargo.args(["--profile", profile]);
            let status = cargo.status().expect("cargo runs");
            assert!(status.success(), "building the client failed");
            assert!(path.exists(), "no client binary at {}", path.display());
            path
        })
        .clone()
}

/// A port nobody listens on, below Linux's ephemeral range (32768 and up), so no outgoing
/// connection of a concurrently running test can take it before the node binds it.
pub fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(
        0,
        10_000 + (std::process::id() % 2_000) as u16 * 10,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    loop {
        let port = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(port < 32_000, "ran out of test ports");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hotmove-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Processes killed (SIGKILL) when dropped, so a failing test leaves none behind.
pub struct Processes(pub Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn terminate(child: &mut Child) -> bool {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub fn metrics_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("METRICS "))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn last_metrics(path: &Path) -> Option<Value> {
    metrics_lines(path).pop()
}

/// Polls `done` until it holds; fails naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits up to 60 s until nodes `0..nodes` (their first lives, `node-i.log` in `dir`) report
/// `count` transactions executed; failing, says how many each had.
pub fn wait_for_executed(dir: &Path, nodes: usize, count: u64, what: &str) {
    let executed = |i: usize| {
        last_metrics(&dir.join(format!("node-{i}.log")))
            .map(|line| line["stages"]["executor"]["state_executed"].clone())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(0..nodes).all(|i| executed(i).is_some_and(|e| e == count)) {
        assert!(
            Instant::now() < deadline,
            "{what}: nodes did not execute all {count} transactions: {:?}",
            (0..nodes).map(executed).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the clients `which` (`client-i.log` in `dir`) sent in all, from their final lines.
pub fn clients_sent(dir: &Path, which: &[usize]) -> u64 {
    which
        .iter()
        .map(|i| {
            let line = last_metrics(&dir.join(format!("client-{i}.log"))).expect("client metrics");
            assert_eq!(line["final"], true, "client {i} wrote no final line");
            number(&line, &["sent"])
        })
        .sum()
}

pub struct Committee {
    pub dir: PathBuf,
    pub keys: Vec<PathBuf>,
    pub tx_addresses: Vec<String>,
    /// Where each node serves Prometheus metrics.
    pub prometheus: Vec<String>,
}

/// The node parameters every process test runs with: batches sealed at 50 KB or 50 ms, so a
/// few hundred transactions a second fill blocks.
const PARAMETERS: &str = r#"{"batch_size": 50000, "max_batch_delay": 50, "timeout_delay": 1000}"#;

pub fn write_committee(dir: &Path, n: usize) -> Committee {
    write_committee_with(dir, n, serde_json::json!({}))
}

/// A committee of `n` fresh keys on loopback ports, and the parameters file: the common
/// parameters with the fields of `parameters` (an object) over them.
pub fn write_committee_with(dir: &Path, n: usize, parameters: Value) -> Committee {
    let mut authorities = serde_json::Map::new();
    let mut keys = Vec::new();
    let mut tx_addresses = Vec::new();
    for i in 0..n {
        let key_file = dir.join(format!("node-{i}.json"));
        let status = Command::new(node_bin())
            .args(["keys", "--filename"])
            .arg(&key_file)
            .status()
            .expect("node keys");
        assert!(status.success());
        let key: Value =
            serde_json::from_str(&std::fs::read_to_string(&key_file).expect("key file"))
                .expect("json");
        let name = key["name"].as_str().expect("name").to_string();
        let tx = format!("127.0.0.1:{}", free_port());
        authorities.insert(
            name,
            serde_json::json!({
                "stake": 1,
                "consensus_address": format!("127.0.0.1:{}", free_port()),
                "mempool_address": format!("127.0.0.1:{}", free_port()),
                "transactions_address": tx,
            }),
        );
        keys.push(key_file);
        tx_addresses.push(tx);
    }
    let committee = serde_json::json!({ "authorities": authorities });
    std::fs::write(dir.join("committee.json"), committee.to_string()).expect("committee");
    let mut all: Value = serde_json::from_str(PARAMETERS).expect("parameters");
    for (field, value) in parameters.as_object().expect("an object of parameters") {
        all[field] = value.clone();
    }
    std::fs::write(dir.join("parameters.json"), all.to_string()).expect("parameters");
    Committee {
        dir: dir.to_path_buf(),
        keys,
        tx_addresses,
        prometheus: (0..n)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect(),
    }
}

impl Committee {
    pub fn file(&self) -> PathBuf {
        self.dir.join("committee.json")
    }

    /// `node genesis` for `accounts` accounts of `balance` each; returns the file's path.
    pub fn write_genesis(&self, accounts: u64, balance: u64) -> String {
        let genesis = self.dir.join("genesis.json");
        let status = Command::new(node_bin())
            .args(["genesis", "--accounts", &accounts.to_string()])
            .args(["--balance", &balance.to_string(), "--filename"])
            .arg(&genesis)
            .status()
            .expect("node genesis");
        assert!(status.success());
        genesis.to_string_lossy().into_owned()
    }

    /// The METRICS lines (stdout) of node `i`'s life `life` (1 for its first process).
    pub fn node_log(&self, i: usize, life: usize) -> PathBuf {
        match life {
            1 => self.dir.join(format!("node-{i}.log")),
            _ => self.dir.join(format!("node-{i}.life-{life}.log")),
        }
    }

    /// What node `i`'s life `life` wrote to stderr: its log messages.
    pub fn node_messages(&self, i: usize, life: usize) -> PathBuf {
        self.node_log(i, life).with_extension("err")
    }
}

/// Starts `node run` for member `i` as its life `life` (see [`Committee::node_log`]). `{i}` in
/// an extra argument becomes the node's index; `env` adds environment variables.
pub fn spawn_node(
    committee: &Committee,
    i: usize,
    life: usize,
    mode: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Child {
    let log = std::fs::File::create(committee.node_log(i, life)).expect("log");
    let messages = std::fs::File::create(committee.node_messages(i, life)).expect("log");
    Command::new(node_bin())
        .arg("run")
        .arg("--keys")
        .arg(&committee.keys[i])
        .arg("--committee")
        .arg(committee.file())
        .arg("--parameters")
        .arg(committee.dir.join("parameters.json"))
        .args(["--mode", mode])
        .args(["--prometheus", &committee.prometheus[i]])
        .args(extra.iter().map(|a| a.replace("{i}", &i.to_string())))
        .envs(env.iter().copied())
        .stdout(log)
        .stderr(messages)
        .spawn()
        .expect("node starts")
}

/// Starts one `node run` per key of the committee; stdout (METRICS) goes to node-i.log.
pub fn spawn_nodes(committee: &Committee, mode: &str, extra: &[&str]) -> Processes {
    Processes(
        (0..committee.keys.len())
            .map(|i| spawn_node(committee, i, 1, mode, extra, &[]))
            .collect(),
    )
}

/// Starts one client per node for 4 seconds; stdout goes to client-i.log.
pub fn spawn_clients(committee: &Committee, mode: &str, extra: &[&str]) -> Processes {
    let all: Vec<usize> = (0..committee.keys.len()).collect();
    spawn_clients_on(committee, &all, 4, mode, extra)
}

/// Starts one client for each of `nodes` for `seconds`, each moving to another of `nodes` if
/// its own goes away; stdout goes to client-i.log.
pub fn spawn_clients_on(
    committee: &Committee,
    nodes: &[usize],
    seconds: u64,
    mode: &str,
    extra: &[&str],
) -> Processes {
    let addresses: Vec<&str> = nodes
        .iter()
        .map(|&i| committee.tx_addresses[i].as_str())
        .collect();
    let mut clients = Processes(Vec::new());
    for (index, &i) in nodes.iter().enumerate() {
        let log =
            std::fs::File::create(committee.dir.join(format!("client-{i}.log"))).expect("log");
        let child = Command::new(client_bin())
            .args(["--mode", mode, "--target", &committee.tx_addresses[i]])
            .args(["--duration", &seconds.to_string()])
            .args(["--nodes", &addresses.join(",")])
            .args(["--client-index", &index.to_string()])
            .args(["--clients", &nodes.len().to_string()])
            .args(extra)
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("client starts");
        clients.0.push(child);
    }
    clients
}

pub fn wait_for_clients(clients: &mut Processes) {
    let deadline = Instant::now() + Duration::from_secs(120);
    for client in &mut clients.0 {
        loop {
            if let Some(status) = client.try_wait().expect("client status") {
                assert!(status.success(), "client failed: {status}");
                break;
            }
            assert!(Instant::now() < deadline, "clients did not finish");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The first number after `after` in `text` (a node's log line).
pub fn number_after(text: &str, after: &str) -> Option<u64> {
    let rest = &text[text.find(after)? + after.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// A number at `path` in a METRICS line (0 where absent: a counter not reported yet).
pub fn number(line: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(line, |value, key| &value[*key])
        .as_f64()
        .unwrap_or(0.0) as u64
}

/// The state digest its executor reported with each executed height, line by line.
pub fn executed_digests(lines: &[Value]) -> Vec<(u64, String)> {
    lines
        .iter()
        .filter_map(|line| {
            let executor = &line["stages"]["executor"];
            let height = executor["state_executed"].as_f64()? as u64;
            let digest = executor["state_digest"].as_str()?;
            Some((height, digest.to_string()))
        })
        .collect()
}

/// The harness audit's digest rule over the METRICS lines of `lives` (who, lines): wherever two
/// of them reported the same executed height, they reported the same state digest. Returns, for
/// every height at least two reported, who reported it.
pub fn assert_digests_agree(lives: &[(String, Vec<Value>)]) -> BTreeMap<u64, Vec<String>> {
    let mut seen: BTreeMap<u64, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (who, lines) in lives {
        for (height, digest) in executed_digests(lines) {
            let holders = seen.entry(height).or_default().entry(digest).or_default();
            if !holders.contains(who) {
                holders.push(who.clone());
            }
        }
    }
    let forks: Vec<_> = seen.iter().filter(|(_, d)| d.len() > 1).collect();
    assert!(
        forks.is_empty(),
        "state digests differ at {} heights; first: {:?}",
        forks.len(),
        forks.first()
    );
    seen.into_iter()
        .filter_map(|(height, digests)| {
            let holders: Vec<String> = digests.into_values().flatten().collect();
            (holders.len() > 1).then_some((height, holders))
        })
        .collect()
}
