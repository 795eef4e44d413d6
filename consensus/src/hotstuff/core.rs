//! The HotStuff state machine: voting, certificates, the pacemaker and the commit rule.
//!
//! This is the two-chain variant (as in Jolteon / DiemBFT v4): a block commits once it and a
//! child of the next round are both certified. The voting rules that make it safe live in
//! `safety.rs`.

use super::aggregator::{Aggregator, AggregatorError};
use super::checkpoint::{Checkpoint, CheckpointReply, CheckpointSlot};
use super::commit_proof::DirectCommits;
use super::committer::ToCommitter;
use super::error::{ConsensusError, FatalError};
use super::gc::GcWindow;
use super::holders::PeerRounds;
use super::leader::{LeaderElector, Opening};
use super::messages::{Block, ConsensusMessage, MessageError, Timeout, Vote, QC, TC};
use super::metrics::ConsensusMetrics;
use super::payload::PayloadWaiter;
use super::progress::PipelineProgress;
use super::proposer::PayloadBuffer;
use super::safety::{self, SafetyRules};
use super::safety_state::{SafetyState, SafetyStateError, SafetyStore};
use super::state_sync::{Adopted, StateSync};
use super::synchronizer::Synchronizer;
use super::timer::Timer;
use super::wire;
use crate::config::{Committee, Parameters, Round, Stake};
use crate::mempool::batch::now_ms;
use crate::mempool::ConsensusMempoolMessage;
use crate::network::handshake::Credentials;
use crate::network::{
    CancelHandler, ReliableSender, SimpleSender, DEFAULT_RELIABLE_CAPACITY,
    DEFAULT_SIMPLE_QUEUE_CAPACITY,
};
use crate::store::Store;
use crypto::{Digest, Hash, PublicKey, SignatureService};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep, Instant, Sleep};
use tracing::{debug, error, info, warn};

/// Cancel handlers of reliable broadcasts are kept this many rounds, then dropped: by then the
/// message is moot, and a peer that missed it catches up through sync.
const KEEP_HANDLERS_ROUNDS: Round = 10;

pub struct Core {
    name: PublicKey,
    committee: Committee,
    parameters: Parameters,
    store: Store,
    signature_service: SignatureService,
    synchronizer: Synchronizer,
    payload: PayloadWaiter,
    aggregator: Aggregator,
    rx_message: mpsc::Receiver<ConsensusMessage>,
    rx_loopback: mpsc::Receiver<Block>,
    rx_digests: mpsc::Receiver<Digest>,
    tx_commit: mpsc::Sender<ToCommitter>,
    tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    tx_fatal: watch::Sender<Option<FatalError>>,
    /// Where an adopted checkpoint goes to the application (see `StateSyncLink`).
    tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
    /// The application's latest checkpoint: its block is never pruned (peers may ask for it, and
    /// a restart on a durable store resumes from it).
    checkpoints: CheckpointSlot,
    state_sync: StateSync,
    metrics: Arc<ConsensusMetrics>,
    /// How far the application is behind: past `max_unexecuted_bytes`, our blocks carry no
    /// batches (see `progress.rs`).
    progress: Arc<PipelineProgress>,

    round: Round,
    safety: SafetyRules,
    /// Where `safety`, `last_proposed_round` and `high_qc` are kept across restarts.
    safety_store: SafetyStore,
    last_committed_round: Round,
    last_committed: Digest,
    /// Our vote of the current round, re-broadcast if the round times out (see
    /// `local_timeout_round`).
    last_vote: Option<Vote>,
    /// An honest leader proposes once per round, however many certificates reach it.
    last_proposed_round: Round,
    high_qc: QC,
    /// Per member, the highest round above ours (and within the window) it sent us a valid
    /// timeout for: what timeout joining counts (see `join_timeouts`). One entry per member
    /// at most, whatever the rounds; the timeouts themselves are in the aggregator.
    timeout_rounds: HashMap<PublicKey, Round>,
    /// Who signed which certified rounds: tells the committer when every peer holds a batch.
    peer_rounds: PeerRounds,
    /// The QCs that made blocks commit, from which the helper proves our checkpoint's block
    /// committed.
    direct_commits: DirectCommits,
    /// Who leads each round (see `leader.rs`).
    elector: LeaderElector,
    /// The leader of the current round, if this node can tell: whom its timeout blames.
    round_leader: Option<PublicKey>,
    timer: Timer,
    network: ReliableSender,
    cancel_handlers: BTreeMap<Round, Vec<CancelHandler>>,
    buffer: PayloadBuffer,
    /// Our own blocks, processed like any received block once the current event is handled.
    own_blocks: VecDeque<Block>,
    /// Digests of the blocks this core stored, by round, so they can be deleted once they leave
    /// the GC window (see `prune_floor`).
    stored_blocks: BTreeMap<Round, Vec<Digest>>,
    /// (round, time) of recent commits, and the highest round committed longer ago than the
    /// GC window's time: what bounds block pruning by time.
    commit_times: VecDeque<(Round, Instant)>,
    aged_commit_round: Round,
    /// A proposal we hold back while the chain is idle (see `should_wait`).
    pending_proposal: Option<Option<TC>>,
    proposal_deadline: Pin<Box<Sleep>>,
    /// Blocks that committed without passing through `commit` (below a checkpoint taken as our
    /// root), whose batches the mempool and the committer have yet to hear of (see
    /// `settle_skipped`): the core is built outside the runtime, so a root taken there is
    /// announced once it runs.
    skipped: Vec<Block>,
}

pub struct CoreChannels {
    pub rx_message: mpsc::Receiver<ConsensusMessage>,
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
    /// How far the application is behind (see `progress.rs`).
    pub progress: Arc<PipelineProgress>,
}

impl Core {
    pub fn spawn(
        name: PublicKey,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        signature_service: SignatureService,
        channels: CoreChannels,
        metrics: Arc<ConsensusMetrics>,
    ) -> Result<(), ConsensusError> {
        let core = Self::new(
            name,
            committee,
            parameters,
            store,
            signature_service,
            channels,
            metrics,
        )?;
        tokio::spawn(core.run());
        Ok(())
    }

    /// Builds the core without running it (its helpers do start); tests drive it directly. On a
    /// store that holds a safety state (a restart on a durable store) the core resumes from it.
    fn new(
        name: PublicKey,
        committee: Committee,
        parameters: Parameters,
        store: Store,
        signature_service: SignatureService,
        channels: CoreChannels,
        metrics: Arc<ConsensusMetrics>,
    ) -> Result<Self, ConsensusError> {
        let mut safety_store = SafetyStore::new(store.safety());
        let resumed = safety_store.load()?;
        if let Some(state) = &resumed {
            info!(
                "resuming from the stored safety state: last voted round {}, last proposed \
                 round {}, high QC of round {}",
                state.last_voted_round, state.last_proposed_round, state.high_qc.round
            );
        }
        let resumed = resumed.unwrap_or_default();
        // Blocks a durable store kept from before a restart: tracked like our own, so they are
        // pruned once they leave the GC window instead of staying on disk for ever.
        let mut stored_blocks: BTreeMap<Round, Vec<Digest>> = BTreeMap::new();
        for (digest, bytes) in store.blocks().scan()? {
            match wire::decode_block(&bytes) {
                Ok(block) => stored_blocks.entry(block.round).or_default().push(digest),
                Err(e) => {
                    // Tracked as of round 0, so the first pruning deletes it.
                    warn!("stored block {digest} does not decode ({e}); deleting it");
                    stored_blocks.entry(0).or_default().push(digest);
                }
            }
        }
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
            ),
        );
        let max_frame_size = parameters.max_frame_size;
        let payload = PayloadWaiter::new(
            store.clone(),
            channels.tx_mempool.clone(),
            channels.tx_loopback,
            GcWindow::new(&parameters),
        );
        // Asked again each timeout: by then peers are at their next checkpoint, or the first
        // request's replies were lost.
        let state_sync = StateSync::new(
            committee.clone(),
            Duration::from_millis(parameters.timeout_delay),
        );
        let elector = LeaderElector::new(parameters.leader, &committee, parameters.leader_window);
        let mut core = Core {
            name,
            aggregator: Aggregator::new(committee.clone()),
            committee,
            timer: Timer::new(Duration::from_millis(parameters.timeout_delay)),
            parameters,
            store,
            signature_service,
            synchronizer,
            payload,
            rx_message: channels.rx_message,
            rx_loopback: channels.rx_loopback,
            rx_digests: channels.rx_digests,
            tx_commit: channels.tx_commit,
            tx_mempool: channels.tx_mempool,
            tx_fatal: channels.tx_fatal,
            tx_restore: channels.tx_restore,
            checkpoints: channels.checkpoints,
            state_sync,
            metrics,
            progress: channels.progress,
            round: resumed.resume_round(),
            safety: SafetyRules::resume(resumed.last_voted_round),
            safety_store,
            last_vote: None,
            last_proposed_round: resumed.last_proposed_round,
            last_committed_round: 0,
            last_committed: Block::genesis().qc.hash,
            high_qc: resumed.high_qc,
            timeout_rounds: HashMap::new(),
            peer_rounds: channels.peer_rounds,
            direct_commits: channels.direct_commits,
            elector,
            round_leader: None,
            network: ReliableSender::authenticated(
                DEFAULT_RELIABLE_CAPACITY,
                max_frame_size,
                channels.credentials,
            ),
            cancel_handlers: BTreeMap::new(),
            buffer: PayloadBuffer::default(),
            own_blocks: VecDeque::new(),
            stored_blocks,
            commit_times: VecDeque::new(),
            aged_commit_round: 0,
            pending_proposal: None,
            proposal_deadline: Box::pin(sleep(Duration::ZERO)),
            skipped: Vec::new(),
        };
        // A restart on a durable store: resume from our own last checkpoint, if its block is
        // still stored (peers may have deleted what we would need to replay the chain, and when
        // the whole committee restarts nobody else has a checkpoint to give).
        if let Some(checkpoint) = CheckpointSlot::stored(&core.store)? {
            match core.synchronizer.stored_block(&checkpoint.block)? {
                Some(block) => {
                    info!(
                        "resuming from our own checkpoint of round {} ({} bytes)",
                        checkpoint.round,
                        checkpoint.state.len()
                    );
                    core.checkpoints.publish(checkpoint.clone());
                    core.take_root(block, checkpoint)?;
                }
                None => warn!(
                    "our stored checkpoint of round {} has lost its block; not resuming from it",
                    checkpoint.round
                ),
            }
        }
        Ok(core)
    }

    /// Writes what must survive a crash (see `safety_state.rs`); called before a vote, timeout
    /// or proposal leaves the node, which must not leave if this fails.
    async fn persist_safety(&mut self) -> Result<(), SafetyStateError> {
        let state = self.safety_state();
        self.safety_store.save(state).await
    }

    fn safety_state(&self) -> SafetyState {
        SafetyState {
            last_voted_round: self.safety.last_voted_round(),
            last_proposed_round: self.last_proposed_round,
            high_qc: self.high_qc.clone(),
        }
    }

    async fn run(mut self) {
        if let Err(e) = self.settle_skipped().await {
            warn!("cannot settle the blocks below our checkpoint: {e}");
        }
        self.metrics.round.store(self.round, Ordering::Relaxed);
        // The leader of the first round proposes without waiting for a certificate.
        let anchor = self.high_qc.hash;
        self.enter_round_opened_by(Opening::Qc(&anchor));
        if self.is_leader(self.round, Opening::Qc(&anchor)) {
            self.try_propose(None).await;
        }
        loop {
            let result = tokio::select! {
                Some(message) = self.rx_message.recv() => match message {
                    ConsensusMessage::Propose(block) => self.handle_proposal(block).await,
                    ConsensusMessage::Vote(vote) => self.handle_vote(vote).await,
                    ConsensusMessage::Timeout(timeout) => self.handle_timeout(timeout).await,
                    ConsensusMessage::TC(tc) => self.handle_tc(tc).await,
                    ConsensusMessage::Checkpoint(reply) => self.handle_checkpoint(reply).await,
                    // Routed to the helper by the network handler; nothing to do here.
                    ConsensusMessage::SyncRequest(..) | ConsensusMessage::CheckpointRequest(..) => Ok(()),
                },
                Some(block) = self.rx_loopback.recv() => {
                    self.payload.resolved(&block.digest());
                    self.process_block(&block).await
                },
                Some(digest) = self.rx_digests.recv() => {
                    self.buffer.push(digest);
                    let ready = self.has_payload();
                    match self.pending_proposal.take_if(|_| ready) {
                        Some(tc) => self.propose(tc).await,
                        None => Ok(()),
                    }
                },
                () = &mut self.timer => self.local_timeout_round().await,
                () = &mut self.proposal_deadline, if self.pending_proposal.is_some() => {
                    let tc = self.pending_proposal.take().flatten();
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
            while let Some(block) = self.own_blocks.pop_front() {
                match self.process_block(&block).await {
                    Ok(()) => {}
                    Err(ConsensusError::Fatal(e)) => {
                        error!("{e}");
                        let _ = self.tx_fatal.send(Some(e));
                        info!("consensus core stopped");
                        return;
                    }
                    Err(e) => warn!("own block {:?}: {e}", block),
                }
            }
        }
        info!("consensus core stopped");
    }

    fn keep_handlers(&mut self, handlers: Vec<CancelHandler>) {
        self.cancel_handlers
            .entry(self.round)
            .or_default()
            .extend(handlers);
    }

    async fn broadcast(&mut self, message: &ConsensusMessage) -> Result<(), ConsensusError> {
        let bytes = wire::encode(message)?;
        let addresses = self
            .committee
            .others(&self.name, |a| a.consensus_address)
            .into_iter()
            .map(|(_, address)| address)
            .collect();
        let handlers = self.network.broadcast(addresses, bytes).await;
        self.keep_handlers(handlers);
        Ok(())
    }

    // ---- pacemaker -------------------------------------------------------------------------

    async fn local_timeout_round(&mut self) -> Result<(), ConsensusError> {
        warn!("timeout in round {}", self.round);
        // First: whatever fails below, the next attempt is a timeout delay away. A timer left
        // expired fires again at once, and a safety write that keeps failing (a full disk) would
        // spin the core and flood the log.
        self.timer.reset();
        self.metrics.record_timeout(self.round_leader);
        self.safety.timed_out(self.round);
        self.persist_safety().await?;
        // Votes go to the next leader only. If that leader is down, the block we voted for
        // would never be certified and its batches would wait for a later proposal of the same
        // node, which with round-robin leaders lands before the dead leader again: that node
        // would starve. Sending our vote to everyone lets the others certify the block anyway,
        // so the TC that follows carries its QC. (A vote is a vote: this changes no safety
        // argument, only who gets to count it.)
        if let Some(vote) = self.last_vote.take().filter(|v| v.round == self.round) {
            self.broadcast(&ConsensusMessage::Vote(vote.clone()))
                .await?;
            if !self.is_leader(self.round + 1, Opening::Qc(&vote.hash)) {
                self.handle_vote(vote).await?;
            }
        }
        let timeout = Timeout::new(
            self.high_qc.clone(),
            self.round,
            self.name,
            &self.signature_service,
        )
        .await;
        self.broadcast(&ConsensusMessage::Timeout(timeout.clone()))
            .await?;
        self.handle_timeout(timeout).await
    }

    async fn advance_round(&mut self, round: Round) {
        if round < self.round {
            return;
        }
        self.timer.reset();
        self.round = round + 1;
        self.metrics.round.store(self.round, Ordering::Relaxed);
        debug!("moved to round {}", self.round);
        self.aggregator.cleanup(round);
        let current = self.round;
        self.timeout_rounds.retain(|_, r| *r > current);
        // A proposal held back for an earlier round is moot.
        self.pending_proposal = None;
        let keep = self
            .cancel_handlers
            .split_off(&self.round.saturating_sub(KEEP_HANDLERS_ROUNDS));
        self.cancel_handlers = keep;
    }

    /// `qc` was verified by the caller (or assembled here from verified votes).
    fn update_high_qc(&mut self, qc: &QC) {
        self.peer_rounds.certified(qc);
        if qc.round > self.high_qc.round {
            self.high_qc = qc.clone();
        }
    }

    async fn process_qc(&mut self, qc: &QC) {
        let moved = qc.round >= self.round;
        self.advance_round(qc.round).await;
        self.update_high_qc(qc);
        if moved {
            self.enter_round_opened_by(Opening::Qc(&qc.hash));
        }
    }

    /// The leader of `round`, opened by `opening`, if this node can tell (see `leader.rs`).
    fn leader(&self, round: Round, opening: Opening<'_>) -> Option<PublicKey> {
        self.elector.leader(round, opening)
    }

    fn is_leader(&self, round: Round, opening: Opening<'_>) -> bool {
        self.leader(round, opening) == Some(self.name)
    }

    /// Notes who leads the round just entered through `opening` (its timeout, if any, blames
    /// that leader; the METRICS line shows it).
    fn enter_round_opened_by(&mut self, opening: Opening<'_>) {
        self.round_leader = self.leader(self.round, opening);
        self.metrics.set_leader(self.round_leader);
    }

    // ---- proposing ---------------------------------------------------------------------------

    /// Whether our application is too far behind for our blocks to carry batches.
    fn application_behind(&self) -> bool {
        self.progress.behind() > self.parameters.max_unexecuted_bytes
    }

    /// Whether our next block may carry batches: some are queued and the application keeps up.
    fn has_payload(&self) -> bool {
        !self.buffer.is_empty() && !self.application_behind()
    }

    /// True when proposing now would only add an empty block to an idle chain: no batch to
    /// propose, and neither of the two blocks the next commit would need carries a payload.
    fn should_wait(&self) -> Result<bool, ConsensusError> {
        if self.has_payload() {
            return Ok(false);
        }
        let Some(b1) = self.synchronizer.stored_block(&self.high_qc.hash)? else {
            return Ok(false);
        };
        if !b1.payload.is_empty() && b1.round > self.last_committed_round {
            return Ok(false);
        }
        let Some(b0) = self.synchronizer.stored_block(b1.parent())? else {
            return Ok(false);
        };
        Ok(b0.payload.is_empty() || b0.round <= self.last_committed_round)
    }

    /// Proposes now, or (on an idle chain, or one whose application is behind) once a digest
    /// may go in or `max_batch_delay` passes, so such a committee does not spin through empty
    /// rounds as fast as the network allows.
    async fn try_propose(&mut self, tc: Option<TC>) {
        match self.should_wait() {
            Ok(true) => {
                let delay = self
                    .parameters
                    .max_batch_delay
                    .min(self.parameters.timeout_delay / 2);
                self.proposal_deadline
                    .as_mut()
                    .reset(Instant::now() + Duration::from_millis(delay));
                self.pending_proposal = Some(tc);
            }
            Ok(false) => {
                if let Err(e) = self.propose(tc).await {
                    warn!("cannot propose: {e}");
                }
            }
            Err(e) => warn!("cannot propose: {e}"),
        }
    }

    async fn propose(&mut self, tc: Option<TC>) -> Result<(), ConsensusError> {
        // What voters will read off the block (`Opening::of`).
        let opening = match &tc {
            Some(tc) => Opening::Tc(tc),
            None => Opening::Qc(&self.high_qc.hash),
        };
        if !self.is_leader(self.round, opening) || self.round <= self.last_proposed_round {
            return Ok(());
        }
        self.last_proposed_round = self.round;
        // The leader votes for its own block next, so the write that records the proposal
        // records that vote too: its vote then finds the state on disk already, and the round
        // costs this node one synced write, not two. Recording a vote early only restrains a
        // restarted node (it will not vote in this round), which is always safe.
        let mut state = self.safety_state();
        state.last_voted_round = state.last_voted_round.max(self.round);
        self.safety_store.save(state).await?;
        let payload = if self.application_behind() {
            self.metrics
                .withheld_proposals
                .fetch_add(1, Ordering::Relaxed);
            Vec::new()
        } else {
            self.buffer
                .take(self.round, self.parameters.max_block_digests)
        };
        let block = Block::new(
            self.high_qc.clone(),
            tc,
            self.name,
            self.round,
            payload,
            &self.signature_service,
        )
        .await;
        debug!("proposing {:?}", block);
        self.broadcast(&ConsensusMessage::Propose(block.clone()))
            .await?;
        self.metrics
            .proposed_batches
            .fetch_add(block.payload.len() as u64, Ordering::Relaxed);
        self.own_blocks.push_back(block);
        Ok(())
    }

    // ---- voting ------------------------------------------------------------------------------

    async fn make_vote(&mut self, block: &Block) -> Option<Vote> {
        if !self.safety.vote(block) {
            return None;
        }
        if let Err(e) = self.persist_safety().await {
            // Not voting is always safe; a vote the node could forget is not.
            error!("not voting in round {}: {e}", block.round);
            return None;
        }
        Some(Vote::new(block, self.name, &self.signature_service).await)
    }

    async fn handle_vote(&mut self, vote: Vote) -> Result<(), ConsensusError> {
        // Votes of the previous round still count: re-broadcast on a timeout, they may arrive
        // after the TC of that round moved us on.
        if vote.round.saturating_add(1) < self.round {
            return Ok(());
        }
        self.check_window(vote.round)?;
        if self.aggregator.has_voted(vote.round, &vote.author) {
            return Err(AggregatorError::AuthorityReuse(vote.author).into());
        }
        vote.verify(&self.committee)?;
        if let Some(qc) = self.aggregator.add_vote(vote)? {
            debug!("assembled {:?}", qc);
            self.process_qc(&qc).await;
            if self.is_leader(self.round, Opening::Qc(&qc.hash)) {
                self.try_propose(None).await;
            }
        }
        Ok(())
    }

    async fn handle_timeout(&mut self, timeout: Timeout) -> Result<(), ConsensusError> {
        if timeout.round < self.round {
            return Ok(());
        }
        timeout.check_structure(&self.committee)?;
        // Its high QC first, even if the timeout itself is out of the window: a node restarted
        // at round 1 learns the survivors' round this way, or it would drop their timeouts for
        // ever while they ignore its own as stale (DiemBFT v4 processes every certificate).
        let qc_checked = self.advance_by_qc(&timeout.high_qc).await?;
        self.check_window(timeout.round)?;
        if self
            .aggregator
            .has_timed_out(timeout.round, &timeout.author)
        {
            return Err(AggregatorError::AuthorityReuse(timeout.author).into());
        }
        timeout.verify_signature()?;
        // The TC we may build carries the highest QC of its timeouts: each must be genuine.
        if !qc_checked && timeout.high_qc != self.high_qc {
            timeout.high_qc.verify(&self.committee)?;
        }
        let (author, round) = (timeout.author, timeout.round);
        if let Some(tc) = self.aggregator.add_timeout(timeout)? {
            debug!("assembled {:?}", tc);
            self.advance_round(tc.round).await;
            self.enter_round_opened_by(Opening::Tc(&tc));
            self.broadcast(&ConsensusMessage::TC(tc.clone())).await?;
            if self.is_leader(self.round, Opening::Tc(&tc)) {
                self.try_propose(Some(tc)).await;
            }
            return Ok(());
        }
        self.join_timeouts(author, round).await
    }

    /// Timeout joining (Bracha-style amplification, as in DiemBFT v4 / Jolteon): once members
    /// with f+1 stake sent valid timeouts for rounds at or above r > ours, at least one honest
    /// member got to r, so we move to r and time out of it too. Without it, nodes stuck in
    /// different rounds (a restarted node whose high QC leaves it below the survivors, who can
    /// form no TC without it) each wait for a TC of their own round that never comes. A single
    /// (maybe Byzantine) member cannot move us; only a verified timeout within the window gets
    /// here, and each member holds one entry, its highest.
    async fn join_timeouts(
        &mut self,
        author: PublicKey,
        round: Round,
    ) -> Result<(), ConsensusError> {
        if round <= self.round {
            return Ok(());
        }
        let highest = self.timeout_rounds.entry(author).or_insert(round);
        *highest = (*highest).max(round);
        let mut rounds: Vec<(Round, Stake)> = self
            .timeout_rounds
            .iter()
            .map(|(name, r)| (*r, self.committee.stake(name)))
            .collect();
        rounds.sort_unstable_by_key(|(r, _)| std::cmp::Reverse(*r));
        let threshold = self.committee.validity_threshold();
        let mut stake: Stake = 0;
        let Some(join) = rounds.into_iter().find_map(|(r, s)| {
            stake += s;
            (stake >= threshold).then_some(r)
        }) else {
            return Ok(());
        };
        if join <= self.round {
            return Ok(());
        }
        debug!("joining the timeouts of round {join}");
        // `advance_round(r)` enters round r + 1.
        self.advance_round(join - 1).await;
        // Boxed: a timeout of our own comes back through `handle_timeout`, which got us here
        // (once, as it is of our round now, so the recursion ends there).
        Box::pin(self.local_timeout_round()).await
    }

    async fn handle_tc(&mut self, tc: TC) -> Result<(), ConsensusError> {
        if tc.round < self.round {
            return Ok(());
        }
        tc.verify(&self.committee)?;
        // Adopt the TC's QC first: the block we may propose next must extend it (safety rule 2).
        self.update_high_qc(&tc.high_qc);
        self.advance_round(tc.round).await;
        self.enter_round_opened_by(Opening::Tc(&tc));
        if self.is_leader(self.round, Opening::Tc(&tc)) {
            self.try_propose(Some(tc)).await;
        }
        Ok(())
    }

    async fn handle_proposal(&mut self, block: Block) -> Result<(), ConsensusError> {
        // The size limit holds for every block, not only our own (and costs nothing to check).
        if block.payload.len() > self.parameters.max_block_digests {
            return Err(MessageError::Malformed(format!(
                "block of round {} names {} batches, more than {}",
                block.round,
                block.payload.len(),
                self.parameters.max_block_digests
            ))
            .into());
        }
        block.check_structure(&self.committee)?;
        // The block's certificates move us first, whoever relays them (each proves itself), and
        // before the window is checked: an honest block is then at most in our round, while a
        // far-future one would be stored until we get there. The block's own signature is
        // checked only once it fits, so an out-of-window block costs at most the check of
        // certificates above ours, and a replay of one we are past costs none.
        let qc_checked = self.advance_by_qc(&block.qc).await?;
        let tc_checked = match &block.tc {
            Some(tc) => self.advance_by_tc(tc).await?,
            None => false,
        };
        self.check_window(block.round)?;
        block.verify_signature()?;
        // Certificates not above ours were not checked yet; the vote rule reads both.
        if !qc_checked && block.qc != self.high_qc {
            block.qc.verify(&self.committee)?;
        }
        if let Some(tc) = block.tc.as_ref().filter(|_| !tc_checked) {
            tc.verify(&self.committee)?;
        }
        self.elector.record(&block);
        // A proposal for a round we are in (or ahead of) must come from its leader. Older
        // blocks (ancestors we fetch) are vouched for by the QCs of their children instead, and
        // one whose window we lack is checked again before we vote for it.
        if block.round >= self.round {
            if let Some(leader) = self.leader(block.round, Opening::of(&block)) {
                if leader != block.author {
                    return Err(MessageError::WrongLeader {
                        author: block.author,
                        round: block.round,
                    }
                    .into());
                }
            }
        }
        self.process_block(&block).await
    }

    /// Verifies and processes `qc` if it is above our high QC (so it may move our round or our
    /// high QC); returns whether it did. One that is not costs nothing: we are past it.
    async fn advance_by_qc(&mut self, qc: &QC) -> Result<bool, ConsensusError> {
        if qc.round <= self.high_qc.round {
            return Ok(false);
        }
        // `QC::verify` checks the round and the quorum of signers before the aggregate signature.
        qc.verify(&self.committee)?;
        self.process_qc(qc).await;
        Ok(true)
    }

    /// Like `advance_by_qc`, for a TC that would move our round or carries a higher QC.
    async fn advance_by_tc(&mut self, tc: &TC) -> Result<bool, ConsensusError> {
        if tc.round < self.round && tc.high_qc.round <= self.high_qc.round {
            return Ok(false);
        }
        tc.verify(&self.committee)?;
        // Adopt the TC's QC first: a block we propose next must extend it (safety rule 2).
        self.update_high_qc(&tc.high_qc);
        let moved = tc.round >= self.round;
        self.advance_round(tc.round).await;
        if moved {
            self.enter_round_opened_by(Opening::Tc(tc));
        }
        Ok(true)
    }

    /// Rejects a round too far ahead of ours (see `Parameters::max_rounds_ahead`).
    fn check_window(&self, round: Round) -> Result<(), ConsensusError> {
        if round > self.round.saturating_add(self.parameters.max_rounds_ahead) {
            return Err(ConsensusError::TooFarAhead {
                round,
                current: self.round,
            });
        }
        Ok(())
    }

    /// Blocks below this round are neither kept nor stored. The window is the one batches are
    /// kept for (see `GcWindow`): `gc_depth` rounds below the last commit *and* committed at
    /// least `gc_retention_ms` ago, so a laggard that can still fetch a block's batches can also
    /// fetch the block.
    fn prune_floor(&self) -> Round {
        let floor = self
            .last_committed_round
            .saturating_sub(self.parameters.gc_depth)
            .min(self.aged_commit_round);
        // Before the application's first checkpoint, a restart replays from genesis.
        match self.checkpoints.latest() {
            Some(checkpoint) => floor.min(checkpoint.round),
            None => 0,
        }
    }

    fn prune_blocks(&mut self) {
        let retention = Duration::from_millis(self.parameters.gc_retention_ms);
        while let Some(&(round, at)) = self.commit_times.front() {
            if at.elapsed() < retention {
                break;
            }
            self.aged_commit_round = round;
            self.commit_times.pop_front();
        }
        let floor = self.prune_floor();
        self.elector.prune(floor);
        self.direct_commits.prune_below(floor);
        let keep = self.stored_blocks.split_off(&floor);
        for digests in std::mem::replace(&mut self.stored_blocks, keep).into_values() {
            self.store.blocks().remove_in_background(&digests);
        }
    }

    /// Stores a verified block once its payload and ancestors are here, applies the commit rule
    /// and votes. Blocks waiting for data come back here through the loopback channel.
    async fn process_block(&mut self, block: &Block) -> Result<(), ConsensusError> {
        // Too old to matter (it cannot commit) and its ancestors may be gone: do not fetch them.
        if block.round < self.prune_floor() {
            return Ok(());
        }
        self.sync_state_if_far_behind(block).await?;
        if !self.payload.available(block).await? {
            return Ok(());
        }
        let Some((b0, b1)) = self.synchronizer.get_ancestors(block).await? else {
            return Ok(());
        };
        self.store_block(block).await?;

        // b0 <- b1 <- block: block certifies b1, b1 certifies b0.
        if safety::commits(&b0, &b1) && b0.round > self.last_committed_round {
            self.direct_commits.record(b0.round, &block.qc);
            self.commit(b0).await?;
        }

        // Only vote in the current round; this also stops far-future blocks from moving us.
        if block.round != self.round {
            return Ok(());
        }
        // Only for the round's leader. A node that cannot tell (a block of the history window is
        // missing: it is back from a crash and syncing) votes for the first valid proposal of
        // the round: who proposes changes no safety rule, and its vote may be the quorum's.
        if let Some(leader) = self.leader(block.round, Opening::of(block)) {
            if leader != block.author {
                debug!(
                    "not voting for {:?}: not the leader of its round here",
                    block
                );
                return Ok(());
            }
        }
        if let Some(vote) = self.make_vote(block).await {
            self.last_vote = Some(vote.clone());
            match self.leader(self.round + 1, Opening::Qc(&vote.hash)) {
                Some(next_leader) if next_leader == self.name => self.handle_vote(vote).await?,
                Some(next_leader) => {
                    if let Some(authority) = self.committee.authority(&next_leader) {
                        let address = authority.consensus_address;
                        let bytes = wire::encode(&ConsensusMessage::Vote(vote))?;
                        let handler = self.network.send(address, bytes).await;
                        self.keep_handlers(vec![handler]);
                    }
                }
                // We cannot tell who leads next (a block of the window is missing here):
                // whoever it is gets the vote.
                None => {
                    self.broadcast(&ConsensusMessage::Vote(vote.clone()))
                        .await?;
                    self.handle_vote(vote).await?;
                }
            }
        }
        Ok(())
    }

    // ---- state sync --------------------------------------------------------------------------

    /// Asks peers for a checkpoint when `block` certifies a round more than `gc_depth` rounds
    /// past our last commit: peers may have deleted the batches (and, after `gc_retention_ms`,
    /// the blocks) between, so replaying the chain may never end. Having the blocks is not
    /// enough (a node restarted on its `--store` has them, but its own GC deleted batches that
    /// its peers then freed too). Replay goes on meanwhile; whichever gets there first wins.
    async fn sync_state_if_far_behind(&mut self, block: &Block) -> Result<(), ConsensusError> {
        let far = block.qc.round
            > self
                .last_committed_round
                .saturating_add(self.parameters.gc_depth);
        if !far || !self.state_sync.should_request() {
            return Ok(());
        }
        info!(
            "round {} is certified and we committed only up to round {}: asking peers for a \
             checkpoint",
            block.qc.round, self.last_committed_round
        );
        self.broadcast(&ConsensusMessage::CheckpointRequest(self.name))
            .await
    }

    /// Counts a member's checkpoint report, cheapest checks first: a block not past our last
    /// commit is of no use, a reply we did not ask for (or a member's second to one request) is
    /// not looked at, and the proof that the block committed is checked before the state is
    /// hashed (see `state_sync.rs`).
    async fn handle_checkpoint(&mut self, reply: CheckpointReply) -> Result<(), ConsensusError> {
        if reply.block.round <= self.last_committed_round {
            return Ok(());
        }
        if !self.state_sync.admit(&reply.author) {
            debug!("{:?} was not asked for; ignored", reply);
            return Ok(());
        }
        reply.verify(&self.committee)?;
        match self.state_sync.add(reply) {
            Some(adopted) => self.adopt_checkpoint(adopted).await,
            None => Ok(()),
        }
    }

    /// Makes the checkpoint f+1 members reported our root (see `take_root`).
    async fn adopt_checkpoint(&mut self, adopted: Adopted) -> Result<(), ConsensusError> {
        let Adopted {
            block,
            state,
            digest,
        } = adopted;
        let block_digest = block.digest();
        info!(
            "adopting the checkpoint of round {} (block {block_digest}, state {digest}, {} \
             bytes) that f+1 members reported; last committed round was {}",
            block.round,
            state.len(),
            self.last_committed_round
        );
        let checkpoint = Checkpoint {
            block: block_digest,
            round: block.round,
            state,
            digest,
        };
        self.store_block(&block).await?;
        self.take_root(block, checkpoint)?;
        self.settle_skipped().await?;
        self.metrics
            .checkpoints_adopted
            .fetch_add(1, Ordering::Relaxed);
        let _ = self
            .tx_mempool
            .send(ConsensusMempoolMessage::Cleanup(self.last_committed_round))
            .await;
        Ok(())
    }

    /// Writes `block` to the store, tracked for pruning like every block we keep.
    async fn store_block(&mut self, block: &Block) -> Result<(), ConsensusError> {
        self.elector.record(block);
        let digest = block.digest();
        if !self.store.blocks().contains(&digest)? {
            self.stored_blocks
                .entry(block.round)
                .or_default()
                .push(digest);
        }
        self.store
            .blocks()
            .write(digest, wire::encode_block(block)?)
            .await?;
        Ok(())
    }

    /// Makes the checkpoint's block, already stored, our last committed block and the root of
    /// our chain, and hands its state to the application. The state goes first: the application
    /// must have it before any batch of a block after the root, and those can only come after
    /// this.
    ///
    /// The root and the blocks between our last commit and it committed without us: of those we
    /// hold, our own are done (not proposed again: peers would refuse them as committed for the
    /// GC window, then commit them a second time), and every one is queued for `settle_skipped`.
    /// Our blocks of the stretch we do not hold may or may not have committed: they are
    /// forgotten, not proposed again.
    fn take_root(&mut self, block: Block, checkpoint: Checkpoint) -> Result<(), ConsensusError> {
        let round = block.round;
        if self.tx_restore.send(Arc::new(checkpoint)).is_err() {
            // An application without state (or gone) needs none; consensus goes on.
            debug!("no application takes checkpoints");
        }
        let (mut skipped, unknown_up_to) = self.stored_ancestors(&block)?;
        skipped.push(block.clone());
        let digest = block.digest();
        self.synchronizer.set_root(&block);
        self.last_committed_round = round;
        self.last_committed = digest;
        self.commit_times.push_back((round, Instant::now()));
        for skipped in &skipped {
            if skipped.author == self.name {
                self.buffer.committed(skipped.round);
            }
            self.payload.committed(skipped);
        }
        self.buffer.forget_up_to(unknown_up_to);
        self.buffer.finalize_up_to(round);
        self.payload.cleanup(round);
        self.skipped.extend(skipped);
        self.metrics
            .checkpoint_round
            .store(round, Ordering::Relaxed);
        Ok(())
    }

    /// The stored ancestors of `root` above our last commit, oldest first (they committed with
    /// it), and the round up to which the chain below them is unknown here (0 if they reach our
    /// last commit).
    fn stored_ancestors(&self, root: &Block) -> Result<(Vec<Block>, Round), ConsensusError> {
        let mut chain = VecDeque::new();
        let mut parent = *root.parent();
        let mut parent_round = root.qc.round;
        while parent != self.last_committed && parent_round > self.last_committed_round {
            match self.synchronizer.stored_block(&parent)? {
                Some(block) => {
                    parent = *block.parent();
                    parent_round = block.qc.round;
                    chain.push_front(block);
                }
                None => return Ok((chain.into(), parent_round)),
            }
        }
        Ok((chain.into(), 0))
    }

    /// Tells the mempool (quotas, backlog) and the committer (which collects their batches) of
    /// the blocks that committed below a root we took (see `take_root`).
    async fn settle_skipped(&mut self) -> Result<(), ConsensusError> {
        for block in std::mem::take(&mut self.skipped) {
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Committed(block.payload.clone()))
                .await;
            self.tx_commit
                .send(ToCommitter::Skipped(block))
                .await
                .map_err(|_| ConsensusError::ChannelClosed)?;
        }
        Ok(())
    }

    /// Commits `block` and every uncommitted ancestor, oldest first.
    async fn commit(&mut self, block: Block) -> Result<(), ConsensusError> {
        let mut chain = VecDeque::from([block]);
        loop {
            let oldest = &chain[0];
            let parent = *oldest.parent();
            let ancestor = self
                .synchronizer
                .stored_block(&parent)?
                .ok_or(ConsensusError::MissingAncestor(parent))?;
            if ancestor.round <= self.last_committed_round {
                if parent != self.last_committed {
                    // Two-chain safety says this cannot happen with f or fewer faults. Checked
                    // before anything of `chain` is output, so the conflicting blocks never are.
                    return Err(FatalError::Fork {
                        block: chain[0].digest(),
                        round: chain[0].round,
                        last_committed: self.last_committed,
                        last_committed_round: self.last_committed_round,
                    }
                    .into());
                }
                break;
            }
            chain.push_front(ancestor);
        }
        let Some(last) = chain.back() else {
            return Ok(());
        };
        self.last_committed_round = last.round;
        self.last_committed = last.digest();
        self.commit_times.push_back((last.round, Instant::now()));
        for block in chain {
            if block.author == self.name {
                self.buffer.committed(block.round);
            }
            self.payload.committed(&block);
            info!("committed {:?}", block);
            // Released from their senders' mempool quotas. Best effort: a
            // mempool that is gone has no quota to release.
            let _ = self
                .tx_mempool
                .send(ConsensusMempoolMessage::Committed(block.payload.clone()))
                .await;
            self.metrics
                .committed_blocks
                .fetch_add(1, Ordering::Relaxed);
            self.metrics.record_commit(now_ms());
            self.tx_commit
                .send(ToCommitter::Commit(block))
                .await
                .map_err(|_| ConsensusError::ChannelClosed)?;
        }
        self.buffer.finalize_up_to(self.last_committed_round);
        self.payload.cleanup(self.last_committed_round);
        self.prune_blocks();
        let _ = self
            .tx_mempool
            .send(ConsensusMempoolMessage::Cleanup(self.last_committed_round))
            .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotstuff::commit_proof::CommitProof;
    use crate::hotstuff::messages::tests::{committee, keys, qc, signed_block, timeout, vote};
    use crate::network::handshake::Purpose;
    use crate::store::Column;
    use crypto::KeyPair;

    /// A core of `keys[0]` driven by direct calls; its peers' addresses lead nowhere, so what it
    /// sends is queued and lost, which these tests do not need.
    struct Harness {
        core: Core,
        keys: Vec<KeyPair>,
        rx_commit: mpsc::Receiver<ToCommitter>,
        rx_fatal: watch::Receiver<Option<FatalError>>,
        rx_restore: std::sync::mpsc::Receiver<Arc<Checkpoint>>,
        rx_held_by_all: watch::Receiver<Round>,
        progress: Arc<PipelineProgress>,
        rx_mempool: mpsc::Receiver<ConsensusMempoolMessage>,
        _tx_message: mpsc::Sender<ConsensusMessage>,
        _tx_digests: mpsc::Sender<Digest>,
    }

    fn harness(parameters: Parameters) -> Harness {
        harness_on(Store::new(), parameters)
    }

    /// A harness over `store`: a second one over the same store is the node restarted on it.
    fn harness_on(store: Store, parameters: Parameters) -> Harness {
        let keys = keys(4);
        let (tx_message, rx_message) = mpsc::channel(1_000);
        let (tx_loopback, rx_loopback) = mpsc::channel(1_000);
        let (tx_digests, rx_digests) = mpsc::channel(1_000);
        let (tx_commit, rx_commit) = mpsc::channel(10_000);
        let (tx_mempool, rx_mempool) = mpsc::channel(10_000);
        let (tx_fatal, rx_fatal) = watch::channel(None);
        let (tx_restore, rx_restore) = std::sync::mpsc::channel();
        let (peer_rounds, rx_held_by_all) = PeerRounds::new(keys[0].name, &committee(&keys));
        let checkpoints = CheckpointSlot::kept_in(&store);
        let progress = Arc::new(PipelineProgress::default());
        let core = Core::new(
            keys[0].name,
            committee(&keys),
            parameters,
            store,
            SignatureService::new(keys[0].secret.clone()),
            CoreChannels {
                rx_message,
                rx_loopback,
                tx_loopback,
                rx_digests,
                tx_commit,
                tx_mempool,
                tx_fatal,
                credentials: Credentials::new(
                    keys[0].name,
                    keys[0].secret.clone(),
                    Purpose::Consensus,
                ),
                tx_restore,
                peer_rounds,
                direct_commits: DirectCommits::default(),
                checkpoints,
                progress: progress.clone(),
            },
            Arc::new(ConsensusMetrics::default()),
        )
        .expect("core starts");
        Harness {
            core,
            rx_fatal,
            rx_restore,
            rx_held_by_all,
            progress,
            keys,
            rx_commit,
            rx_mempool,
            _tx_message: tx_message,
            _tx_digests: tx_digests,
        }
    }

    impl Harness {
        fn leader(&self, round: Round) -> &KeyPair {
            let name = self.core.committee.leader(round);
            self.keys
                .iter()
                .find(|k| k.name == name)
                .expect("leader is in the committee")
        }

        /// A well-formed block of `round` extending `parent` (genesis if `None`).
        fn block(&self, parent: Option<&Block>, round: Round, payload: Vec<Digest>) -> Block {
            let parent_qc = match parent {
                None => QC::genesis(),
                Some(p) => qc(p.digest(), p.round, &self.keys[..3]),
            };
            signed_block(parent_qc, None, round, payload, self.leader(round))
        }

        /// A chain of consecutive rounds `from..=to`, the first extending `parent`.
        fn chain(&self, parent: Option<&Block>, from: Round, to: Round) -> Vec<Block> {
            let mut blocks: Vec<Block> = Vec::new();
            for round in from..=to {
                let block = self.block(blocks.last().or(parent), round, vec![]);
                blocks.push(block);
            }
            blocks
        }

        /// An application whose checkpoints never hold blocks back: only the GC window prunes.
        /// (Before its first checkpoint, a node keeps every block: a restart replays from
        /// genesis.)
        fn application_keeps_up(&self) {
            self.core.checkpoints.publish(Checkpoint::new(
                Digest::of(b"a block no node stores"),
                Round::MAX,
                bytes::Bytes::new(),
            ));
        }

        /// Rounds of the blocks the committer was told committed below a root we took.
        fn skipped(&mut self) -> Vec<Round> {
            let mut rounds = Vec::new();
            while let Ok(input) = self.rx_commit.try_recv() {
                if let ToCommitter::Skipped(block) = input {
                    rounds.push(block.round);
                }
            }
            rounds
        }

        fn committed(&mut self) -> Vec<Round> {
            let mut rounds = Vec::new();
            while let Ok(input) = self.rx_commit.try_recv() {
                if let ToCommitter::Commit(block) = input {
                    rounds.push(block.round);
                }
            }
            rounds
        }
    }

    /// A member signs votes and timeouts for rounds far ahead. Each is a valid
    /// message, but none may create an aggregator entry the node keeps until it reaches them.
    #[tokio::test]
    async fn byzantine_far_future_votes_and_timeouts_are_not_buffered() {
        let mut h = harness(Parameters::default());
        let byzantine = h.keys[3].clone();
        for round in 1_000..1_500 {
            let _ = h
                .core
                .handle_vote(vote(Digest::of(b"x"), round, &byzantine))
                .await;
            let _ = h
                .core
                .handle_timeout(timeout(round, QC::genesis(), &byzantine))
                .await;
        }
        assert_eq!(h.core.aggregator.rounds(), 0);
    }

    /// While the application is more than `max_unexecuted_bytes` behind, the blocks this node
    /// leads carry no batches (they stay queued); once it caught up, they go in.
    #[tokio::test]
    async fn a_leader_whose_application_is_behind_proposes_no_batches() {
        let mut h = harness(Parameters::default());
        let ours: Vec<Round> = (1..20)
            .filter(|r| h.core.committee.leader(*r) == h.keys[0].name)
            .take(2)
            .collect();
        let batch = Digest::of(b"batch");
        h.core.buffer.push(batch);
        h.progress
            .delivered(h.core.parameters.max_unexecuted_bytes + 1);
        h.core.round = ours[0];
        h.core.propose(None).await.expect("propose");
        let withheld = h.core.own_blocks.pop_front().expect("a block");
        assert!(withheld.payload.is_empty());
        assert_eq!(h.core.metrics.withheld_proposals.load(Ordering::Relaxed), 1);
        // The application catches up: the queued batch goes into the next block we lead.
        h.progress
            .applied(h.core.parameters.max_unexecuted_bytes + 1);
        h.core.round = ours[1];
        h.core.propose(None).await.expect("propose");
        let block = h.core.own_blocks.pop_front().expect("a block");
        assert_eq!(block.payload, vec![batch]);
    }

    /// A safety write that fails in a timeout (a full disk) still resets the round timer: the
    /// next attempt comes a timeout delay later. Left expired, the timer fired again at once and
    /// the core spun on the failing write, a warning per turn.
    #[tokio::test(start_paused = true)]
    async fn recovery_a_failed_safety_write_in_a_timeout_resets_the_timer() {
        let backend = crate::store::testing::FailingBackend::default();
        let failing = backend.failing.clone();
        let mut h = harness_on(Store::with_backend(backend), Parameters::default());
        let delay = Duration::from_millis(h.core.parameters.timeout_delay);
        tokio::time::advance(delay * 2).await;
        assert!(
            h.core.timer.deadline() <= Instant::now(),
            "the timer expired"
        );
        crate::store::lock(&failing).push(Column::Safety);
        assert!(matches!(
            h.core.local_timeout_round().await,
            Err(ConsensusError::SafetyState(_))
        ));
        assert!(
            h.core.timer.deadline() >= Instant::now() + delay,
            "the timer was left expired: it fires again at once"
        );
    }

    /// `max_block_digests` holds for received proposals, not only our own.
    #[tokio::test]
    async fn byzantine_oversized_proposal_is_rejected_on_receipt() {
        let parameters = Parameters {
            max_block_digests: 4,
            ..Parameters::default()
        };
        let mut h = harness(parameters);
        let payload: Vec<Digest> = (0..5u8).map(|i| Digest::of(&[i])).collect();
        let block = h.block(None, 1, payload);
        assert!(matches!(
            h.core.handle_proposal(block).await,
            Err(ConsensusError::Message(MessageError::Malformed(_)))
        ));
        let fits = h.block(None, 1, (0..4u8).map(|i| Digest::of(&[i])).collect());
        assert!(h.core.handle_proposal(fits).await.is_ok());
    }

    /// A core with a GC window of 10 rounds and `gc_retention_ms`, fed a chain of 100 blocks
    /// (rounds 1 to 100, so 98 commits).
    async fn committed_chain(gc_retention_ms: u64) -> (Harness, Vec<Block>) {
        let mut h = harness(Parameters {
            gc_depth: 10,
            gc_retention_ms,
            ..Parameters::default()
        });
        h.application_keeps_up();
        let chain = h.chain(None, 1, 100);
        for block in &chain {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        assert_eq!(h.committed().last(), Some(&98));
        (h, chain)
    }

    /// Blocks far below the committed round are deleted, not kept forever.
    #[tokio::test]
    async fn blocks_below_the_gc_window_are_pruned() {
        // Rounds alone decide here; the time half of the window has its own test.
        let (mut h, chain) = committed_chain(0).await;
        let blocks = h.core.store.blocks();
        // Kept: the last committed block, `gc_depth` rounds below it, and the two uncommitted.
        let kept = blocks.len();
        assert!(kept <= 10 + 3, "{kept} blocks");
        assert!(blocks.contains(&chain[99].digest()).expect("read"));
        assert!(!blocks.contains(&chain[0].digest()).expect("read"));
        // Nor is a late block of a pruned round stored again.
        let stale = h.block(Some(&chain[9]), 11, vec![]);
        let _ = h.core.handle_proposal(stale.clone()).await;
        assert!(!blocks.contains(&stale.digest()).expect("read"));
    }

    /// Blocks stay as long as their batches (`GcWindow`: rounds *and* time), so a node that
    /// lagged more than `gc_depth` rounds but came back within the time can still fetch both.
    #[tokio::test]
    async fn blocks_within_the_retention_time_are_kept() {
        let (h, chain) = committed_chain(60_000).await;
        let blocks = h.core.store.blocks();
        assert!(blocks.contains(&chain[0].digest()).expect("read"));
        assert_eq!(blocks.len(), 100);
    }

    /// With more than f Byzantine members (here the test signs with three of
    /// the four keys) two conflicting blocks can both get a commit certificate. The node must
    /// notice, refuse to commit the second and halt, not log and carry on.
    #[tokio::test]
    async fn byzantine_quorum_fork_halts_the_node() {
        let mut h = harness(Parameters::default());
        for block in h.chain(None, 1, 3) {
            h.core.handle_proposal(block).await.expect("valid");
        }
        assert_eq!(h.committed(), vec![1]);
        // Rounds 4..=6 restart from genesis: round 6 certifies 5, which certifies 4, so 4
        // "commits" although it does not extend the committed block of round 1.
        let mut outcome = Ok(());
        for block in h.chain(None, 4, 6) {
            outcome = outcome.and(h.core.handle_proposal(block).await);
        }
        assert_eq!(h.committed(), Vec::<Round>::new(), "the fork was committed");
        assert!(matches!(
            outcome,
            Err(ConsensusError::Fatal(FatalError::Fork { round: 4, .. }))
        ));
        // The run loop stops on it and publishes it for the node binary to exit on.
        let chain = h.chain(None, 4, 6);
        let fork = h.block(Some(&chain[2]), 7, vec![]);
        let (tx_message, rx_message) = mpsc::channel(10);
        h.core.rx_message = rx_message;
        let mut fatal = h.rx_fatal.clone();
        let core = tokio::spawn(h.core.run());
        tx_message
            .send(ConsensusMessage::Propose(fork))
            .await
            .expect("core listens");
        tokio::time::timeout(Duration::from_secs(5), fatal.wait_for(Option::is_some))
            .await
            .expect("fatal error published")
            .expect("sender alive until then");
        tokio::time::timeout(Duration::from_secs(5), core)
            .await
            .expect("the core stopped")
            .expect("no panic");
    }

    /// `round + 1` must never overflow. A single vote of round u64::MAX is
    /// outside any window; even with the window open all the way, a quorum of such votes (f+1
    /// Byzantine signers are not needed for the QC check, only for this test) must not panic.
    #[tokio::test]
    async fn byzantine_votes_at_round_max_are_rejected() {
        let mut h = harness(Parameters::default());
        let hash = Digest::of(b"x");
        let byzantine = h.keys[3].clone();
        assert!(h
            .core
            .handle_vote(vote(hash, Round::MAX, &byzantine))
            .await
            .is_err());

        let mut h = harness(Parameters {
            max_rounds_ahead: Round::MAX,
            ..Parameters::default()
        });
        let signers = h.keys[1..].to_vec();
        for k in &signers {
            let _ = h.core.handle_vote(vote(hash, Round::MAX, k)).await;
        }
        assert_eq!(h.core.round, 1);
    }

    /// A replayed vote or timeout is recognised as a duplicate before its
    /// signature is checked (a corrupted signature shows the order), so replays cost no
    /// signature verification.
    #[tokio::test]
    async fn byzantine_replayed_votes_and_timeouts_cost_no_signature_check() {
        let mut h = harness(Parameters::default());
        let voter = h.keys[1].clone();
        let original = vote(Digest::of(b"x"), 1, &voter);
        h.core
            .handle_vote(original.clone())
            .await
            .expect("first vote");
        let mut replay = original;
        replay.signature = vote(Digest::of(b"y"), 1, &voter).signature;
        assert!(matches!(
            h.core.handle_vote(replay).await,
            Err(ConsensusError::Aggregator(AggregatorError::AuthorityReuse(
                _
            )))
        ));

        let first = timeout(1, QC::genesis(), &voter);
        h.core
            .handle_timeout(first.clone())
            .await
            .expect("first timeout");
        let mut replay = first;
        replay.signature = timeout(2, QC::genesis(), &voter).signature;
        assert!(matches!(
            h.core.handle_timeout(replay).await,
            Err(ConsensusError::Aggregator(AggregatorError::AuthorityReuse(
                _
            )))
        ));
        // A forged vote in someone's name does not use up that member's vote either.
        let honest = h.keys[2].clone();
        let mut forged = vote(Digest::of(b"x"), 1, &honest);
        forged.signature = vote(Digest::of(b"y"), 1, &honest).signature;
        assert!(h.core.handle_vote(forged).await.is_err());
        h.core
            .handle_vote(vote(Digest::of(b"x"), 1, &honest))
            .await
            .expect("the real vote still counts");
    }

    /// Rejoin rule 1: a timeout beyond the round window is not stored, but the QC it carries
    /// still moves the node (DiemBFT v4 processes every certificate it sees). Without this a node
    /// restarted at round 1 drops the survivors' timeouts for round R > window forever.
    #[tokio::test]
    async fn timeout_beyond_the_window_moves_the_node_by_its_qc() {
        let mut h = harness(Parameters::default());
        let signers = h.keys[..3].to_vec();
        let high = qc(Digest::of(b"b299"), 299, &signers);
        let sender = h.keys[1].clone();
        h.core
            .handle_timeout(timeout(300, high.clone(), &sender))
            .await
            .expect("the QC moves us to round 300, where the timeout fits");
        assert_eq!(h.core.round, 300);
        assert_eq!(h.core.high_qc, high);
        assert_eq!(h.core.aggregator.rounds(), 1, "the timeout is counted now");

        // Still beyond the window after its QC: the QC counts, the timeout is not stored.
        let other = h.keys[2].clone();
        assert!(matches!(
            h.core
                .handle_timeout(timeout(1_000, high.clone(), &other))
                .await,
            Err(ConsensusError::TooFarAhead { .. })
        ));
        assert_eq!(h.core.round, 300);
        assert_eq!(h.core.aggregator.rounds(), 1);

        // A replay of a certificate we are past costs no signature check (a corrupted one
        // shows it is not even looked at).
        let mut replay = high.clone();
        replay.votes[0].1 = vote(Digest::of(b"other"), 299, &signers[0]).signature;
        assert!(matches!(
            h.core.handle_timeout(timeout(1_000, replay, &other)).await,
            Err(ConsensusError::TooFarAhead { .. })
        ));

        // A forged QC above ours moves nothing.
        let mut forged = qc(Digest::of(b"b600"), 600, &signers);
        forged.votes[0].1 = vote(Digest::of(b"other"), 600, &signers[0]).signature;
        assert!(h
            .core
            .handle_timeout(timeout(601, forged, &other))
            .await
            .is_err());
        assert_eq!(h.core.round, 300);
        assert_eq!(h.core.high_qc, high);
    }

    /// Rejoin rule 1 for blocks: a block beyond the window after its certificates moved us is
    /// rejected before its own signature is checked, but its (valid) QC still counts: a QC
    /// proves itself whoever relays it.
    #[tokio::test]
    async fn block_beyond_the_window_moves_the_node_before_its_signature_is_checked() {
        let mut h = harness(Parameters::default());
        let high = qc(Digest::of(b"b299"), 299, &h.keys[..3]);
        let mut block = signed_block(high.clone(), None, 1_000, vec![], h.leader(1_000));
        block.signature = h.block(None, 1, vec![]).signature;
        assert!(matches!(
            h.core.handle_proposal(block).await,
            Err(ConsensusError::TooFarAhead { .. })
        ));
        assert_eq!(h.core.round, 300);
        assert_eq!(h.core.high_qc, high);
    }

    /// Rejoin rule 1 for TC messages: a TC far ahead moves the round, and its QC the high QC.
    #[tokio::test]
    async fn tc_far_ahead_moves_the_node() {
        let mut h = harness(Parameters::default());
        let high = qc(Digest::of(b"b299"), 299, &h.keys[..3]);
        let tc = TC {
            round: 500,
            high_qc: high.clone(),
            votes: h.keys[..3]
                .iter()
                .map(|k| (k.name, timeout(500, high.clone(), k).signature, 299))
                .collect(),
        };
        h.core.handle_tc(tc.clone()).await.expect("valid TC");
        assert_eq!(h.core.round, 501);
        assert_eq!(h.core.high_qc, high);
        // A replay is stale: nothing to verify.
        let mut replay = tc;
        replay.votes[0].1 = replay.votes[1].1;
        assert!(h.core.handle_tc(replay).await.is_ok());
    }

    /// Rejoin rule 2 (Bracha-style amplification): timeouts of a higher round from f+1 distinct
    /// members (so at least one honest member is there) make the node join that round and time
    /// out of it too; one member alone (maybe Byzantine) moves nothing.
    #[tokio::test]
    async fn f_plus_one_timeouts_of_a_higher_round_make_the_node_join_it() {
        let mut h = harness(Parameters::default());
        let (a, b) = (h.keys[1].clone(), h.keys[2].clone());
        h.core
            .handle_timeout(timeout(5, QC::genesis(), &a))
            .await
            .expect("valid");
        assert_eq!(h.core.round, 1, "one member may be Byzantine");
        h.core
            .handle_timeout(timeout(5, QC::genesis(), &b))
            .await
            .expect("valid");
        // We joined round 5 and timed out of it: with the two others that is a quorum, so the
        // TC of round 5 formed and moved us to round 6.
        assert_eq!(h.core.metrics.timeouts.load(Ordering::Relaxed), 1);
        assert_eq!(h.core.round, 6);
        // Having timed out of round 5, we never vote in it.
        let late = signed_block(
            qc(Digest::of(b"b4"), 4, &h.keys[..3]),
            None,
            5,
            vec![],
            h.leader(5),
        );
        assert!(!h.core.safety.vote(&late));
    }

    /// Rejoin rule 2's state is bounded: one Byzantine member timing out of every round ahead
    /// moves nothing, and leaves one pending timeout, not one per round.
    #[tokio::test]
    async fn byzantine_timeouts_of_one_member_do_not_make_the_node_join() {
        let mut h = harness(Parameters::default());
        let byzantine = h.keys[3].clone();
        for round in 2..=100 {
            let _ = h
                .core
                .handle_timeout(timeout(round, QC::genesis(), &byzantine))
                .await;
        }
        assert_eq!(h.core.round, 1);
        assert_eq!(h.core.metrics.timeouts.load(Ordering::Relaxed), 0);
        assert_eq!(h.core.timeout_rounds.len(), 1);
        assert_eq!(h.core.timeout_rounds.get(&byzantine.name), Some(&100));
    }

    /// A replica restarted mid-round on its store never votes twice in that round. An
    /// equivocating leader's second block of round 1 gets no vote after the restart, while a
    /// replica that lost its state (a fresh store) would vote for it.
    #[tokio::test]
    async fn a_restarted_core_never_votes_twice_in_a_round() {
        let store = Store::new();
        let mut h = harness_on(store.clone(), Parameters::default());
        let first = h.block(None, 1, vec![]);
        h.core.handle_proposal(first).await.expect("valid");
        assert_eq!(h.core.last_vote.as_ref().map(|v| v.round), Some(1));

        let batch = Digest::of(b"batch");
        let equivocation = h.block(None, 1, vec![batch]);
        drop(h);
        let mut restarted = harness_on(store.clone(), Parameters::default());
        store
            .batches()
            .write(batch, bytes::Bytes::from_static(b"batch"))
            .await
            .expect("write");
        assert_eq!(restarted.core.round, 1);
        restarted
            .core
            .handle_proposal(equivocation.clone())
            .await
            .expect("valid");
        assert!(restarted.core.last_vote.is_none(), "voted twice in round 1");

        let forgetful = Store::new();
        forgetful
            .batches()
            .write(batch, bytes::Bytes::from_static(b"batch"))
            .await
            .expect("write");
        let mut fresh = harness_on(forgetful, Parameters::default());
        fresh
            .core
            .handle_proposal(equivocation)
            .await
            .expect("valid");
        assert!(fresh.core.last_vote.is_some());
    }

    /// A replica that timed out of a round and restarts does not vote in it either, and resumes
    /// with the high QC it reported (the TC safety argument counts on it).
    #[tokio::test]
    async fn a_restarted_core_keeps_its_timeouts_and_high_qc() {
        let store = Store::new();
        let mut h = harness_on(store.clone(), Parameters::default());
        let chain = h.chain(None, 1, 2);
        // Round 1 times out before its block arrives.
        h.core.local_timeout_round().await.expect("timeout");
        drop(h);
        let mut restarted = harness_on(store, Parameters::default());
        assert_eq!(restarted.core.round, 1);
        restarted
            .core
            .handle_proposal(chain[0].clone())
            .await
            .expect("valid");
        assert!(
            restarted.core.last_vote.is_none(),
            "voted in a round it timed out of"
        );

        // Round 2's block carries the QC of round 1; the replica times out of round 2.
        restarted
            .core
            .handle_proposal(chain[1].clone())
            .await
            .expect("valid");
        restarted.core.local_timeout_round().await.expect("timeout");
        let high_qc = restarted.core.high_qc.clone();
        assert_eq!(high_qc.round, 1);
        let store = restarted.core.store.clone();
        drop(restarted);
        let again = harness_on(store, Parameters::default());
        assert_eq!(again.core.round, 2);
        assert!(again.core.high_qc == high_qc);
    }

    /// A leader restarted after proposing does not propose a second block in the round.
    #[tokio::test]
    async fn a_restarted_leader_does_not_propose_twice() {
        let store = Store::new();
        let mut h = harness_on(store.clone(), Parameters::default());
        // Find a round this core leads and get there.
        let own = (1..10)
            .find(|r| h.core.committee.leader(*r) == h.keys[0].name)
            .expect("leads a round");
        if own > 1 {
            for block in h.chain(None, 1, own - 1) {
                h.core.handle_proposal(block).await.expect("valid");
            }
        }
        h.core.round = own;
        h.core.propose(None).await.expect("proposed");
        assert_eq!(h.core.own_blocks.len(), 1);
        drop(h);
        let mut restarted = harness_on(store, Parameters::default());
        restarted.core.round = own;
        restarted.core.propose(None).await.expect("no error");
        assert!(
            restarted.core.own_blocks.is_empty(),
            "proposed twice in round {own}"
        );
    }

    /// On a durable store every safety write is an fsync, several a round at speed: the leader's
    /// round costs it one, its proposal and its own vote written together. A restart after it
    /// neither proposes nor votes again in the round.
    #[tokio::test]
    async fn a_leaders_proposal_and_its_own_vote_are_one_safety_write() {
        let backend = crate::store::testing::RecordingBackend::default();
        let writes = backend.writes.clone();
        let safety_writes = move || {
            let writes = crate::store::lock(&writes);
            writes.iter().filter(|(c, _)| *c == Column::Safety).count()
        };
        let store = Store::with_backend(backend);
        let mut h = harness_on(store.clone(), Parameters::default());
        let own = (2..10)
            .find(|r| h.core.committee.leader(*r) == h.keys[0].name)
            .expect("leads a round");
        let chain = h.chain(None, 1, own - 1);
        for block in &chain {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        // Two more votes for the last block make its QC (with ours): the round we lead.
        let last = chain.last().expect("a block");
        for voter in &h.keys[1..3] {
            let vote = vote(last.digest(), last.round, voter);
            h.core.handle_vote(vote).await.expect("valid");
        }
        assert_eq!((h.core.round, h.core.high_qc.round), (own, own - 1));
        let before = safety_writes();
        h.core.propose(None).await.expect("proposed");
        let block = h.core.own_blocks.pop_front().expect("a proposal");
        h.core.process_block(&block).await.expect("own block");
        assert_eq!(h.core.last_vote.as_ref().map(|v| v.round), Some(own));
        assert_eq!(safety_writes() - before, 1);

        drop(h);
        let mut restarted = harness_on(store, Parameters::default());
        assert_eq!(restarted.core.round, own);
        restarted.core.propose(None).await.expect("no error");
        assert!(restarted.core.own_blocks.is_empty(), "proposed twice");
        restarted.core.handle_proposal(block).await.expect("valid");
        assert!(
            restarted.core.last_vote.is_none(),
            "voted twice in round {own}"
        );
    }

    /// Blocks a durable store kept across a restart are pruned like the ones stored in this life.
    #[tokio::test]
    async fn blocks_from_before_a_restart_are_pruned_too() {
        let store = Store::new();
        let parameters = Parameters {
            gc_depth: 10,
            gc_retention_ms: 0,
            ..Parameters::default()
        };
        // The first life keeps every block (its retention time has not passed)...
        let mut h = harness_on(
            store.clone(),
            Parameters {
                gc_retention_ms: 60_000,
                ..parameters.clone()
            },
        );
        h.application_keeps_up();
        let chain = h.chain(None, 1, 30);
        for block in &chain {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        assert_eq!(store.blocks().len(), 30);
        drop(h);
        // ...the second one knows them without having stored them.
        let mut restarted = harness_on(store.clone(), parameters);
        restarted.application_keeps_up();
        // A restarted node replays from genesis: it commits the stored chain again, then
        // prunes below the window, old blocks included.
        let more = restarted.chain(Some(&chain[29]), 31, 60);
        for block in more {
            restarted.core.handle_proposal(block).await.expect("valid");
        }
        assert!(!store.blocks().contains(&chain[0].digest()).expect("read"));
        assert!(
            store.blocks().len() <= 10 + 3,
            "{} blocks",
            store.blocks().len()
        );
    }

    /// A member's report of the checkpoint after `root` (of `chain`, consecutive rounds), with
    /// the proof that it committed: its child in `chain` and that child's QC.
    fn report(
        keys: &[KeyPair],
        member: usize,
        chain: &[Block],
        root: usize,
        state: &'static [u8],
    ) -> CheckpointReply {
        let child = &chain[root + 1];
        CheckpointReply {
            author: keys[member].name,
            block: chain[root].clone(),
            proof: CommitProof {
                descendants: vec![child.clone()],
                qc: qc(child.digest(), child.round, &keys[..3]),
            },
            state: bytes::Bytes::from_static(state),
        }
    }

    /// State sync: a node that has nothing (a restart on an empty store) and asked for a
    /// checkpoint adopts one once f+1 members report it, hands its state to the application,
    /// and from then on commits the blocks after it, and only those, without any block below it.
    #[tokio::test]
    async fn a_checkpoint_reported_by_f_plus_one_members_becomes_the_root() {
        let mut h = harness(Parameters {
            gc_depth: 10,
            ..Parameters::default()
        });
        // The committee's chain, rounds 1 to 60; this node saw none of it.
        let chain = h.chain(None, 1, 60);
        assert!(h.core.state_sync.should_request(), "a request goes out");
        h.core
            .handle_checkpoint(report(&h.keys, 1, &chain, 49, b"state after round 50"))
            .await
            .expect("valid");
        assert!(h.rx_restore.try_recv().is_err(), "one member is not enough");
        h.core
            .handle_checkpoint(report(&h.keys, 2, &chain, 49, b"state after round 50"))
            .await
            .expect("valid");
        let restored = h.rx_restore.try_recv().expect("f+1 members agree");
        let root = chain[49].clone();
        assert_eq!(restored.round, 50);
        assert_eq!(restored.block, root.digest());
        assert_eq!(restored.state.as_ref(), b"state after round 50");
        assert_eq!(h.core.last_committed_round, 50);

        // The blocks after the root arrive (as sync replies would bring them): those two rounds
        // behind the tip commit, nothing at or below the root does.
        for block in &chain[50..] {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        assert_eq!(h.committed(), (51..=58).collect::<Vec<Round>>());
    }

    /// Members push reports of a real checkpoint, each with a valid proof, that this node never
    /// asked for: however many agree, it does not adopt one (it would hand the application a
    /// state in the middle of its own replay). Before, unrequested replies counted as any other.
    #[tokio::test]
    async fn byzantine_checkpoint_replies_nobody_asked_for_are_ignored() {
        let mut h = harness(Parameters {
            gc_depth: 10,
            ..Parameters::default()
        });
        let chain = h.chain(None, 1, 60);
        for member in 1..4 {
            let pushed = report(&h.keys, member, &chain, 49, b"pushed state");
            h.core.handle_checkpoint(pushed).await.expect("ignored");
        }
        assert!(
            h.rx_restore.try_recv().is_err(),
            "adopted unrequested reports"
        );
        assert_eq!(h.core.last_committed_round, 0);
        assert_eq!(h.core.state_sync.held(), 0, "unrequested reports were kept");
    }

    /// Reports of a block the chain never committed (certified, but its child is two rounds
    /// later), or of a block with a forged certificate, are refused however many members send
    /// them: the block would become the node's root. Before, the block's structure was all that
    /// was checked.
    #[tokio::test]
    async fn byzantine_a_checkpoint_of_an_uncommitted_block_is_not_adopted() {
        let mut h = harness(Parameters {
            gc_depth: 10,
            ..Parameters::default()
        });
        let chain = h.chain(None, 1, 60);
        // Round 50's block, then a child of round 52 certified by a QC: 50 is not committed.
        let orphan_child = h.block(Some(&chain[49]), 52, vec![]);
        let keys = h.keys.clone();
        let uncommitted = |member: usize| CheckpointReply {
            proof: CommitProof {
                descendants: vec![orphan_child.clone()],
                qc: qc(orphan_child.digest(), 52, &keys[..3]),
            },
            ..report(&keys, member, &chain, 49, b"forged state")
        };
        // A committed block whose certificate was swapped for one with too few signers (the
        // block digest does not cover the signatures).
        let forged_qc = |member: usize| {
            let mut reply = report(&keys, member, &chain, 49, b"forged state");
            reply.block.qc.votes.truncate(1);
            reply
        };
        assert!(h.core.state_sync.should_request());
        for member in 1..4 {
            assert!(h.core.handle_checkpoint(uncommitted(member)).await.is_err());
        }
        h.core.state_sync = StateSync::new(h.core.committee.clone(), Duration::from_secs(1));
        assert!(h.core.state_sync.should_request());
        for member in 1..4 {
            assert!(h.core.handle_checkpoint(forged_qc(member)).await.is_err());
        }
        assert!(
            h.rx_restore.try_recv().is_err(),
            "adopted an unproven block"
        );
        assert_eq!(h.core.last_committed_round, 0);
    }

    /// A checkpoint not past what the node committed is ignored, however many report it.
    #[tokio::test]
    async fn a_checkpoint_behind_the_last_commit_is_ignored() {
        let (mut h, chain) = committed_chain(0).await;
        assert!(h.core.state_sync.should_request());
        for member in 1..4 {
            let reply = report(&h.keys, member, &chain, 49, b"old");
            h.core.handle_checkpoint(reply).await.expect("valid");
        }
        assert!(h.rx_restore.try_recv().is_err());
        assert_eq!(h.core.last_committed_round, 98);
    }

    /// What the helper builds its proofs from: every direct commit's child QC, pruned with the
    /// blocks.
    #[tokio::test]
    async fn direct_commits_are_recorded_and_pruned_with_the_blocks() {
        let (h, chain) = committed_chain(0).await;
        let commits = &h.core.direct_commits;
        let qc = commits.first_at_or_above(98).expect("round 98 committed");
        assert_eq!((qc.hash, qc.round), (chain[98].digest(), 99));
        assert!(commits.first_at_or_above(99).is_none());
        let floor = h.core.prune_floor();
        assert!(floor > 1);
        let oldest = commits.first_at_or_above(0).expect("some kept");
        assert_eq!(oldest.round, floor + 1);
    }

    /// The committer frees a batch early only for rounds every peer signed a QC of: the core
    /// must report the signers of the QCs it processes, and a member that never signs (behind,
    /// or down) must hold the round back.
    #[tokio::test]
    async fn reports_the_round_every_peer_certified() {
        let mut h = harness(Parameters::default());
        // QCs of rounds 1 to 4 signed by members 0, 1 and 2: member 3 holds nothing we know of.
        let chain = h.chain(None, 1, 5);
        for block in &chain {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        assert_eq!(*h.rx_held_by_all.borrow(), 0);
        // Members 1, 2 and 3 certify round 5.
        let parent = &chain[4];
        let qc = qc(parent.digest(), parent.round, &h.keys[1..]);
        let block = signed_block(qc, None, 6, vec![], h.leader(6));
        h.core.handle_proposal(block).await.expect("valid");
        assert_eq!(*h.rx_held_by_all.borrow(), 5);
    }

    /// A node restarted on its store holds old blocks, but not necessarily their batches (its
    /// own GC deleted them, and peers freed them too): far behind, it asks for a checkpoint
    /// even when the block's parent is stored.
    #[tokio::test]
    async fn far_behind_asks_for_a_checkpoint_even_with_the_parent_stored() {
        let mut h = harness(Parameters {
            gc_depth: 10,
            ..Parameters::default()
        });
        let chain = h.chain(None, 1, 61);
        for block in &chain[..60] {
            h.core
                .store
                .blocks()
                .write(block.digest(), wire::encode_block(block).expect("encode"))
                .await
                .expect("write");
        }
        assert!(h.core.state_sync.should_request(), "nothing asked yet");
        h.core.state_sync = StateSync::new(h.core.committee.clone(), Duration::from_secs(60));
        h.core
            .handle_proposal(chain[60].clone())
            .await
            .expect("valid");
        assert!(
            !h.core.state_sync.should_request(),
            "a checkpoint request went out"
        );
    }

    /// A node restarted on its durable store resumes from its own last checkpoint: the whole
    /// committee may have restarted, and then no peer has one to give.
    #[tokio::test]
    async fn a_restart_on_a_store_resumes_from_the_own_checkpoint() {
        let store = Store::new();
        let parameters = Parameters {
            gc_depth: 10,
            gc_retention_ms: 0,
            ..Parameters::default()
        };
        let mut h = harness_on(store.clone(), parameters.clone());
        let chain = h.chain(None, 1, 40);
        for block in &chain {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        // The application checkpointed the state after round 35.
        let checkpoint = Checkpoint::new(
            chain[34].digest(),
            35,
            bytes::Bytes::from_static(b"state after 35"),
        );
        h.core.checkpoints.publish(checkpoint.clone());
        // Its block stays however far commits go: a restart needs it.
        let more = h.chain(Some(&chain[39]), 41, 80);
        for block in &more {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        assert!(store.blocks().contains(&chain[34].digest()).expect("read"));
        drop(h);

        let restarted = harness_on(store, parameters);
        let restored = restarted.rx_restore.try_recv().expect("restored at start");
        assert_eq!(*restored, checkpoint);
        assert_eq!(restarted.core.last_committed_round, 35);
        assert_eq!(
            restarted.core.checkpoints.latest().as_deref(),
            Some(&checkpoint)
        );
    }

    /// A chain of consecutive rounds `from..=to` extending `parent` whose block of `mine` is
    /// the one this node proposed (`own`, of that round).
    fn chain_through(h: &Harness, own: &Block, to: Round) -> Vec<Block> {
        let mut chain = vec![own.clone()];
        chain.extend(h.chain(Some(own), own.round + 1, to));
        chain
    }

    /// This node proposes a block carrying a batch, is cut off while the others commit it, and
    /// comes back by adopting a checkpoint above it: the batch is committed, so it must not be
    /// proposed again (peers refuse it as committed for the GC window, so every round this node
    /// leads times out, and once they forget it the batch commits a second time). The mempool
    /// hears that the block committed (its batches no longer count against their author) and
    /// the committer gets it to collect its batches. Before, `take_root` queued the batch again.
    #[tokio::test]
    async fn recovery_a_checkpoint_above_our_own_block_does_not_make_us_propose_it_again() {
        let mut h = harness(Parameters {
            gc_depth: 10,
            ..Parameters::default()
        });
        let me = h.keys[0].name;
        let mine = (2..)
            .find(|r| h.leader(*r).name == me)
            .expect("we lead a round");
        let before = h.chain(None, 1, mine - 1);
        for block in &before {
            h.core.handle_proposal(block.clone()).await.expect("valid");
        }
        let batch = Digest::of(b"our batch");
        h.core.buffer.push(batch);
        // Our round, entered by the QC of the block before it.
        h.core.round = mine;
        h.core.high_qc = qc(before[before.len() - 1].digest(), mine - 1, &h.keys[..3]);
        h.core.propose(None).await.expect("proposes");
        let own = h.core.own_blocks.pop_front().expect("proposed");
        assert_eq!(own.payload, vec![batch]);
        // Cut off: the others commit our block and go on; the node asks for a checkpoint.
        let chain = chain_through(&h, &own, 60);
        assert!(h.core.state_sync.should_request());
        for member in [1, 2] {
            h.core
                .handle_checkpoint(report(&h.keys, member, &chain, 40, b"state"))
                .await
                .expect("valid");
        }
        assert_eq!(h.core.last_committed_round, own.round + 40);
        assert!(
            h.core.buffer.is_empty(),
            "the committed batch is queued to be proposed again"
        );
        let mut released = Vec::new();
        while let Ok(message) = h.rx_mempool.try_recv() {
            if let ConsensusMempoolMessage::Committed(digests) = message {
                released.extend(digests);
            }
        }
        assert!(released.is_empty(), "our block is not stored: not known");
        let skipped = h.skipped();
        assert_eq!(
            skipped,
            vec![own.round + 40],
            "the root goes to the committer"
        );
    }

    /// The same with our block stored (we saw it and its successors before the cut): the blocks
    /// between our last commit and the root are known committed, so their batches are released
    /// from their authors' quotas and handed to the committer for collection. Before, they
    /// counted against their authors for good.
    #[tokio::test]
    async fn recovery_blocks_below_an_adopted_checkpoint_release_their_batches() {
        let mut h = harness(Parameters {
            gc_depth: 10,
            ..Parameters::default()
        });
        let batch = Digest::of(b"a peer's batch");
        let first = h.block(None, 1, vec![batch]);
        let mut chain = vec![first.clone()];
        chain.extend(h.chain(Some(&first), 2, 60));
        // Stored as sync would store them, without committing (no QC of their children here).
        for block in &chain[..3] {
            h.core.store_block(block).await.expect("stored");
        }
        h.core.payload.committed(&Block::genesis());
        assert!(h.core.state_sync.should_request());
        // Root at round 3: its ancestors 1 and 2 are stored.
        for member in [1, 2] {
            h.core
                .handle_checkpoint(report(&h.keys, member, &chain, 2, b"state"))
                .await
                .expect("valid");
        }
        assert_eq!(h.core.last_committed_round, 3);
        let mut released = Vec::new();
        while let Ok(message) = h.rx_mempool.try_recv() {
            if let ConsensusMempoolMessage::Committed(digests) = message {
                released.extend(digests);
            }
        }
        assert_eq!(released, vec![batch]);
        let skipped = h.skipped();
        assert_eq!(skipped, vec![1, 2, 3]);
    }
}
