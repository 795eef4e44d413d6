//! The HotStuff state machine: voting, certificates, the pacemaker and the commit rule.
//!
//! This is the two-chain variant (as in Jolteon / DiemBFT v4): a block commits once it and a
//! child of the next round are both certified. The voting rules that make it safe live in
//! `safety.rs`.

use super::aggregator::{Aggregator, AggregatorError};
use super::committer::GcWindow;
use super::messages::{Block, ConsensusMessage, MessageError, Timeout, Vote, QC, TC};
use super::metrics::ConsensusMetrics;
use super::payload::{PayloadError, PayloadWaiter};
use super::proposer::PayloadBuffer;
use super::safety::{self, SafetyRules};
use super::synchronizer::{SyncError, Synchronizer};
use super::timer::Timer;
use super::wire;
use crate::config::{Committee, Parameters, Round};
use crate::mempool::ConsensusMempoolMessage;
use crate::network::{CancelHandler, ReliableSender};
use crate::store::{Store, StoreError};
use crypto::{Digest, Hash, PublicKey, SignatureService};
use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::time::{sleep, Instant, Sleep};
use tracing::{debug, error, info, warn};

#[derive(Debug, Error)]
pub enum ConsensusError {
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error(transparent)]
    Aggregator(#[from] AggregatorError),
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error("encoding failed: {0}")]
    Encoding(#[from] bincode::Error),
    #[error("block {0} missing from the store during commit")]
    MissingAncestor(Digest),
    #[error("a downstream channel closed")]
    ChannelClosed,
}

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
    tx_commit: mpsc::Sender<Block>,
    tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
    metrics: Arc<ConsensusMetrics>,

    round: Round,
    safety: SafetyRules,
    last_committed_round: Round,
    last_committed: Digest,
    /// Our vote of the current round, re-broadcast if the round times out (see
    /// `local_timeout_round`).
    last_vote: Option<Vote>,
    /// An honest leader proposes once per round, however many certificates reach it.
    last_proposed_round: Round,
    high_qc: QC,
    timer: Timer,
    network: ReliableSender,
    cancel_handlers: BTreeMap<Round, Vec<CancelHandler>>,
    buffer: PayloadBuffer,
    /// Our own blocks, processed like any received block once the current event is handled.
    own_blocks: VecDeque<Block>,
    /// A proposal we hold back while the chain is idle (see `should_wait`).
    pending_proposal: Option<Option<TC>>,
    proposal_deadline: Pin<Box<Sleep>>,
}

pub struct CoreChannels {
    pub rx_message: mpsc::Receiver<ConsensusMessage>,
    pub rx_loopback: mpsc::Receiver<Block>,
    pub tx_loopback: mpsc::Sender<Block>,
    pub rx_digests: mpsc::Receiver<Digest>,
    pub tx_commit: mpsc::Sender<Block>,
    pub tx_mempool: mpsc::Sender<ConsensusMempoolMessage>,
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
    ) {
        let synchronizer = Synchronizer::spawn(
            name,
            committee.clone(),
            store.clone(),
            Duration::from_millis(parameters.sync_retry_delay),
            channels.tx_loopback.clone(),
        );
        let payload = PayloadWaiter::new(
            store.clone(),
            channels.tx_mempool.clone(),
            channels.tx_loopback,
            GcWindow::new(&parameters),
        );
        let core = Core {
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
            metrics,
            round: 1,
            safety: SafetyRules::default(),
            last_vote: None,
            last_proposed_round: 0,
            last_committed_round: 0,
            last_committed: Block::genesis().qc.hash,
            high_qc: QC::genesis(),
            network: ReliableSender::new(),
            cancel_handlers: BTreeMap::new(),
            buffer: PayloadBuffer::default(),
            own_blocks: VecDeque::new(),
            pending_proposal: None,
            proposal_deadline: Box::pin(sleep(Duration::ZERO)),
        };
        tokio::spawn(core.run());
    }

    async fn run(mut self) {
        self.metrics.round.store(self.round, Ordering::Relaxed);
        // The leader of the first round proposes without waiting for a certificate.
        if self.name == self.committee.leader(self.round) {
            self.try_propose(None).await;
        }
        loop {
            let result = tokio::select! {
                Some(message) = self.rx_message.recv() => match message {
                    ConsensusMessage::Propose(block) => self.handle_proposal(block).await,
                    ConsensusMessage::Vote(vote) => self.handle_vote(vote).await,
                    ConsensusMessage::Timeout(timeout) => self.handle_timeout(timeout).await,
                    ConsensusMessage::TC(tc) => self.handle_tc(tc).await,
                    // Routed to the helper by the network handler; nothing to do here.
                    ConsensusMessage::SyncRequest(..) => Ok(()),
                },
                Some(block) = self.rx_loopback.recv() => {
                    self.payload.resolved(&block.digest());
                    self.process_block(&block).await
                },
                Some(digest) = self.rx_digests.recv() => {
                    self.buffer.push(digest);
                    match self.pending_proposal.take() {
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
                    ConsensusError::Message(e) => warn!("rejected message: {e}"),
                    e => warn!("{e}"),
                }
            }
            while let Some(block) = self.own_blocks.pop_front() {
                if let Err(e) = self.process_block(&block).await {
                    warn!("own block {:?}: {e}", block);
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
        self.metrics.timeouts.fetch_add(1, Ordering::Relaxed);
        self.safety.timed_out(self.round);
        // Votes go to the next leader only. If that leader is down, the block we voted for
        // would never be certified and its batches would wait for a later proposal of the same
        // node, which with round-robin leaders lands before the dead leader again: that node
        // would starve. Sending our vote to everyone lets the others certify the block anyway,
        // so the TC that follows carries its QC. (A vote is a vote: this changes no safety
        // argument, only who gets to count it.)
        if let Some(vote) = self.last_vote.take().filter(|v| v.round == self.round) {
            self.broadcast(&ConsensusMessage::Vote(vote.clone()))
                .await?;
            if self.committee.leader(self.round + 1) != self.name {
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
        self.timer.reset();
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
        // A proposal held back for an earlier round is moot.
        self.pending_proposal = None;
        let keep = self
            .cancel_handlers
            .split_off(&self.round.saturating_sub(KEEP_HANDLERS_ROUNDS));
        self.cancel_handlers = keep;
    }

    fn update_high_qc(&mut self, qc: &QC) {
        if qc.round > self.high_qc.round {
            self.high_qc = qc.clone();
        }
    }

    async fn process_qc(&mut self, qc: &QC) {
        self.advance_round(qc.round).await;
        self.update_high_qc(qc);
    }

    // ---- proposing ---------------------------------------------------------------------------

    /// True when proposing now would only add an empty block to an idle chain: nothing queued,
    /// and neither of the two blocks the next commit would need carries a payload.
    fn should_wait(&self) -> Result<bool, ConsensusError> {
        if !self.buffer.is_empty() {
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

    /// Proposes now, or (on an idle chain) once a digest arrives or `max_batch_delay` passes,
    /// so an idle committee does not spin through empty rounds as fast as the network allows.
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
        if self.committee.leader(self.round) != self.name || self.round <= self.last_proposed_round
        {
            return Ok(());
        }
        self.last_proposed_round = self.round;
        let payload = self
            .buffer
            .take(self.round, self.parameters.max_block_digests);
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
        self.own_blocks.push_back(block);
        Ok(())
    }

    // ---- voting ------------------------------------------------------------------------------

    async fn make_vote(&mut self, block: &Block) -> Option<Vote> {
        if !self.safety.vote(block) {
            return None;
        }
        Some(Vote::new(block, self.name, &self.signature_service).await)
    }

    async fn handle_vote(&mut self, vote: Vote) -> Result<(), ConsensusError> {
        // Votes of the previous round still count: re-broadcast on a timeout, they may arrive
        // after the TC of that round moved us on.
        if vote.round + 1 < self.round {
            return Ok(());
        }
        vote.verify(&self.committee)?;
        if let Some(qc) = self.aggregator.add_vote(vote)? {
            debug!("assembled {:?}", qc);
            self.process_qc(&qc).await;
            if self.name == self.committee.leader(self.round) {
                self.try_propose(None).await;
            }
        }
        Ok(())
    }

    async fn handle_timeout(&mut self, timeout: Timeout) -> Result<(), ConsensusError> {
        if timeout.round < self.round {
            return Ok(());
        }
        timeout.verify(&self.committee)?;
        self.process_qc(&timeout.high_qc).await;
        if let Some(tc) = self.aggregator.add_timeout(timeout)? {
            debug!("assembled {:?}", tc);
            self.advance_round(tc.round).await;
            self.broadcast(&ConsensusMessage::TC(tc.clone())).await?;
            if self.name == self.committee.leader(self.round) {
                self.try_propose(Some(tc)).await;
            }
        }
        Ok(())
    }

    async fn handle_tc(&mut self, tc: TC) -> Result<(), ConsensusError> {
        if tc.round < self.round {
            return Ok(());
        }
        tc.verify(&self.committee)?;
        self.advance_round(tc.round).await;
        if self.name == self.committee.leader(self.round) {
            self.try_propose(Some(tc)).await;
        }
        Ok(())
    }

    async fn handle_proposal(&mut self, block: Block) -> Result<(), ConsensusError> {
        block.verify(&self.committee)?;
        self.process_qc(&block.qc).await;
        if let Some(tc) = &block.tc {
            self.advance_round(tc.round).await;
        }
        self.process_block(&block).await
    }

    /// Stores a verified block once its payload and ancestors are here, applies the commit rule
    /// and votes. Blocks waiting for data come back here through the loopback channel.
    async fn process_block(&mut self, block: &Block) -> Result<(), ConsensusError> {
        if !self.payload.available(block).await? {
            return Ok(());
        }
        let Some((b0, b1)) = self.synchronizer.get_ancestors(block).await? else {
            return Ok(());
        };
        self.store
            .blocks()
            .write(block.digest(), wire::encode_block(block)?)?;

        // b0 <- b1 <- block: block certifies b1, b1 certifies b0.
        if safety::commits(&b0, &b1) && b0.round > self.last_committed_round {
            self.commit(b0).await?;
        }

        // Only vote in the current round; this also stops far-future blocks from moving us.
        if block.round != self.round {
            return Ok(());
        }
        if let Some(vote) = self.make_vote(block).await {
            self.last_vote = Some(vote.clone());
            let next_leader = self.committee.leader(self.round + 1);
            if next_leader == self.name {
                self.handle_vote(vote).await?;
            } else if let Some(authority) = self.committee.authority(&next_leader) {
                let address = authority.consensus_address;
                let bytes = wire::encode(&ConsensusMessage::Vote(vote))?;
                let handler = self.network.send(address, bytes).await;
                self.keep_handlers(vec![handler]);
            }
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
                    // Two-chain safety says this cannot happen with f or fewer faults.
                    error!(
                        "SAFETY: block {:?} does not extend the last committed block {}",
                        chain[0], self.last_committed
                    );
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
        for block in chain {
            if block.author == self.name {
                self.buffer.committed(block.round);
            }
            self.payload.committed(&block);
            info!("committed {:?}", block);
            self.metrics
                .committed_blocks
                .fetch_add(1, Ordering::Relaxed);
            self.tx_commit
                .send(block)
                .await
                .map_err(|_| ConsensusError::ChannelClosed)?;
        }
        self.buffer.finalize_up_to(self.last_committed_round);
        self.payload.cleanup(self.last_committed_round);
        let _ = self
            .tx_mempool
            .send(ConsensusMempoolMessage::Cleanup(self.last_committed_round))
            .await;
        Ok(())
    }
}
