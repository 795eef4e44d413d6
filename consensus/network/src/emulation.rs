//! Network emulation on the committee's links (`node run --net-emulation FILE`): a one-way
//! latency per ordered pair of nodes, a rate per link and partition windows, for WAN experiments
//! on one machine (no netem here). It lives in the network layer: every committee sender and
//! receiver of a node started with it applies the conditions of the peer's [`Link`]; client
//! connections never do, and a node started without it has no link at all (nothing on its send
//! path changes).
//!
//! The file is JSON, the same for every node (each reads its own row):
//! ```json
//! {
//!   "default_delay_ms": 50,
//!   "delays_ms": { "<from key>": { "<to key>": 120 } },
//!   "bandwidth_mbit": 100,
//!   "partitions": [
//!     { "nodes": ["<key>"], "start_unix_ms": 1700000005000, "end_unix_ms": 1700000025000 }
//!   ]
//! }
//! ```
//! Keys are the committee's (hex). `delays_ms[a][b]` is the one-way latency from a to b, and
//! `default_delay_ms` (default 0) that of every pair not listed. `bandwidth_mbit` (megabits per
//! second; default: unlimited) is the rate of every link in each direction, emulated by the
//! sending node ([`Bandwidth`](super::link::Bandwidth)). A partition isolates `nodes`
//! from the rest of the committee from `start_unix_ms` to `end_unix_ms` (wall clock, so every
//! node cuts and heals at the same moment on synchronised clocks): a link is cut while any
//! window separates its two ends.

use super::link::Link;
use config::{read_json, Committee, ConfigError};
use crypto::PublicKey;
use plumbing::clock::{self, Instant};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tracing::info;

/// A latency above this is taken for a unit mistake (µs given as ms), not an experiment.
pub const MAX_DELAY_MS: u64 = 60_000;

/// Rates outside these bounds are taken for unit mistakes (bit/s or kbit/s given as Mbit/s):
/// below 1 kbit/s a vote takes over a second, and no NIC is faster than 1 Tbit/s.
pub const MIN_BANDWIDTH_MBIT: f64 = 0.001;
pub const MAX_BANDWIDTH_MBIT: f64 = 1_000_000.0;

#[derive(Debug, Error)]
pub enum EmulationError {
    #[error(transparent)]
    File(#[from] ConfigError),
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
}

/// The file's contents.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EmulationSpec {
    #[serde(default)]
    pub default_delay_ms: u64,
    #[serde(default)]
    pub delays_ms: BTreeMap<PublicKey, BTreeMap<PublicKey, u64>>,
    /// The rate of every link, each direction; `None`: unlimited.
    #[serde(default)]
    pub bandwidth_mbit: Option<f64>,
    #[serde(default)]
    pub partitions: Vec<PartitionSpec>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PartitionSpec {
    pub nodes: Vec<PublicKey>,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
}

impl EmulationSpec {
    /// Reads `path` and checks it against the committee; errors name the file.
    pub fn load(path: &Path, committee: &Committee) -> Result<Self, EmulationError> {
        let spec: EmulationSpec = read_json(path)?;
        spec.validate(committee)
            .map_err(|message| EmulationError::Invalid {
                file: path.display().to_string(),
                message,
            })?;
        Ok(spec)
    }

    /// Every key is a member, every latency and rate plausible, every window non-empty; the
    /// message says what is wrong.
    pub fn validate(&self, committee: &Committee) -> Result<(), String> {
        let member = |key: &PublicKey, what: &str| {
            if committee.authority(key).is_some() {
                Ok(())
            } else {
                Err(format!("{what} {} is not a committee member", key.to_hex()))
            }
        };
        let plausible = |ms: u64, what: String| {
            if ms <= MAX_DELAY_MS {
                Ok(())
            } else {
                Err(format!("{what} is {ms} ms, more than {MAX_DELAY_MS} ms"))
            }
        };
        plausible(self.default_delay_ms, "default_delay_ms".into())?;
        if let Some(mbit) = self.bandwidth_mbit {
            if mbit <= 0.0 {
                return Err(format!("bandwidth_mbit must be positive, got {mbit}"));
            }
            if !(MIN_BANDWIDTH_MBIT..=MAX_BANDWIDTH_MBIT).contains(&mbit) {
                return Err(format!(
                    "bandwidth_mbit is {mbit} Mbit/s, not within \
                     {MIN_BANDWIDTH_MBIT}..{MAX_BANDWIDTH_MBIT} (a unit mistake?)"
                ));
            }
        }
        for (from, row) in &self.delays_ms {
            member(from, "delays_ms: node")?;
            for (to, ms) in row {
                member(to, "delays_ms: node")?;
                plausible(*ms, format!("the delay from {from} to {to}"))?;
            }
        }
        for (i, partition) in self.partitions.iter().enumerate() {
            if partition.nodes.is_empty() {
                return Err(format!("partition {i} isolates no node"));
            }
            for node in &partition.nodes {
                member(node, &format!("partition {i}: node"))?;
            }
            if partition.start_unix_ms >= partition.end_unix_ms {
                return Err(format!(
                    "partition {i} ends ({}) before it starts ({})",
                    partition.end_unix_ms, partition.start_unix_ms
                ));
            }
        }
        Ok(())
    }

    fn delay(&self, from: &PublicKey, to: &PublicKey) -> Duration {
        let ms = self
            .delays_ms
            .get(from)
            .and_then(|row| row.get(to))
            .copied()
            .unwrap_or(self.default_delay_ms);
        Duration::from_millis(ms)
    }

    /// The rate of every link in bits per second, if limited (checked by `validate`).
    fn bits_per_second(&self) -> Option<u64> {
        self.bandwidth_mbit.map(|mbit| (mbit * 1e6).round() as u64)
    }
}

/// The links of one node to every other member.
#[derive(Debug)]
pub struct NetEmulation {
    by_name: HashMap<PublicKey, Arc<Link>>,
    /// The same links under the peer's consensus and mempool addresses: senders know the
    /// address they dial.
    by_address: HashMap<SocketAddr, Arc<Link>>,
}

impl NetEmulation {
    /// Builds `me`'s links from a checked spec ([`EmulationSpec::load`]) and starts cutting
    /// and healing them on its schedule (call within the node's runtime).
    pub fn start(spec: &EmulationSpec, me: &PublicKey, committee: &Committee) -> Arc<Self> {
        let emulation = Arc::new(Self::new(spec, me, committee));
        let windows = emulation.windows(spec, me, clock::now_ms());
        PartitionSchedule::spawn(emulation.clone(), windows);
        emulation
    }

    /// `me`'s open links, with the spec's latencies and rate.
    pub fn new(spec: &EmulationSpec, me: &PublicKey, committee: &Committee) -> Self {
        let mut by_name = HashMap::new();
        let mut by_address = HashMap::new();
        for (peer, authority) in &committee.authorities {
            if peer == me {
                continue;
            }
            let link = Link::new(spec.delay(me, peer), spec.delay(peer, me))
                .with_bandwidth(spec.bits_per_second());
            let link = Arc::new(link);
            by_address.insert(authority.consensus_address, link.clone());
            by_address.insert(authority.mempool_address, link.clone());
            by_name.insert(*peer, link);
        }
        NetEmulation {
            by_name,
            by_address,
        }
    }

    /// The link to the peer at `address` (a committee consensus or mempool address).
    pub fn link_to(&self, address: &SocketAddr) -> Option<Arc<Link>> {
        self.by_address.get(address).cloned()
    }

    /// The link to the member `peer`.
    pub fn link_of(&self, peer: &PublicKey) -> Option<Arc<Link>> {
        self.by_name.get(peer).cloned()
    }

    /// The spec's windows as `me` sees them, on the process's clock (`now_ms` is its wall
    /// clock at this instant): which peers each one cuts `me` off from.
    pub fn windows(&self, spec: &EmulationSpec, me: &PublicKey, now_ms: u64) -> Vec<Window> {
        let origin = Instant::now();
        // A wall-clock time on the process's clock; the past is clamped to now.
        let at = |unix_ms: u64| origin + Duration::from_millis(unix_ms.saturating_sub(now_ms));
        spec.partitions
            .iter()
            .map(|partition| {
                let isolated: BTreeSet<_> = partition.nodes.iter().copied().collect();
                let inside = isolated.contains(me);
                let cut = self
                    .by_name
                    .keys()
                    .filter(|peer| isolated.contains(peer) != inside)
                    .copied()
                    .collect();
                Window {
                    start: at(partition.start_unix_ms),
                    end: at(partition.end_unix_ms),
                    cut,
                }
            })
            .collect()
    }
}

/// One partition window from one node's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
    /// The peers this node cannot reach meanwhile.
    pub cut: BTreeSet<PublicKey>,
}

/// Cuts and heals a node's links at the windows' boundaries, then ends.
pub struct PartitionSchedule {
    emulation: Arc<NetEmulation>,
    windows: Vec<Window>,
}

impl PartitionSchedule {
    pub fn spawn(emulation: Arc<NetEmulation>, windows: Vec<Window>) {
        if windows.is_empty() {
            return;
        }
        tokio::spawn(PartitionSchedule { emulation, windows }.run());
    }

    async fn run(self) {
        let mut boundaries: Vec<Instant> = self
            .windows
            .iter()
            .flat_map(|window| [window.start, window.end])
            .collect();
        boundaries.sort();
        boundaries.dedup();
        self.apply(Instant::now());
        for boundary in boundaries {
            clock::sleep_until(boundary).await;
            self.apply(boundary);
        }
    }

    /// Sets every link as the windows open at `at` say.
    fn apply(&self, at: Instant) {
        for (peer, link) in &self.emulation.by_name {
            let cut = self
                .windows
                .iter()
                .any(|w| w.start <= at && at < w.end && w.cut.contains(peer));
            if cut != link.state().cut {
                info!(%peer, cut, "network emulation: link {}", if cut { "cut" } else { "healed" });
                link.set_cut(cut);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::Authority;
    use crypto::KeyPair;

    fn committee(keys: &[KeyPair]) -> Committee {
        let address = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        Committee {
            authorities: keys
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let base = 9_000 + 3 * i as u16;
                    let authority = Authority {
                        stake: 1,
                        consensus_address: address(base),
                        mempool_address: address(base + 1),
                        transactions_address: address(base + 2),
                    };
                    (k.name, authority)
                })
                .collect(),
        }
    }

    fn keys() -> Vec<KeyPair> {
        (0..4).map(KeyPair::from_seed).collect()
    }

    fn parse(json: &str) -> EmulationSpec {
        serde_json::from_str(json).expect("valid spec")
    }

    #[test]
    fn latencies_per_direction_with_a_default() {
        let keys = keys();
        let committee = committee(&keys);
        let (a, b, c) = (keys[0].name, keys[1].name, keys[2].name);
        let spec = parse(&format!(
            r#"{{"default_delay_ms": 50, "delays_ms": {{"{}": {{"{}": 120}}}}}}"#,
            a.to_hex(),
            b.to_hex()
        ));
        spec.validate(&committee).expect("valid");
        let emulation = NetEmulation::new(&spec, &a, &committee);
        let to_b = emulation.link_of(&b).expect("a link to b");
        assert_eq!(to_b.outgoing, Duration::from_millis(120));
        assert_eq!(to_b.incoming, Duration::from_millis(50));
        let to_c = emulation.link_of(&c).expect("a link to c");
        assert_eq!(to_c.outgoing, Duration::from_millis(50));
        // Both of a peer's ports lead to its one link; no link to oneself nor to a stranger.
        let authority = committee.authority(&b).expect("member");
        let by_consensus = emulation
            .link_to(&authority.consensus_address)
            .expect("link");
        let by_mempool = emulation.link_to(&authority.mempool_address).expect("link");
        assert!(Arc::ptr_eq(&by_consensus, &by_mempool) && Arc::ptr_eq(&by_mempool, &to_b));
        assert!(emulation.link_of(&a).is_none());
        assert!(emulation.link_to(&authority.transactions_address).is_none());
    }

    #[test]
    fn one_rate_for_every_link_or_none() {
        let keys = keys();
        let committee = committee(&keys);
        let (a, b) = (keys[0].name, keys[1].name);
        let spec = parse(r#"{"default_delay_ms": 5, "bandwidth_mbit": 2.5}"#);
        spec.validate(&committee).expect("valid");
        for (me, peer) in [(a, b), (b, a)] {
            let link = NetEmulation::new(&spec, &me, &committee)
                .link_of(&peer)
                .expect("a link");
            let bandwidth = link.bandwidth.as_ref().expect("limited");
            assert_eq!(bandwidth.bits_per_second(), 2_500_000);
        }
        // Both of a peer's ports lead to the one link, so to the one bucket.
        let emulation = NetEmulation::new(&spec, &a, &committee);
        let authority = committee.authority(&b).expect("member");
        let rate = |address| emulation.link_to(address).and_then(|l| l.bandwidth.clone());
        let (consensus, mempool) = (
            rate(&authority.consensus_address).expect("limited"),
            rate(&authority.mempool_address).expect("limited"),
        );
        assert!(Arc::ptr_eq(&consensus, &mempool));
        // Another peer's link has a bucket of its own.
        let other = emulation
            .link_of(&keys[2].name)
            .and_then(|l| l.bandwidth.clone());
        assert!(!Arc::ptr_eq(&consensus, &other.expect("limited")));
        // Without it, unlimited.
        let unlimited = NetEmulation::new(&parse(r#"{"default_delay_ms": 5}"#), &a, &committee);
        assert!(unlimited.link_of(&b).expect("a link").bandwidth.is_none());
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        let keys = keys();
        let committee = committee(&keys);
        let stranger = KeyPair::from_seed(99).name.to_hex();
        let a = keys[0].name.to_hex();
        let cases = [
            (
                format!(r#"{{"delays_ms": {{"{a}": {{"{stranger}": 5}}}}}}"#),
                "not a committee member",
            ),
            (r#"{"default_delay_ms": 60001}"#.to_string(), "more than"),
            (
                r#"{"bandwidth_mbit": 0}"#.to_string(),
                "bandwidth_mbit must be positive, got 0",
            ),
            (
                r#"{"bandwidth_mbit": -100}"#.to_string(),
                "bandwidth_mbit must be positive, got -100",
            ),
            (
                r#"{"bandwidth_mbit": 0.0001}"#.to_string(),
                "a unit mistake",
            ),
            (r#"{"bandwidth_mbit": 1e9}"#.to_string(), "a unit mistake"),
            (
                r#"{"partitions": [{"nodes": [], "start_unix_ms": 1, "end_unix_ms": 2}]}"#
                    .to_string(),
                "isolates no node",
            ),
            (
                format!(
                    r#"{{"partitions": [{{"nodes": ["{a}"], "start_unix_ms": 5, "end_unix_ms": 5}}]}}"#
                ),
                "before it starts",
            ),
        ];
        for (json, why) in cases {
            let error = parse(&json).validate(&committee).expect_err(&json);
            assert!(error.contains(why), "{json}: {error}");
        }
        // Unknown fields and malformed keys do not parse.
        assert!(serde_json::from_str::<EmulationSpec>(r#"{"delay": 5}"#).is_err());
        assert!(serde_json::from_str::<EmulationSpec>(r#"{"delays_ms": {"zz": {}}}"#).is_err());
        assert!(serde_json::from_str::<EmulationSpec>(r#"{"bandwidth_mbit": "fast"}"#).is_err());
    }

    #[test]
    fn a_missing_or_bad_file_names_itself() {
        let keys = keys();
        let committee = committee(&keys);
        let missing = Path::new("/nonexistent/emulation.json");
        let error = EmulationSpec::load(missing, &committee).expect_err("no file");
        assert!(error.to_string().contains("emulation.json"), "{error}");
        let bad = std::env::temp_dir().join(format!("emulation-{}.json", std::process::id()));
        std::fs::write(&bad, r#"{"default_delay_ms": 99999999}"#).expect("write");
        let error = EmulationSpec::load(&bad, &committee).expect_err("implausible");
        let _ = std::fs::remove_file(&bad);
        assert!(
            error.to_string().contains(&*bad.to_string_lossy()),
            "{error}"
        );
    }

    fn spec_with(partitions: Vec<PartitionSpec>) -> EmulationSpec {
        EmulationSpec {
            partitions,
            ..EmulationSpec::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_cuts_exactly_the_links_across_it_for_its_window() {
        let keys = keys();
        let committee = committee(&keys);
        let names: Vec<_> = keys.iter().map(|k| k.name).collect();
        let now = 1_000_000;
        // Nodes 2 and 3 isolated together from 1 s to 3 s from now.
        let spec = spec_with(vec![PartitionSpec {
            nodes: vec![names[2], names[3]],
            start_unix_ms: 1_001_000,
            end_unix_ms: 1_003_000,
        }]);
        let start = Instant::now();
        let views: Vec<_> = names
            .iter()
            .map(|me| {
                let emulation = Arc::new(NetEmulation::new(&spec, me, &committee));
                let windows = emulation.windows(&spec, me, now);
                PartitionSchedule::spawn(emulation.clone(), windows);
                emulation
            })
            .collect();
        let cut =
            |from: usize, to: usize| views[from].link_of(&names[to]).expect("link").state().cut;
        let across = |from: usize, to: usize| (from < 2) != (to < 2);
        let check = |during: bool| {
            for from in 0..4 {
                for to in (0..4).filter(|&to| to != from) {
                    assert_eq!(cut(from, to), during && across(from, to), "{from}->{to}");
                }
            }
        };
        clock::sleep_until(start + Duration::from_millis(999)).await;
        check(false);
        clock::sleep_until(start + Duration::from_millis(1_001)).await;
        check(true);
        clock::sleep_until(start + Duration::from_millis(2_999)).await;
        check(true);
        clock::sleep_until(start + Duration::from_millis(3_001)).await;
        check(false);
        // The heal is stamped when it happened: frames held meanwhile leave from then.
        assert_eq!(
            views[0].link_of(&names[2]).expect("link").state().since,
            start + Duration::from_millis(3_000)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_windows_keep_a_link_cut_until_the_last_ends_and_the_past_is_clamped() {
        let keys = keys();
        let committee = committee(&keys);
        let names: Vec<_> = keys.iter().map(|k| k.name).collect();
        let now = 1_000_000;
        let spec = spec_with(vec![
            // Started before this node booted: cut from now.
            PartitionSpec {
                nodes: vec![names[1]],
                start_unix_ms: 999_000,
                end_unix_ms: 1_002_000,
            },
            PartitionSpec {
                nodes: vec![names[1]],
                start_unix_ms: 1_001_000,
                end_unix_ms: 1_004_000,
            },
            // Over before this node booted: ignored.
            PartitionSpec {
                nodes: vec![names[2]],
                start_unix_ms: 990_000,
                end_unix_ms: 995_000,
            },
        ]);
        let start = Instant::now();
        let emulation = Arc::new(NetEmulation::new(&spec, &names[0], &committee));
        let windows = emulation.windows(&spec, &names[0], now);
        PartitionSchedule::spawn(emulation.clone(), windows);
        let to = |i: usize| emulation.link_of(&names[i]).expect("link");
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(to(1).state().cut && !to(2).state().cut && !to(3).state().cut);
        clock::sleep_until(start + Duration::from_millis(3_999)).await;
        assert!(to(1).state().cut, "the second window still holds it");
        clock::sleep_until(start + Duration::from_millis(4_001)).await;
        assert!(!to(1).state().cut);
    }
}
