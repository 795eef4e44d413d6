//! HotStuff (two-chain) over the mempool's batch digests.

mod aggregator;
mod committer;
mod core;
mod handler;
mod helper;
pub mod messages;
mod metrics;
mod payload;
mod proposer;
mod safety;
mod synchronizer;
mod timer;
pub mod wire;

pub use committer::CommittedBatch;
pub use messages::{Block, ConsensusMessage, Timeout, Vote, QC, TC};
pub use metrics::{ConsensusMetrics, ConsensusSnapshot};

use crate::config::{Committee, Parameters};
use crate::mempool::{Mempool, MempoolMetrics};
use crate::metered::MeteredSender;
use crate::network::{listen_address, Receiver};
use crate::store::Store;
use crypto::{PublicKey, SecretKey, SignatureService};
use std::io;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What a running consensus instance exposes besides its output channel.
#[derive(Clone)]
pub struct ConsensusHandle {
    pub metrics: Arc<ConsensusMetrics>,
    pub mempool: Arc<MempoolMetrics>,
}

pub struct Consensus;

impl Consensus {
    /// Starts the mempool and the HotStuff core of authority `name`; returns once every port is
    /// bound. Committed batches leave, in commit order, through `tx_output`.
    pub async fn spawn(
        name: PublicKey,
        secret: SecretKey,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        tx_output: MeteredSender<CommittedBatch>,
    ) -> io::Result<ConsensusHandle> {
        let authority = committee.authority(&name).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name} is not in the committee"),
            )
        })?;
        let capacity = parameters.channel_capacity;
        let (tx_message, rx_message) = mpsc::channel(capacity);
        let (tx_helper, rx_helper) = mpsc::channel(capacity);
        let (tx_loopback, rx_loopback) = mpsc::channel(capacity);
        let (tx_digests, rx_digests) = mpsc::channel(capacity);
        let (tx_commit, rx_commit) = mpsc::channel(capacity);
        let (tx_mempool, rx_mempool) = mpsc::channel(capacity);

        let metrics = Arc::new(ConsensusMetrics::default());
        let mempool_metrics = Arc::new(MempoolMetrics::default());

        Mempool::spawn(
            name,
            committee.clone(),
            parameters.clone(),
            store.clone(),
            rx_mempool,
            tx_digests,
            mempool_metrics.clone(),
        )
        .await?;

        Receiver::spawn(
            listen_address(authority.consensus_address),
            parameters.max_frame_size,
            handler::ConsensusHandler {
                tx_core: tx_message,
                tx_helper,
            },
        )
        .await?;

        helper::Helper::spawn(committee.clone(), store.clone(), rx_helper);
        committer::Committer::spawn(
            store.clone(),
            committer::GcWindow::new(&parameters),
            rx_commit,
            tx_output,
            metrics.clone(),
        );
        core::Core::spawn(
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
            },
            metrics.clone(),
        );
        Ok(ConsensusHandle {
            metrics,
            mempool: mempool_metrics,
        })
    }
}
