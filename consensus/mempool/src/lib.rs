//! The mempool: turns client transactions into batches, spreads them to every authority and
//! hands consensus the digests of batches a quorum holds; fetches the batches of others' blocks
//! this node lacks.
//!
//! ```text
//! clients ─► tx_receiver ─► ingress check ─► batch_maker ─► quorum_waiter ─► digests to consensus
//!                               │ store + broadcast (ReliableSender)
//! peers ─► peer_handler ─► store (batches, acked) | helper (requests) ─► requestor
//! consensus ─► synchronizer ─► batch requests to the author, then to random peers
//! ```
//! Actors are tasks connected by bounded channels of `channel_capacity`; the queues whose
//! messages vary in size are bounded in bytes too (the clients' chunks, peers' batch requests,
//! what waits for each peer). Batches stay `Bytes` from the builder to the store and to every
//! peer.
//!
//! It must not know how consensus orders the batches: consensus asks it for batches and tells it
//! what it may forget (`ConsensusMempoolMessage`), and what a transaction means is the executor's
//! business (transactions stay opaque bytes).

pub mod attest;
mod attester;
mod backlog;
mod batch_maker;
mod checked;
mod from_consensus;
mod helper;
mod ingress;
mod message;
mod metrics;
mod peer_handler;
mod quorum_waiter;
mod quota;
mod samples;
mod synchronizer;
mod tx_chunk;
mod tx_receiver;

#[cfg(test)]
#[global_allocator]
static ALLOCATOR: plumbing::test_alloc::Counting = plumbing::test_alloc::Counting;

pub use checked::CheckedBatches;
pub use from_consensus::ConsensusMempoolMessage;
pub use ingress::CheckTransactions;
pub use message::{MempoolMessage, MessageError};
pub use metrics::MempoolMetrics;
pub use quota::{Admission, AuthorQuota};
pub use samples::{DetectSample, ReportHop, SampleHooks};
pub use tx_receiver::{TxReceiverHandle, MAX_TRANSACTION_SIZE};

use attest::{Attesting, CheckQueue, Limits, Sequences};
use attester::Attester;
use backlog::Backlog;
use batch::{HEADER_LEN, TX_PREFIX_LEN};
use batch_maker::{BatchMaker, OwnAttesting};
use config::{Committee, Parameters};
use crypto::{Digest, PublicKey, SecretKey};
use helper::Helper;
use ingress::IngressCheck;
use network::handshake::{Credentials, Gate, Purpose};
use network::{
    listen_address, NetEmulation, Receiver, ReceiverConfig, ReliableSender, SimpleSender,
    DEFAULT_SIMPLE_QUEUE_CAPACITY,
};
use peer_handler::{PeerAttesting, PeerHandler};
use plumbing::budgeted;
use plumbing::metered::NamedChannel;
use quorum_waiter::QuorumWaiter;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use synchronizer::Synchronizer;
use tokio::sync::mpsc;
use tx_receiver::TxReceiver;

pub struct Mempool;

/// The node's check of its clients' transactions before they are sealed (modes with
/// signatures), and where the batch maker notes the batches it sealed from checked
/// transactions only, for the stage that checks committed batches (see `checked.rs`).
#[derive(Clone)]
pub struct Ingress {
    pub check: Arc<CheckTransactions>,
    pub checked: CheckedBatches,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ingress")
    }
}

/// What a running mempool exposes: its queues' metrics (`batch_requests`: peers' batch requests
/// waiting for the helper, bounded in bytes), and its clients' port, to drain at the node's stop.
pub struct MempoolHandle {
    pub queues: Vec<NamedChannel>,
    /// The batches each member has stored here uncommitted: the consensus core drains it as it
    /// commits (see `AuthorQuota`).
    pub quota: AuthorQuota,
    pub clients: TxReceiverHandle,
}

impl Mempool {
    /// Binds the transactions port and the mempool (peer) port of `name` from the committee,
    /// spawns every actor, returns once both ports are bound. Digests of this node's batches,
    /// once a quorum (2f+1 stake, self included) has acknowledged them, go out on
    /// `tx_consensus`. `samples`: how to find and report latency samples (none: not looked for).
    ///
    /// Ports are bound on every interface (the committee's IP is where peers reach us, which
    /// behind NAT, as on cloud hosts, is not an address of this machine).
    ///
    /// The mempool port admits committee members only, each proving its key (`secret` proves
    /// ours to the others). With `emulation`, links to the other members follow its latencies
    /// and partitions (the transactions port never does).
    ///
    /// With `ingress`, client transactions are checked before they are sealed and the invalid
    /// ones dropped (`ingress_invalid_txs`); without it (`hotstuff`: opaque transactions) they
    /// go to the batch maker as they were read.
    #[allow(clippy::too_many_arguments)]
    pub async fn spawn(
        name: PublicKey,
        secret: SecretKey,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        rx_consensus: mpsc::Receiver<ConsensusMempoolMessage>,
        tx_consensus: mpsc::Sender<Digest>,
        metrics: Arc<MempoolMetrics>,
        samples: Option<SampleHooks>,
        emulation: Option<Arc<NetEmulation>>,
        attesting: Option<Attesting>,
        ingress: Option<Ingress>,
    ) -> io::Result<MempoolHandle> {
        let authority = committee.own_authority(&name)?;
        let capacity = parameters.channel_capacity;
        let (tx_batch_maker, rx_batch_maker) = mpsc::channel(capacity);
        let (tx_quorum_waiter, rx_quorum_waiter) = mpsc::channel(capacity);
        // Batch requests vary from one digest to `max_request_digests`: bounded in bytes too.
        let (tx_helper, rx_helper, helper_queue) =
            budgeted::channel(capacity, parameters.queue_budget_bytes());
        // Batches to attest (`--verify=attested`) wait within a byte budget as well: a few
        // batches, so that statements come soon after their batches (see `attest/queue.rs`).
        let (tx_attester, rx_attester, attester_queue) = budgeted::channel(
            capacity,
            ATTESTER_QUEUE_BATCHES * max_batch_bytes(&parameters),
        );
        let check_queue =
            CheckQueue::new((ATTESTER_BEHIND_BATCHES * max_batch_bytes(&parameters)) as u64);

        let idle_timeout = Duration::from_millis(parameters.idle_timeout_ms);
        let backlog = Backlog::new(parameters.max_uncommitted_bytes, metrics.clone());
        // The chunks on their way to the batch maker keep their room in the port's queue
        // through the ingress check, so the check is within the port's bound in bytes.
        let tx_clients = match &ingress {
            Some(ingress) => {
                let (tx_ingress, rx_ingress) = mpsc::channel(capacity);
                IngressCheck::spawn(
                    ingress.check.clone(),
                    rx_ingress,
                    tx_batch_maker,
                    metrics.clone(),
                );
                tx_ingress
            }
            None => tx_batch_maker,
        };
        let (_, tx_receiver) = TxReceiver::spawn(
            listen_address(authority.transactions_address),
            max_transaction_size(&parameters),
            parameters.max_connections,
            idle_timeout,
            tx_clients,
            metrics.clone(),
        )
        .await?;
        // The mempool sees the batch namespace only.
        let store = store.batches();
        let quota = AuthorQuota::new(
            parameters.max_uncommitted_batches_per_author,
            parameters.gc_depth,
        )
        .attesting(attest_bytes_per_author(&parameters));
        let handler = PeerHandler {
            store: store.clone(),
            metrics: metrics.clone(),
            tx_helper,
            max_request_digests: parameters.max_request_digests,
            quota: quota.clone(),
            author: None,
            samples: samples.clone(),
            attesting: attesting.as_ref().map(|attesting| PeerAttesting {
                table: attesting.table.clone(),
                tx_attester: tx_attester.clone(),
                queue: check_queue.clone(),
                sequences: Sequences::new(&committee),
            }),
        };
        let gate =
            Gate::for_committee(name, Purpose::Mempool, &committee).emulating(emulation.clone());
        let presence = gate.presence.clone();
        let config = ReceiverConfig {
            max_connections: parameters.max_connections,
            idle_timeout,
            ..ReceiverConfig::gated(parameters.max_frame_size, gate)
        };
        if let Err(e) =
            Receiver::spawn_with(listen_address(authority.mempool_address), config, handler).await
        {
            // Do not leave the transactions port bound by a mempool that failed to start.
            tx_receiver.abort();
            return Err(e);
        }

        let credentials =
            Credentials::for_committee(name, secret.clone(), Purpose::Mempool, &committee)
                .emulating(emulation)
                .hearing(presence);
        let peers = committee
            .others(&name, |a| a.mempool_address)
            .into_iter()
            .map(|(peer, address)| (address, committee.stake(&peer)))
            .collect();
        BatchMaker::spawn(
            parameters.batch_size,
            Duration::from_millis(parameters.max_batch_delay),
            peers,
            store.clone(),
            metrics.clone(),
            samples.clone(),
            rx_batch_maker,
            tx_quorum_waiter,
            // Unacknowledged batches kept per peer: a dead peer costs at most this many bytes.
            ReliableSender::authenticated(capacity, parameters.max_frame_size, credentials.clone())
                .with_max_bytes(peer_buffer_bytes(&parameters)),
            backlog.clone(),
            attesting.as_ref().map(|attesting| OwnAttesting {
                name,
                tx_attester: tx_attester.clone(),
                table: attesting.table.clone(),
                queue: check_queue.clone(),
            }),
            ingress.map(|ingress| ingress.checked),
        );
        QuorumWaiter::spawn(
            committee.stake(&name),
            committee.quorum_threshold(),
            rx_quorum_waiter,
            tx_consensus,
            samples,
            backlog.clone(),
            attesting.as_ref().map(|attesting| attesting.table.clone()),
            metrics.clone(),
        );
        // Batch replies and requests, best effort: what waits for one peer is bounded as the
        // batch maker's unacknowledged batches are; beyond it replies are dropped and asked for
        // again.
        let network = SimpleSender::authenticated(
            DEFAULT_SIMPLE_QUEUE_CAPACITY,
            parameters.max_frame_size,
            credentials,
        )
        .with_max_bytes(peer_buffer_bytes(&parameters));
        let mut queues = vec![NamedChannel::new("batch_requests", helper_queue)];
        if let Some(attesting) = attesting {
            let peers = committee
                .others(&name, |a| a.mempool_address)
                .into_iter()
                .map(|(_, address)| address)
                .collect();
            Attester::spawn(
                name,
                secret,
                attesting,
                peers,
                network.clone(),
                rx_attester,
                check_queue,
                metrics,
            );
            queues.push(NamedChannel::new("batches_to_attest", attester_queue));
        }
        drop(tx_attester);
        Helper::spawn(
            committee.clone(),
            store.clone(),
            rx_helper,
            network.clone(),
            parameters.max_request_digests,
        );
        Synchronizer::spawn(
            name,
            committee,
            store,
            parameters.gc_depth,
            Duration::from_millis(parameters.sync_retry_delay),
            parameters.sync_retry_nodes,
            rx_consensus,
            network,
            parameters.max_request_digests,
            backlog,
        );
        Ok(MempoolHandle {
            queues,
            quota,
            clients: tx_receiver,
        })
    }
}

/// Bytes of batches kept per peer until it acknowledges them. Room for several backlogs' worth,
/// so a peer that is merely slow still gets every batch through its connection (rather than by
/// requests when a block names them); a dead peer holds no more than this.
fn peer_buffer_bytes(parameters: &Parameters) -> usize {
    (parameters.max_uncommitted_bytes as usize)
        .saturating_mul(8)
        .max(2 * parameters.max_frame_size)
}

/// The largest batch an honest author seals, in bytes: a batch is sealed once it reaches
/// `batch_size`, so it overflows it by one transaction at most.
pub fn max_batch_bytes(parameters: &Parameters) -> usize {
    HEADER_LEN + parameters.batch_size + TX_PREFIX_LEN + max_transaction_size(parameters)
}

/// What a node's table of statements holds (`--verify=attested`): a statement names at most as
/// many transactions as the fullest honest batch holds (every one of them at its smallest, its
/// length prefix alone).
pub fn attest_limits(parameters: &Parameters) -> Limits {
    let max_batch_txs =
        (parameters.batch_size + TX_PREFIX_LEN + max_transaction_size(parameters)) / TX_PREFIX_LEN;
    Limits {
        max_batch_txs: u32::try_from(max_batch_txs).unwrap_or(u32::MAX),
        max_batch_bytes: max_batch_bytes(parameters),
        ..Limits::default()
    }
}

/// The attester's queue of batches holds this many of the largest batches; peers' connections
/// wait beyond it.
const ATTESTER_QUEUE_BATCHES: usize = 4;
/// Past this many of the largest batches waiting for the attester or being checked, the batch
/// maker takes no client transactions.
const ATTESTER_BEHIND_BATCHES: usize = 2;

/// The bytes of a member's uncommitted batches a node attests: twice what an honest author may
/// have uncommitted (its backlog, overflowing by a batch), for the commits it hears of before
/// the attester does.
fn attest_bytes_per_author(parameters: &Parameters) -> u64 {
    2 * (parameters.max_uncommitted_bytes + max_batch_bytes(parameters) as u64)
}

/// The largest transaction accepted from clients: bounded by [`MAX_TRANSACTION_SIZE`], by the
/// batch size, and so that a batch that overflows `batch_size` by one transaction still fits in
/// a frame.
pub fn max_transaction_size(parameters: &Parameters) -> usize {
    let envelope = 1 + HEADER_LEN + TX_PREFIX_LEN;
    MAX_TRANSACTION_SIZE.min(parameters.batch_size).min(
        parameters
            .max_frame_size
            .saturating_sub(parameters.batch_size + envelope),
    )
}

#[cfg(test)]
mod tests;
