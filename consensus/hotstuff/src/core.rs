//! The HotStuff state machine: one actor that takes consensus messages, our mempool's digests and
//! its own timers in turn, and hands committed blocks to the committer.
//!
//! This is the two-chain variant (as in Jolteon / DiemBFT v4): a block commits once it and a
//! child of the next round are both certified. The core's concerns each have a file below
//! `core/`, with the state it owns: voting and what it must not forget across a crash
//! (`voting.rs`, whose rules are in `safety.rs`), the pacemaker (`pacemaker.rs`), our own
//! proposals (`proposing.rs`), the commit rule (`commit.rs`), pruning stored blocks
//! (`pruning.rs`) and adopting a checkpoint from peers (`adoption.rs`).

mod adoption;
mod commit;
mod pacemaker;
mod proposing;
mod pruning;
mod voting;

#[cfg(test)]
mod tests;

use super::aggregator::Aggregator;
use super::commit_proof::DirectCommits;
use super::committer::ToCommitter;
use super::error::{ConsensusError, FatalError};
use super::gc::GcWindow;
use super::holders::PeerRounds;
use super::messages::Block;
use super::metrics::ConsensusMetrics;
use super::payload::PayloadWaiter;
use super::synchronizer::Synchronizer;
use super::wire;
use super::wire::ConsensusMessage;
use adoption::Adoption;
use checkpoint::PipelineProgress;
use checkpoint::{Checkpoint, CheckpointSlot};
use commit::Committed;
use config::{Committee, Parameters, Round};
use crypto::{Digest, Hash, PublicKey, SignatureService};
use mempool::ConsensusMempoolMessage;
use network::handshake::Credentials;
use network::{
    CancelHandler, ReliableSender, SimpleSender, DEFAULT_RELIABLE_CAPACITY,
    DEFAULT_SIMPLE_QUEUE_CAPACITY,
};
use pacemaker::Pacemaker;
use plumbing::budgeted::BudgetedReceiver;
use proposing::Proposals;
use pruning::BlockPruning;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};
use voting::Voting;

/// Cancel handlers of reliable broadcasts are kept this many rounds, then dropped: by then the
/// message is moot, and a peer that missed it catches up through sync.
const KEEP_HANDLERS_ROUNDS: Round = 10;

pub struct Core {
    name: PublicKey,
    committee: Committee,
    parameters: Parameters,
    store: Store,
    signature_service: SignatureService,
    metrics: Arc<ConsensusMetrics>,
    synchronizer: Synchronizer,
    payload: PayloadWaiter,
    /// Votes and timeouts being counted into certificates.
    aggregator: Aggregator,
    inputs: Inputs,
    tx_commit: mpsc::Sender<ToCommitter>,
    tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    tx_fatal: watch::Sender<Option<FatalError>>,
    network: Broadcaster,

    voting: Voting,
    pacemaker: Pacemaker,
    proposals: Proposals,
    committed: Committed,
    pruning: BlockPruning,
    adoption: Adoption,
}

/// What the run loop waits on besides its timers.
struct Inputs {
    /// Peers' messages, within a byte budget (see `ConsensusHandler`).
    rx_message: BudgetedReceiver<ConsensusMessage>,
    /// Blocks whose batches or ancestors arrived (see `PayloadWaiter`, `Synchronizer`).
    rx_loopback: mpsc::Receiver<Block>,
    /// Digests of batches our mempool got a quorum to hold: what our blocks propose.
    rx_digests: mpsc::Receiver<Digest>,
}

/// Our reliable sender to the other members, with the handles that keep its messages queued.
struct Broadcaster {
    sender: ReliableSender,
    cancel_handlers: BTreeMap<Round, Vec<CancelHandler>>,
}

impl Broadcaster {
    fn new(credentials: Credentials, max_frame_size: usize) -> Self {
        Broadcaster {
            sender: ReliableSender::authenticated(
                DEFAULT_RELIABLE_CAPACITY,
                max_frame_size,
                credentials,
            ),
            cancel_handlers: BTreeMap::new(),
        }
    }

    fn keep(&mut self, round: Round, handlers: Vec<CancelHandler>) {
        self.cancel_handlers
            .entry(round)
            .or_default()
            .extend(handlers);
    }

    /// Drops the handles of messages sent more than `KEEP_HANDLERS_ROUNDS` before `round`.
    fn forget_before(&mut self, round: Round) {
        let keep = self
            .cancel_handlers
            .split_off(&round.saturating_sub(KEEP_HANDLERS_ROUNDS));
        self.cancel_handlers = keep;
    }
}

pub struct CoreChannels {
    pub rx_message: BudgetedReceiver<ConsensusMessage>,
    pub rx_loopback: mpsc::Receiver<Block>,
    pub tx_loopback: mpsc::Sender<Block>,
    pub rx_digests: mpsc::Receiver<Digest>,
    pub tx_commit: mpsc::Sender<ToCommitter>,
    pub tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    /// Where the core reports the error that stopped it (see `FatalError`).
    pub tx_fatal: watch::Sender<Option<FatalError>>,
    /// What the core's senders prove to peers, whose consensus ports admit members only.
    pub credentials: Credentials,
    /// Where a checkpoint adopted from peers goes to the application.
    pub tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
    /// Where the application publishes its checkpoints.
    pub checkpoints: CheckpointSlot,
    /// Fed with every QC the core verifies (see `PeerRounds`).
    pub peer_rounds: PeerRounds,
    /// Where the core records what made each direct commit (see `commit_proof.rs`).
    pub direct_commits: DirectCommits,
    /// How far the application is behind (see `checkpoint::PipelineProgress`).
    pub progress: Arc<PipelineProgress>,
}

impl Core {
    /// Builds the core without running it (its helpers do start): [`Core::spawn`] runs it, tests
    /// drive it directly. On a store that holds a safety state (a restart on a durable store)
    /// the core resumes from it.
    pub fn new(
        name: PublicKey,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        signature_service: SignatureService,
        channels: CoreChannels,
        metrics: Arc<ConsensusMetrics>,
    ) -> Result<Self, ConsensusError> {
        let (voting, resumed_round, restarted) = Voting::resume(&store)?;
        let mut pacemaker =
            Pacemaker::new(resumed_round, &committee, &parameters, channels.peer_rounds);
        // Under leader reputation, who leads the round after our high QC depends on the blocks
        // before it: a node restarted on its store knows them from there, or the others would
        // elect it to rounds it cannot tell it leads (each of them a timeout) until it had seen
        // a window of new blocks.
        let pruning = BlockPruning::scan(&store, GcWindow::new(&parameters), |block| {
            pacemaker.elector.record(block)
        })?;
        let synchronizer = Synchronizer::spawn(
            name,
            committee.clone(),
            store.clone(),
            Duration::from_millis(parameters.sync_retry_delay),
            parameters.max_pending_sync_blocks,
            channels.tx_loopback.clone(),
            SimpleSender::authenticated(
                DEFAULT_SIMPLE_QUEUE_CAPACITY,
                parameters.max_frame_size,
                channels.credentials.clone(),
            )
            .with_max_bytes(parameters.queue_budget_bytes()),
        );
        let payload = PayloadWaiter::new(
            store.clone(),
            channels.tx_mempool.clone(),
            channels.tx_loopback,
            GcWindow::new(&parameters),
        );
        let mut core = Core {
            name,
            aggregator: Aggregator::new(committee.clone()),
            pacemaker,
            adoption: Adoption::new(
                &committee,
                &parameters,
                channels.tx_restore,
                channels.checkpoints,
            ),
            network: Broadcaster::new(channels.credentials, parameters.max_frame_size),
            committee,
            parameters,
            store,
            signature_service,
            metrics,
            synchronizer,
            payload,
            inputs: Inputs {
                rx_message: channels.rx_message,
                rx_loopback: channels.rx_loopback,
                rx_digests: channels.rx_digests,
            },
            tx_commit: channels.tx_commit,
            tx_mempool: channels.tx_mempool,
            tx_fatal: channels.tx_fatal,
            voting,
            proposals: Proposals::new(channels.progress),
            committed: Committed::new(channels.direct_commits),
            pruning,
        };
        core.pacemaker.restarted = restarted;
        core.resume_from_own_checkpoint()?;
        Ok(core)
    }

    /// Runs the core on its own task.
    pub fn spawn(self) {
        tokio::spawn(self.run());
    }

    async fn run(mut self) {
        if let Err(e) = self.settle_skipped().await {
            warn!("cannot settle the blocks below our checkpoint: {e}");
        }
        self.metrics
            .round
            .store(self.pacemaker.round, Ordering::Relaxed);
        match self.start_round().await {
            Ok(()) => {}
            Err(ConsensusError::Fatal(e)) => return self.stop(e),
            Err(e) => warn!("starting our first round: {e}"),
        }
        loop {
            let result = tokio::select! {
                Some(message) = self.inputs.rx_message.recv() => match message {
                    ConsensusMessage::Propose(block) => self.handle_proposal(block).await,
                    ConsensusMessage::Vote(vote) => self.handle_vote(vote).await,
                    ConsensusMessage::Timeout(timeout) => self.handle_timeout(timeout).await,
                    ConsensusMessage::TC(tc) => self.handle_tc(tc).await,
                    ConsensusMessage::Checkpoint(reply) => self.handle_checkpoint(reply).await,
                    // Routed to the helper by the network handler; nothing to do here.
                    ConsensusMessage::SyncRequest(..) | ConsensusMessage::CheckpointRequest(..) => Ok(()),
                },
                Some(block) = self.inputs.rx_loopback.recv() => {
                    self.payload.resolved(&block.digest());
                    self.process_block(&block).await
                },
                Some(digest) = self.inputs.rx_digests.recv() => {
                    self.proposals.buffer.push(digest);
                    let ready = self.has_payload();
                    match self.proposals.pending.take_if(|_| ready) {
                        Some(tc) => self.propose(tc).await,
                        None => Ok(()),
                    }
                },
                () = &mut self.pacemaker.timer => self.local_timeout_round().await,
                () = &mut self.proposals.deadline, if self.proposals.pending.is_some() => {
                    let tc = self.proposals.pending.take().flatten();
                    self.propose(tc).await
                },
                else => break,
            };
            if let Err(e) = result {
                match e {
                    ConsensusError::ChannelClosed => break,
                    ConsensusError::Fatal(e) => {
                        error!("{e}");
                        // Nobody listening is no reason to go on: the core stops either way.
                        let _ = self.tx_fatal.send(Some(e));
                        break;
                    }
                    ConsensusError::Message(e) => warn!("rejected message: {e}"),
                    e => warn!("{e}"),
                }
            }
            // A block just handled may have completed the window that names this round's
            // leader (a no-op unless this node could not tell it).
            self.lead_once_known().await;
            while let Some(block) = self.proposals.own_blocks.pop_front() {
                match self.process_block(&block).await {
                    Ok(()) => {}
                    Err(ConsensusError::Fatal(e)) => return self.stop(e),
                    Err(e) => warn!("own block {:?}: {e}", block),
                }
            }
        }
        info!("consensus core stopped");
    }

    /// Stops the core on `error`, telling whoever watches for it (nobody listening is no reason
    /// to go on).
    fn stop(&self, error: FatalError) {
        error!("{error}");
        let _ = self.tx_fatal.send(Some(error));
        info!("consensus core stopped");
    }

    fn keep_handlers(&mut self, handlers: Vec<CancelHandler>) {
        self.network.keep(self.pacemaker.round, handlers);
    }

    async fn broadcast(&mut self, message: &ConsensusMessage) -> Result<(), ConsensusError> {
        let bytes = wire::encode(message)?;
        let addresses = self
            .committee
            .others(&self.name, |a| a.consensus_address)
            .into_iter()
            .map(|(_, address)| address)
            .collect();
        let handlers = self.network.sender.broadcast(addresses, bytes).await;
        self.keep_handlers(handlers);
        Ok(())
    }
}
