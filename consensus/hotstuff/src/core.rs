//! The HotStuff state machine: one actor that takes consensus messages, our mempool's digests and
//! its own timers in turn, and hands committed blocks to the committer.
//!
//! This is the two-chain variant (as in Jolteon / DiemBFT v4): a block commits once it and a
//! child of the next round are both certified. The decisions are the parts' (each with the
//! state it owns, tested alone): what we may vote for and must not forget (`safety::Voting`),
//! the round and its leader (`liveness::Pacemaker`), what a commit brings and the fork it must
//! not be (`commit::Committed`), which stored blocks leave the window
//! (`payload::pruning::BlockPruning`), what adopting a checkpoint decides (`sync::adoption`).
//! The core takes the inputs and acts on what the parts decide, reaching each through its
//! methods; its handlers below `core/` are named after the input they handle: a block
//! (`on_block.rs`: proposals, chains, blocks whose data arrived), a vote (`on_vote.rs`, with
//! casting our own), a timeout (`on_timeout.rs`: our timer's and members'), a certificate however
//! it arrives (`on_certificate.rs`), a checkpoint reply (`on_checkpoint.rs`), a vote record
//! request or reply (`on_record.rs`). Besides them: our own proposals (`proposing.rs`), what
//! follows blocks committing (`settle.rs`), and storing and pruning blocks (`storage.rs`). The
//! state the core keeps for two of them has files of its own, which the core holds without
//! reaching back into its handlers: our next proposal's (`proposals.rs`) and the vote records'
//! (`records.rs`).

mod on_block;
mod on_certificate;
mod on_checkpoint;
mod on_record;
mod on_timeout;
mod on_vote;
mod proposals;
mod proposing;
mod records;
mod settle;
mod storage;

#[cfg(test)]
mod tests;

use crate::aggregator::Aggregator;
use crate::commit::committer::ToCommitter;
use crate::commit::Committed;
use crate::error::{ConsensusError, FatalError};
use crate::liveness::Pacemaker;
use crate::messages::Block;
use crate::metrics::ConsensusMetrics;
use crate::payload::gc::GcWindow;
use crate::payload::holders::PeerRounds;
use crate::payload::pruning::BlockPruning;
use crate::payload::waiter::PayloadWaiter;
use crate::safety::witness::Witness;
use crate::safety::Voting;
use crate::sync::adoption::{Adopted, Adoption};
use crate::sync::direct_commits::DirectCommits;
use crate::sync::synchronizer::Synchronizer;
use crate::wire;
use crate::wire::ConsensusMessage;
use checkpoint::PipelineProgress;
use checkpoint::{Checkpoint, CheckpointSlot};
use config::{Committee, Parameters, Round};
use crypto::{Digest, Hash, PublicKey, SignatureService};
use mempool::{AuthorQuota, ConsensusMempoolMessage};
use network::handshake::Credentials;
use network::{
    CancelHandler, ReliableSender, SimpleSender, DEFAULT_RELIABLE_CAPACITY,
    DEFAULT_SIMPLE_QUEUE_CAPACITY,
};
use plumbing::budgeted::BudgetedReceiver;
use proposals::Proposals;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

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
    /// Members' uncommitted batches stored here (see `drain_uncommitted_batches`).
    quota: AuthorQuota,
    tx_fatal: watch::Sender<Option<FatalError>>,
    network: Broadcaster,

    voting: Voting,
    pacemaker: Pacemaker,
    proposals: Proposals,
    committed: Committed,
    pruning: BlockPruning,
    adoption: Adoption,
    /// What our own checkpoint, taken as our root while the core was built (a restart), left
    /// to settle: the core is built outside the runtime, so `start` settles it.
    resumed_root: Option<Adopted>,
    /// Fed with every QC the core verifies: tells the committer when every peer holds a batch.
    peer_rounds: PeerRounds,
    /// Members' signatures we hold, and our own record while we do not know it.
    records: records::Records,
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
    fn new(sender: ReliableSender) -> Self {
        Broadcaster {
            sender,
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
    /// The mempool's count of members' uncommitted batches, which commits drain.
    pub quota: AuthorQuota,
    /// Where the core reports the error that stopped it (see `FatalError`).
    pub tx_fatal: watch::Sender<Option<FatalError>>,
    /// How the core reaches its peers.
    pub senders: CoreSenders,
    /// Where a checkpoint adopted from peers goes to the application.
    pub tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
    /// Where the application publishes its checkpoints.
    pub checkpoints: CheckpointSlot,
    /// Fed with every QC the core verifies (see `PeerRounds`).
    pub peer_rounds: PeerRounds,
    /// Where the core records what made each direct commit (see `sync/direct_commits.rs`).
    pub direct_commits: DirectCommits,
    /// How far the application is behind (see `checkpoint::PipelineProgress`).
    pub progress: Arc<PipelineProgress>,
}

/// The core's two ways to its peers' consensus ports: its own messages (proposals, votes,
/// timeouts) through a reliable sender, the block sync's requests through a best-effort one.
pub struct CoreSenders {
    pub broadcast: ReliableSender,
    pub sync: SimpleSender,
}

impl CoreSenders {
    /// Senders that prove `credentials` to peers, whose consensus ports admit members only.
    pub fn authenticated(credentials: Credentials, parameters: &Parameters) -> Self {
        CoreSenders {
            broadcast: ReliableSender::authenticated(
                DEFAULT_RELIABLE_CAPACITY,
                parameters.max_frame_size,
                credentials.clone(),
            ),
            sync: SimpleSender::authenticated(
                DEFAULT_SIMPLE_QUEUE_CAPACITY,
                parameters.max_frame_size,
                credentials,
            )
            .with_max_bytes(parameters.queue_budget_bytes()),
        }
    }
}

/// One thing for the core to handle (see `Core::next_input`).
pub enum Input {
    Message(ConsensusMessage),
    /// A block whose batches or ancestors arrived.
    Loopback(Block),
    /// A digest of a batch our mempool got a quorum to hold.
    Digest(Digest),
    /// The round's timer fired.
    Timeout,
    /// A proposal held back on an idle chain is due.
    ProposalDue,
    /// Our vote record is unknown: time to ask again the members that have not answered.
    RecordDue,
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
        let mut pacemaker = Pacemaker::new(resumed_round, restarted, &committee, &parameters);
        // Under leader reputation, who leads the round after our high QC depends on the blocks
        // before it: a node restarted on its store knows them from there, or the others would
        // elect it to rounds it cannot tell it leads (each of them a timeout) until it had seen
        // a window of new blocks.
        // And what it stored is what it can show members that lost their vote record.
        let mut witness = Witness::default();
        let pruning = BlockPruning::scan(&store, GcWindow::new(&parameters), |block| {
            pacemaker.record_block(block);
            witness.block(block);
        })?;
        let records = records::Records::new(witness, channels.senders.sync.clone());
        let synchronizer = Synchronizer::spawn(
            name,
            committee.clone(),
            store.clone(),
            Duration::from_millis(parameters.sync_retry_delay),
            parameters.max_pending_sync_blocks,
            channels.tx_loopback.clone(),
            channels.senders.sync,
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
            network: Broadcaster::new(channels.senders.broadcast),
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
            quota: channels.quota,
            tx_fatal: channels.tx_fatal,
            voting,
            proposals: Proposals::new(channels.progress),
            committed: Committed::new(channels.direct_commits),
            pruning,
            resumed_root: None,
            peer_rounds: channels.peer_rounds,
            records,
        };
        core.resume_from_own_checkpoint()?;
        Ok(core)
    }

    /// Runs the core on its own task.
    pub fn spawn(self) {
        tokio::spawn(self.run());
    }

    async fn run(mut self) {
        if self.start().await.is_break() {
            return;
        }
        while let Some(input) = self.next_input().await {
            if self.handle(input).await.is_break() {
                return;
            }
        }
        info!("consensus core stopped");
    }

    /// What the core does before its first input: settles what a root taken while it was built
    /// skipped, and enters its first round.
    pub async fn start(&mut self) -> std::ops::ControlFlow<()> {
        if let Some(adopted) = self.resumed_root.take() {
            if let Err(e) = self.settle_adopted(adopted).await {
                warn!("cannot settle the blocks below our checkpoint: {e}");
            }
        }
        self.metrics
            .round
            .store(self.pacemaker.round(), Ordering::Relaxed);
        let started = match self.ask_for_record().await {
            Ok(()) => self.start_round().await,
            Err(e) => Err(e),
        };
        match started {
            Ok(()) => {}
            Err(ConsensusError::Fatal(e)) => {
                self.stop(e);
                return std::ops::ControlFlow::Break(());
            }
            Err(e) => warn!("starting our first round: {e}"),
        }
        std::ops::ControlFlow::Continue(())
    }

    /// The next input, `None` once every input is closed. The timers come first, then our own
    /// blocks' data and our mempool's digests, then peers' messages: a flood of messages must
    /// not hold back a timeout, and the internal inputs are bounded by what the messages made.
    /// (An order, rather than a random pick among ready inputs, also makes a run replayable:
    /// `twins`.)
    pub async fn next_input(&mut self) -> Option<Input> {
        let has_pending = self.proposals.pending.is_some();
        let asking = self.records.check.is_some();
        tokio::select! {
            biased;
            () = self.pacemaker.timer() => Some(Input::Timeout),
            () = &mut self.proposals.deadline, if has_pending => Some(Input::ProposalDue),
            () = &mut self.records.due, if asking => Some(Input::RecordDue),
            Some(block) = self.inputs.rx_loopback.recv() => Some(Input::Loopback(block)),
            Some(digest) = self.inputs.rx_digests.recv() => Some(Input::Digest(digest)),
            Some(message) = self.inputs.rx_message.recv() => Some(Input::Message(message)),
            else => None,
        }
    }

    /// Handles `input`, then what it may have made possible (a proposal once this node can tell
    /// it leads, our own blocks). `Break` once the core must stop (its fatal error published).
    pub async fn handle(&mut self, input: Input) -> std::ops::ControlFlow<()> {
        let result = match input {
            Input::Message(message) => match message {
                ConsensusMessage::Propose(block) => self.handle_proposal(block).await,
                ConsensusMessage::Vote(vote) => self.handle_vote(vote).await,
                ConsensusMessage::Timeout(timeout) => self.handle_timeout(timeout).await,
                ConsensusMessage::TC(tc) => self.handle_tc(tc).await,
                ConsensusMessage::Checkpoint(reply) => self.handle_checkpoint(reply).await,
                ConsensusMessage::Chain(blocks) => self.handle_chain(blocks).await,
                // Routed to the helper by the network handler; nothing to do here.
                ConsensusMessage::SyncRequest(..) | ConsensusMessage::CheckpointRequest(..) => {
                    Ok(())
                }
                ConsensusMessage::RecordRequest(origin) => self.answer_record_request(origin).await,
                ConsensusMessage::RecordReply(reply) => self.handle_record_reply(reply).await,
            },
            Input::Loopback(block) => {
                self.payload.resolved(&block.digest());
                self.process_block(&block).await
            }
            Input::Digest(digest) => {
                self.proposals.buffer.push(digest);
                let ready = self.has_payload();
                match self.proposals.pending.take_if(|_| ready) {
                    Some(tc) => self.propose(tc).await,
                    None => Ok(()),
                }
            }
            Input::Timeout => self.local_timeout_round().await,
            Input::ProposalDue => {
                let tc = self.proposals.pending.take().flatten();
                self.propose(tc).await
            }
            Input::RecordDue => self.record_due().await,
        };
        if let Err(e) = result {
            match e {
                ConsensusError::ChannelClosed => return std::ops::ControlFlow::Break(()),
                ConsensusError::Fatal(e) => {
                    self.stop(e);
                    return std::ops::ControlFlow::Break(());
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
                Err(ConsensusError::Fatal(e)) => {
                    self.stop(e);
                    return std::ops::ControlFlow::Break(());
                }
                Err(e) => warn!("own block {:?}: {e}", block),
            }
        }
        std::ops::ControlFlow::Continue(())
    }

    /// Where this core stands, for a report of a failed scenario.
    #[cfg(test)]
    pub(crate) fn describe(&self) -> String {
        format!(
            "round {}, high QC {}, last voted {}, committed {}, leader here {:?}, parked {}",
            self.pacemaker.round(),
            self.voting.high_qc().round,
            self.voting.last_voted_round(),
            self.committed.last_round(),
            self.pacemaker.round_leader(),
            self.synchronizer
                .counters()
                .parked
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// The leader this core names for `round` opened by `opening` (`None`: it cannot tell).
    #[cfg(test)]
    pub(crate) fn leader_for(
        &self,
        round: Round,
        opening: crate::liveness::leader::Opening<'_>,
    ) -> Option<PublicKey> {
        self.leader(round, opening)
    }

    /// Stops the core on `error`, telling whoever watches for it (nobody listening is no reason
    /// to go on).
    fn stop(&self, error: FatalError) {
        error!("{error}");
        let _ = self.tx_fatal.send(Some(error));
        info!("consensus core stopped");
    }

    fn keep_handlers(&mut self, handlers: Vec<CancelHandler>) {
        self.network.keep(self.pacemaker.round(), handlers);
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
