//! The committee and the protocol parameters, both read from JSON files: who the members are,
//! where they listen, and the knobs of the protocol (the leader rule among them).
//!
//! It must not know how the protocol works: it holds the parameters' values and checks that they
//! are consistent, while what they do belongs to the crates that read them (the leader rule's
//! election lives in `hotstuff`).

use crypto::PublicKey;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use thiserror::Error;

pub type Stake = u32;
pub type Round = u64;

/// How the leader of a round is chosen (`Parameters::leader`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaderRule {
    /// Every member in turn, in key order.
    #[default]
    RoundRobin,
    /// Drawn by weight among the members active in the recent chain.
    Reputation,
}

impl std::fmt::Display for LeaderRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LeaderRule::RoundRobin => "round-robin",
            LeaderRule::Reputation => "reputation",
        })
    }
}

impl std::str::FromStr for LeaderRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "round-robin" => Ok(LeaderRule::RoundRobin),
            "reputation" => Ok(LeaderRule::Reputation),
            other => Err(format!(
                "unknown leader rule {other:?}: round-robin or reputation"
            )),
        }
    }
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {file}: {message}")]
    Read { file: String, message: String },
    #[error("cannot parse {file}: {message}")]
    Parse { file: String, message: String },
    #[error("cannot write {file}: {message}")]
    Write { file: String, message: String },
    #[error("invalid configuration in {file}: {message}")]
    Invalid { file: String, message: String },
}

/// Reads and parses a JSON file, naming the file in every error.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let file = path.display().to_string();
    let data = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        file: file.clone(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&data).map_err(|e| ConfigError::Parse {
        file,
        message: e.to_string(),
    })
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), ConfigError> {
    let file = path.display().to_string();
    let data = serde_json::to_string_pretty(value).map_err(|e| ConfigError::Write {
        file: file.clone(),
        message: e.to_string(),
    })?;
    std::fs::write(path, data + "\n").map_err(|e| ConfigError::Write {
        file,
        message: e.to_string(),
    })
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Authority {
    #[serde(default = "default_stake")]
    pub stake: Stake,
    /// HotStuff messages between nodes.
    pub consensus_address: SocketAddr,
    /// Batches and batch requests between nodes.
    pub mempool_address: SocketAddr,
    /// Where clients send transactions.
    pub transactions_address: SocketAddr,
}

fn default_stake() -> Stake {
    1
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Committee {
    pub authorities: BTreeMap<PublicKey, Authority>,
}

impl Committee {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let committee: Committee = read_json(path)?;
        let invalid = |message: &str| ConfigError::Invalid {
            file: path.display().to_string(),
            message: message.to_string(),
        };
        if committee.authorities.is_empty() {
            return Err(invalid("the committee has no authorities"));
        }
        if committee.authorities.values().any(|a| a.stake == 0) {
            return Err(invalid("an authority has zero stake"));
        }
        Ok(committee)
    }

    pub fn size(&self) -> usize {
        self.authorities.len()
    }

    pub fn stake(&self, name: &PublicKey) -> Stake {
        self.authorities.get(name).map_or(0, |a| a.stake)
    }

    pub fn total_stake(&self) -> Stake {
        self.authorities.values().map(|a| a.stake).sum()
    }

    /// 2f+1 out of 3f+1: any two quorums intersect in at least one honest authority.
    pub fn quorum_threshold(&self) -> Stake {
        2 * self.total_stake() / 3 + 1
    }

    /// f+1: at least one honest authority.
    pub fn validity_threshold(&self) -> Stake {
        self.total_stake().div_ceil(3)
    }

    /// Round-robin over the authorities in key order (the rule `LeaderRule::RoundRobin`).
    pub fn leader(&self, round: Round) -> PublicKey {
        let keys: Vec<_> = self.authorities.keys().collect();
        *keys[(round % keys.len() as u64) as usize]
    }

    pub fn authority(&self, name: &PublicKey) -> Option<&Authority> {
        self.authorities.get(name)
    }

    /// The entry of the node that runs as `name`: a node whose key is not in the committee
    /// cannot start its mempool or its consensus.
    pub fn own_authority(&self, name: &PublicKey) -> std::io::Result<Authority> {
        self.authority(name).cloned().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name} is not in the committee"),
            )
        })
    }

    /// Every other authority's (name, address) as picked by `pick`.
    pub fn others<F>(&self, myself: &PublicKey, pick: F) -> Vec<(PublicKey, SocketAddr)>
    where
        F: Fn(&Authority) -> SocketAddr,
    {
        self.authorities
            .iter()
            .filter(|(name, _)| *name != myself)
            .map(|(name, authority)| (*name, pick(authority)))
            .collect()
    }
}

/// Protocol and node parameters. Every field has a default, so `{}` is a valid file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Pacemaker: ms without progress before a node times out of its round.
    pub timeout_delay: u64,
    /// Who leads a round: `round-robin`, or `reputation` (drawn among the members that took
    /// part in the last `leader_window` blocks; see `hotstuff/src/liveness/leader.rs`).
    pub leader: LeaderRule,
    /// Blocks of history the reputation rule reads. Below `gc_depth`, so the blocks it reads
    /// are still stored.
    pub leader_window: usize,
    /// The longest wait, in ms, before a missing block or batch is requested again: the first
    /// retry comes after a tenth of it (at most a second), each later one after twice the wait
    /// before.
    pub sync_retry_delay: u64,
    /// How many peers a retried batch request goes to.
    pub sync_retry_nodes: usize,
    /// A batch is sealed when it reaches this many bytes...
    pub batch_size: usize,
    /// ...or when this many ms passed since its first transaction.
    pub max_batch_delay: u64,
    /// Rounds after commit before blocks and batches are garbage-collected...
    pub gc_depth: Round,
    /// ...and ms after commit: a committed batch is deleted only once both have passed.
    /// Rounds alone run out in seconds at speed, shorter than a partitioned or restarting
    /// peer needs to come back and fetch what it missed (see `GcWindow`). A batch every peer
    /// is known to hold (it signed a QC of the batch's round or later) goes after the rounds.
    pub gc_retention_ms: u64,
    /// Most batch digests a leader puts in one block; received blocks with more are rejected.
    pub max_block_digests: usize,
    /// How many rounds ahead of its own a node accepts votes, timeouts and blocks. Each accepted
    /// round may hold aggregator state until the node gets there, so an unbounded window would
    /// let one member grow it at will. Honest messages run at most a few rounds ahead; a node
    /// further behind catches up through QCs and TCs (in blocks and TC messages), which move
    /// its round before the window is checked.
    pub max_rounds_ahead: Round,
    /// Largest frame accepted on any port; larger ones close the connection.
    pub max_frame_size: usize,
    /// Capacity of the bounded channels between actors and stages.
    pub channel_capacity: usize,
    /// Per-sender backlog of transactions waiting for a nonce gap to close (executor modes).
    pub max_backlog_per_sender: usize,
    /// Most digests one batch request may name; a request naming more is refused and closes the
    /// connection, repeated digests are answered once. A reply is a whole batch for 32 bytes of
    /// request, so the cap bounds what one request costs. Honest requests name the missing
    /// batches of one block: at most `max_block_digests`.
    pub max_request_digests: usize,
    /// Admission back-pressure: once this node's own sealed batches that are not yet committed
    /// reach this many bytes, the mempool stops taking client transactions until some commit.
    /// The clients' writes then block (they count the bursts they could not send in time), and
    /// what waits in the committee is bounded: latency by about this over the throughput.
    pub max_uncommitted_bytes: u64,
    /// Pipeline back-pressure: while this node's application (its last stage) is more than this
    /// many bytes of committed batches behind consensus, the blocks it leads carry no batches.
    pub max_unexecuted_bytes: u64,
    /// The most bytes of committed batches a node keeps for peers that may still fetch them;
    /// past it the oldest go, even within the GC window (a peer that needs one then catches up
    /// by state sync). Bounds memory when a peer lags, whatever the rounds and the time do.
    pub max_retained_bytes: u64,
    /// Most batches a committee member may have stored on this node that are not yet committed;
    /// more are refused (not acknowledged, counted in `refused_batches`). Honest authors have a
    /// few seconds of batches in flight; this bounds what a Byzantine member can make every node
    /// hold (the default with 500 KB batches: 500 MB per member, reached only by one that never
    /// gets its batches committed).
    pub max_uncommitted_batches_per_author: usize,
    /// Most connections served at once on each port (consensus, mempool, transactions); more
    /// are closed as they are accepted. Peers open a few connections each per port.
    pub max_connections: usize,
    /// ms a connection may stay silent before it is closed, on every port. Senders reconnect
    /// when they next have something to say, so closing an idle honest connection costs one
    /// handshake.
    pub idle_timeout_ms: u64,
    /// Most blocks parked while their missing ancestors are fetched; more are dropped (a later
    /// block brings them back). Every parked block is a signed proposal, but a Byzantine leader
    /// can sign any number of them for its rounds. At least `gc_depth`: a node behind by up to
    /// that many rounds parks the blocks it fetches until the oldest one's parent is in.
    pub max_pending_sync_blocks: usize,
    /// The application checkpoints its state after the first committed block of every this many
    /// rounds; a node more than `gc_depth` rounds behind adopts a checkpoint that f+1 members
    /// report (state sync). Below `gc_depth`, so peers still hold the blocks after a checkpoint.
    pub checkpoint_rounds: Round,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            timeout_delay: 1_000,
            leader: LeaderRule::RoundRobin,
            leader_window: 10,
            sync_retry_delay: 10_000,
            sync_retry_nodes: 3,
            batch_size: 500_000,
            max_batch_delay: 100,
            gc_depth: 50,
            gc_retention_ms: 30_000,
            max_block_digests: 256,
            max_rounds_ahead: 100,
            max_frame_size: 8 * 1024 * 1024,
            channel_capacity: 1_000,
            max_backlog_per_sender: 1_000,
            max_request_digests: 1_024,
            max_uncommitted_bytes: 8 * 1024 * 1024,
            max_unexecuted_bytes: 4 * 1024 * 1024,
            max_retained_bytes: 256 * 1024 * 1024,
            max_uncommitted_batches_per_author: 1_000,
            max_connections: 512,
            idle_timeout_ms: 60_000,
            max_pending_sync_blocks: 1_000,
            checkpoint_rounds: 20,
        }
    }
}

impl Parameters {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let parameters: Parameters = read_json(path)?;
        parameters
            .validate()
            .map_err(|message| ConfigError::Invalid {
                file: path.display().to_string(),
                message,
            })?;
        Ok(parameters)
    }

    /// Rejects combinations that cannot work (a batch larger than a frame can carry, zeros).
    pub fn validate(&self) -> Result<(), String> {
        if self.timeout_delay == 0 || self.max_batch_delay == 0 || self.sync_retry_delay == 0 {
            return Err("timeout_delay, max_batch_delay and sync_retry_delay must be > 0".into());
        }
        if self.batch_size == 0 || self.channel_capacity == 0 || self.max_block_digests == 0 {
            return Err("batch_size, channel_capacity and max_block_digests must be > 0".into());
        }
        if self.max_rounds_ahead == 0 {
            return Err("max_rounds_ahead must be > 0".into());
        }
        if self.max_connections == 0
            || self.idle_timeout_ms == 0
            || self.max_uncommitted_batches_per_author == 0
            || self.max_pending_sync_blocks == 0
        {
            return Err(
                "max_connections, idle_timeout_ms, max_uncommitted_batches_per_author \
                 and max_pending_sync_blocks must be > 0"
                    .into(),
            );
        }
        if self.max_uncommitted_bytes < self.batch_size as u64
            || self.max_unexecuted_bytes < self.batch_size as u64
            || self.max_retained_bytes == 0
        {
            return Err(format!(
                "max_uncommitted_bytes ({}) and max_unexecuted_bytes ({}) must be at least \
                 batch_size ({}), and max_retained_bytes must be > 0",
                self.max_uncommitted_bytes, self.max_unexecuted_bytes, self.batch_size
            ));
        }
        if self.leader_window == 0 || self.leader_window as Round >= self.gc_depth {
            return Err(format!(
                "leader_window ({}) must be > 0 and below gc_depth ({})",
                self.leader_window, self.gc_depth
            ));
        }
        if self.checkpoint_rounds == 0 || self.checkpoint_rounds >= self.gc_depth {
            return Err(format!(
                "checkpoint_rounds ({}) must be > 0 and below gc_depth ({}): peers must still \
                 hold the blocks that follow a checkpoint",
                self.checkpoint_rounds, self.gc_depth
            ));
        }
        // A node that fell up to `gc_depth` rounds behind catches up by fetching the blocks it
        // missed, each parked until its parent is stored: it must be able to park them all.
        if (self.max_pending_sync_blocks as Round) < self.gc_depth {
            return Err(format!(
                "max_pending_sync_blocks ({}) must be at least gc_depth ({}): a node behind by \
                 up to gc_depth rounds parks the blocks it fetches until their parents are in",
                self.max_pending_sync_blocks, self.gc_depth
            ));
        }
        // A node must be able to ask for every batch of one block in one request.
        if self.max_request_digests < self.max_block_digests {
            return Err(format!(
                "max_request_digests ({}) must be at least max_block_digests ({})",
                self.max_request_digests, self.max_block_digests
            ));
        }
        // A batch travels in one frame with a small envelope; leave room for it and for the
        // largest transaction that may overflow the batch before it is sealed.
        if self.max_frame_size < 2 * self.batch_size {
            return Err(format!(
                "max_frame_size ({}) must be at least twice batch_size ({})",
                self.max_frame_size, self.batch_size
            ));
        }
        Ok(())
    }

    /// The byte budget of each queue where messages from peers wait, decoded, for the actor
    /// that handles them (the consensus core's input, the mempool's batch requests), and of a
    /// best-effort sender's queue to one consensus peer: two of the largest frames (16 MiB by
    /// default). A message counts as its encoded size. A full queue stops the reader of the
    /// connection the next message came on (a best-effort sender drops it instead), so what
    /// waits there is bounded in bytes, not only in `channel_capacity` messages, which with
    /// frames of up to `max_frame_size` bounded nothing useful. Honest traffic is votes and
    /// blocks of a few KB: thousands of them fit.
    pub fn queue_budget_bytes(&self) -> usize {
        self.max_frame_size.saturating_mul(2)
    }

    /// The bound in bytes of each channel between consensus and the stages behind it
    /// (committed batches, then verified ones), besides `channel_capacity` messages: sixteen
    /// times `max_unexecuted_bytes` (64 MiB by default), and at least two of the largest
    /// frames. Leaders stop proposing batches once their application is `max_unexecuted_bytes`
    /// behind, so this bound is met only by a node whose stages lag its peers': its committer
    /// then waits, then its core, rather than memory growing by up to `channel_capacity`
    /// batches.
    pub fn pipeline_budget_bytes(&self) -> usize {
        let bytes = usize::try_from(self.max_unexecuted_bytes).unwrap_or(usize::MAX);
        bytes
            .saturating_mul(16)
            .max(self.max_frame_size.saturating_mul(2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyPair;

    fn committee(n: u64) -> Committee {
        let authorities = (0..n)
            .map(|i| {
                let port = 10_000 + 3 * i as u16;
                let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
                (
                    KeyPair::from_seed(i).name,
                    Authority {
                        stake: 1,
                        consensus_address: addr(port),
                        mempool_address: addr(port + 1),
                        transactions_address: addr(port + 2),
                    },
                )
            })
            .collect();
        Committee { authorities }
    }

    #[test]
    fn thresholds() {
        let c = committee(4);
        assert_eq!(c.quorum_threshold(), 3);
        assert_eq!(c.validity_threshold(), 2);
        let c = committee(10);
        assert_eq!(c.quorum_threshold(), 7);
        assert_eq!(c.validity_threshold(), 4);
    }

    /// A node behind by up to `gc_depth` rounds parks every block it fetches until the oldest
    /// one's parent is in: fewer parking places than that, and it drops blocks it needs while
    /// new ones keep coming (the Twins generator's nodes that never caught up).
    #[test]
    fn parking_places_cover_the_gc_window() {
        let short = Parameters {
            gc_depth: 1_000,
            max_pending_sync_blocks: 999,
            ..Parameters::default()
        };
        let error = short.validate().expect_err("too few");
        assert!(error.contains("max_pending_sync_blocks"), "{error}");
        let enough = Parameters {
            max_pending_sync_blocks: 1_000,
            ..short
        };
        assert_eq!(enough.validate(), Ok(()));
        assert_eq!(Parameters::default().validate(), Ok(()));
    }

    #[test]
    fn leaders_rotate_over_everyone() {
        let c = committee(4);
        let leaders: std::collections::BTreeSet<_> = (0..4).map(|r| c.leader(r)).collect();
        assert_eq!(leaders.len(), 4);
        assert_eq!(c.leader(1), c.leader(5));
    }

    #[test]
    fn files_round_trip_and_errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("hotmove-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("committee.json");
        write_json(&path, &committee(4)).expect("write");
        assert_eq!(Committee::load(&path).expect("load"), committee(4));

        let params = dir.join("parameters.json");
        std::fs::write(&params, r#"{"batch_size": 1000}"#).expect("write");
        let p = Parameters::load(&params).expect("defaults fill the rest");
        assert_eq!(p.batch_size, 1000);
        assert_eq!(p.timeout_delay, Parameters::default().timeout_delay);

        std::fs::write(&params, r#"{"batch_sise": 1000}"#).expect("write");
        let err = Parameters::load(&params).expect_err("unknown field");
        assert!(err.to_string().contains("parameters.json"), "{err}");

        std::fs::write(&params, r#"{"batch_size": 9000000}"#).expect("write");
        assert!(matches!(
            Parameters::load(&params),
            Err(ConfigError::Invalid { .. })
        ));
        let missing = Committee::load(&dir.join("nope.json")).expect_err("missing");
        assert!(missing.to_string().contains("nope.json"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
