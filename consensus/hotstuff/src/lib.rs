//! HotStuff (two-chain) over the mempool's batch digests, and the facade that starts it.
//!
//! The crate's one output is the stream of committed batches, in commit order, through one
//! bounded channel (see [`Consensus::spawn`]). The mempool (`mempool::Mempool::spawn`) and the
//! consensus core are started side by side by the node, joined by a [`MempoolLink`].
//!
//! It must not know what the batches hold or what the application does with them: batches are
//! digests to it, and the application's state is bytes it checks against a digest (a
//! `checkpoint::Checkpoint`). Framing and authentication belong to `network`, bytes on disk to `store`.

mod aggregator;
mod commit;
mod core;
mod error;
mod handler;
mod liveness;
pub mod messages;
mod metrics;
mod payload;
mod safety;
mod sync;
#[cfg(test)]
mod twins;
pub mod wire;

pub use liveness::leader;
pub use messages::commit_proof;

#[cfg(test)]
#[global_allocator]
static ALLOCATOR: plumbing::test_alloc::Counting = plumbing::test_alloc::Counting;

pub use error::FatalError;
pub use messages::record::{Act, RecordReply};
pub use messages::{signatures_checked, Block, Timeout, Vote, QC, TC};
pub use metrics::{ConsensusMetrics, ConsensusSnapshot};
pub use safety::MissingRecord;
pub use wire::{CheckpointReply, ConsensusMessage};

use batch::CommittedBatch;
use checkpoint::StateSyncLink;
use config::{Committee, Parameters};
use crypto::{Digest, PublicKey, SecretKey, SignatureService};
use mempool::{AuthorQuota, ConsensusMempoolMessage};
use network::handshake::{Credentials, Gate, Purpose};
use network::{
    listen_address, NetEmulation, Receiver, ReceiverConfig, SimpleSender,
    DEFAULT_SIMPLE_QUEUE_CAPACITY,
};
use plumbing::budgeted;
use plumbing::metered::{MeteredSender, NamedChannel};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::sync::{mpsc, watch};

/// What a running consensus instance exposes besides its output channel.
#[derive(Clone)]
pub struct ConsensusHandle {
    pub metrics: Arc<ConsensusMetrics>,
    /// Becomes `Some` when consensus hit an error it must not continue after (a `SAFETY` fork:
    /// see [`FatalError`]). The core has stopped by then and outputs nothing more; the node
    /// binary should wait on `fatal.changed()`, log the error and exit with a non-zero status.
    pub fatal: watch::Receiver<Option<FatalError>>,
    /// The metrics of its queues bounded in bytes (`core_input`: peers' messages waiting for
    /// the core).
    pub queues: Vec<NamedChannel>,
}

/// The consensus core's ends of the two channels that join it to the mempool; the node, which
/// starts both side by side, makes the channels.
pub struct MempoolLink {
    /// Digests of batches a quorum holds, from this node's mempool.
    pub rx_digests: mpsc::Receiver<Digest>,
    /// Sync and cleanup requests to the mempool.
    pub tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    /// The mempool's count of members' uncommitted batches, which commits drain.
    pub quota: AuthorQuota,
}

pub struct Consensus;

impl Consensus {
    /// Starts the HotStuff core of authority `name` over the batches of its mempool (`mempool`);
    /// returns once its port is bound. Committed batches leave, in commit order, through
    /// `tx_output`. Through `state_sync` the application publishes its checkpoints and gets
    /// one adopted from peers when this node is too far behind to replay the chain. With
    /// `emulation`, links to the other members follow its latencies and partitions. A store
    /// without a vote record makes the core ask the others what its key signed before it signs
    /// anything, and `missing_record` says what it does if they show it signed before
    /// (`safety/recall.rs`).
    #[allow(clippy::too_many_arguments)]
    pub async fn spawn(
        name: PublicKey,
        secret: SecretKey,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        mempool: MempoolLink,
        tx_output: MeteredSender<CommittedBatch>,
        state_sync: StateSyncLink,
        emulation: Option<Arc<NetEmulation>>,
        missing_record: MissingRecord,
    ) -> io::Result<ConsensusHandle> {
        let authority = committee.own_authority(&name)?;
        let capacity = parameters.channel_capacity;
        // Peers' messages, decoded, waiting for the core: from votes of a hundred bytes to
        // checkpoint replies of megabytes, so bounded in bytes too.
        let (tx_message, rx_message, input_queue) =
            budgeted::channel(capacity, parameters.queue_budget_bytes());
        // The others hold messages of a known largest size, so their capacity bounds their
        // bytes: requests of a digest and a key, and blocks the core has checked (at most
        // `max_block_digests` digests and committee-sized certificates).
        let (tx_helper, rx_helper) = mpsc::channel(capacity);
        let (tx_loopback, rx_loopback) = mpsc::channel(capacity);
        let (tx_commit, rx_commit) = mpsc::channel(capacity);
        let MempoolLink {
            rx_digests,
            tx_mempool,
            quota,
        } = mempool;
        let (tx_fatal, rx_fatal) = watch::channel(None);
        let metrics = Arc::new(ConsensusMetrics::default());

        // Only members that prove their key get their messages read.
        let gate =
            Gate::for_committee(name, Purpose::Consensus, &committee).emulating(emulation.clone());
        let presence = gate.presence.clone();
        Receiver::spawn_with(
            listen_address(authority.consensus_address),
            ReceiverConfig {
                max_connections: parameters.max_connections,
                idle_timeout: Duration::from_millis(parameters.idle_timeout_ms),
                ..ReceiverConfig::gated(parameters.max_frame_size, gate)
            },
            handler::ConsensusHandler {
                tx_core: tx_message,
                tx_helper,
                peer: None,
            },
        )
        .await?;
        let credentials =
            Credentials::for_committee(name, secret.clone(), Purpose::Consensus, &committee)
                .emulating(emulation)
                .hearing(presence);
        // The core learns from QCs which rounds every peer holds; the committer frees batches
        // by it.
        let (peer_rounds, held_by_all) = payload::holders::PeerRounds::new(name, &committee);
        let direct_commits = sync::direct_commits::DirectCommits::default();

        sync::helper::Helper::spawn(
            name,
            committee.clone(),
            store.clone(),
            state_sync.checkpoints.clone(),
            direct_commits.clone(),
            rx_helper,
            SimpleSender::authenticated(
                DEFAULT_SIMPLE_QUEUE_CAPACITY,
                parameters.max_frame_size,
                credentials.clone(),
            )
            .with_max_bytes(parameters.queue_budget_bytes()),
        );
        commit::committer::Committer::spawn(
            store.clone(),
            payload::gc::GcWindow::new(&parameters),
            rx_commit,
            tx_output,
            metrics.clone(),
            commit::committer::CommitterLinks {
                held_by_all,
                progress: state_sync.progress.clone(),
                checkpoints: Some(state_sync.checkpoints.clone()),
                tx_fatal: tx_fatal.clone(),
                tx_mempool: tx_mempool.clone(),
                // By then the mempool has asked the block's author and every peer.
                patience: Duration::from_millis(parameters.sync_retry_delay),
            },
        );
        let senders = core::CoreSenders::authenticated(credentials, &parameters);
        core::Core::new(
            name,
            committee,
            parameters,
            store,
            SignatureService::new(secret),
            core::CoreChannels {
                rx_message,
                rx_loopback,
                tx_loopback,
                rx_digests,
                tx_commit,
                tx_mempool,
                quota,
                tx_fatal,
                senders,
                tx_restore: state_sync.restore,
                checkpoints: state_sync.checkpoints,
                progress: state_sync.progress,
                peer_rounds,
                direct_commits,
            },
            metrics.clone(),
        )
        .map_err(|e| io::Error::other(format!("consensus cannot start: {e}")))?
        .check_record(missing_record)
        .spawn();
        Ok(ConsensusHandle {
            metrics,
            fatal: rx_fatal,
            queues: vec![NamedChannel::new("core_input", input_queue)],
        })
    }
}
