//! What the liar knows: the certificates, blocks and votes it heard (and its core sent), its
//! own leader election over those blocks, and the signed messages it may replay. Kept by round
//! and content, never in the order heard (see `liar.rs`), and only for the latest rounds.

use crate::liveness::leader::{LeaderElector, Opening};
use crate::messages::{Block, QC, TC};
use crate::twins::choice::hash;
use crate::wire::ConsensusMessage;
use bytes::Bytes;
use config::{Committee, LeaderRule, Round};
use crypto::{Digest, Hash as _, PublicKey, Signature};
use std::collections::{BTreeMap, BTreeSet};

/// What the liar keeps covers this many rounds below the highest it heard of.
const KEPT_ROUNDS: Round = 32;

pub struct Memory {
    /// Its own election, fed with every block it hears: which old TC names it.
    elector: LeaderElector,
    /// One QC and one TC per round (the one whose content hashes lowest).
    qcs: BTreeMap<Round, (u64, QC)>,
    tcs: BTreeMap<Round, (u64, TC)>,
    /// The blocks of each round it heard of, and the votes it heard for them.
    proposals: BTreeMap<Round, BTreeSet<Digest>>,
    votes: BTreeMap<(Round, Digest), BTreeMap<PublicKey, Signature>>,
    /// Signed proposals, votes, timeouts and TCs, to replay.
    heard: BTreeMap<(Round, u64), Bytes>,
    top: Round,
}

impl Memory {
    pub fn new(rule: LeaderRule, committee: &Committee, window: usize) -> Self {
        Memory {
            elector: LeaderElector::new(rule, committee, window),
            qcs: BTreeMap::new(),
            tcs: BTreeMap::new(),
            proposals: BTreeMap::new(),
            votes: BTreeMap::new(),
            heard: BTreeMap::new(),
            top: 0,
        }
    }

    /// Learns from `message` (whose bytes are `bytes`).
    pub fn hear(&mut self, message: &ConsensusMessage, bytes: &Bytes) {
        let round = round_of(message);
        match message {
            ConsensusMessage::Propose(block) => self.hear_block(block),
            ConsensusMessage::Chain(blocks) => blocks.iter().for_each(|b| self.hear_block(b)),
            ConsensusMessage::Vote(vote) => {
                self.votes
                    .entry((vote.round, vote.hash))
                    .or_default()
                    .insert(vote.author, vote.signature);
            }
            ConsensusMessage::Timeout(timeout) => self.learn_qc(&timeout.high_qc),
            ConsensusMessage::TC(tc) => self.learn_tc(tc),
            _ => return,
        }
        if !matches!(message, ConsensusMessage::Chain(_)) {
            self.heard.insert((round, hash(&bytes[..])), bytes.clone());
        }
        self.top = self.top.max(round);
        let floor = self.top.saturating_sub(KEPT_ROUNDS);
        self.heard = self.heard.split_off(&(floor, 0));
        self.proposals = self.proposals.split_off(&floor);
        self.votes = self.votes.split_off(&(floor, Digest::default()));
    }

    fn hear_block(&mut self, block: &Block) {
        self.elector.record(block);
        self.proposals
            .entry(block.round)
            .or_default()
            .insert(block.digest());
        self.learn_qc(&block.qc);
        if let Some(tc) = &block.tc {
            self.learn_tc(tc);
        }
    }

    fn learn_qc(&mut self, qc: &QC) {
        if qc.is_genesis() {
            return;
        }
        let names: Vec<&PublicKey> = qc.votes.iter().map(|(name, _)| name).collect();
        let key = hash((qc.hash, names));
        match self.qcs.get(&qc.round) {
            Some((known, _)) if *known <= key => {}
            _ => {
                self.qcs.insert(qc.round, (key, qc.clone()));
            }
        }
    }

    fn learn_tc(&mut self, tc: &TC) {
        self.learn_qc(&tc.high_qc);
        let names: Vec<&PublicKey> = tc.votes.iter().map(|(name, ..)| name).collect();
        let key = hash((tc.round, tc.high_qc.hash, names));
        match self.tcs.get(&tc.round) {
            Some((known, _)) if *known <= key => {}
            _ => {
                self.tcs.insert(tc.round, (key, tc.clone()));
            }
        }
    }

    /// The leader of `round` opened by `opening`, by the liar's election.
    pub fn leader(&self, round: Round, opening: Opening<'_>) -> Option<PublicKey> {
        self.elector.leader(round, opening)
    }

    /// The highest QC it heard of.
    pub fn highest_qc(&self) -> Option<&QC> {
        self.qcs.last_key_value().map(|(_, (_, qc))| qc)
    }

    /// Its QC of the highest round below `round` (the genesis QC if none).
    pub fn qc_below(&self, round: Round) -> QC {
        let below = self.qcs.range(..round).next_back();
        below.map_or_else(QC::genesis, |(_, (_, qc))| qc.clone())
    }

    /// Its TCs of rounds below `round`, newest first.
    pub fn tcs_below(&self, round: Round) -> impl Iterator<Item = &TC> {
        self.tcs.range(..round).rev().map(|(_, (_, tc))| tc)
    }

    /// The newest TC of a round before `round - 1` whose election names `name` for `round`.
    pub fn old_tc_electing(&self, round: Round, name: &PublicKey) -> Option<TC> {
        self.tcs_below(round.saturating_sub(1))
            .find(|tc| self.leader(round, Opening::Tc(tc)).as_ref() == Some(name))
            .cloned()
    }

    /// The blocks of `round` it heard of other than `except`.
    pub fn other_proposals(&self, round: Round, except: &Digest) -> Vec<Digest> {
        let heard = self.proposals.get(&round).into_iter().flatten();
        heard.filter(|d| *d != except).copied().collect()
    }

    /// The votes it heard for the block `digest` of `round`.
    pub fn votes_for(
        &self,
        round: Round,
        digest: Digest,
    ) -> impl Iterator<Item = (PublicKey, Signature)> + '_ {
        let heard = self.votes.get(&(round, digest)).into_iter().flatten();
        heard.map(|(name, signature)| (*name, *signature))
    }

    /// The signed messages it heard of rounds below `round`, with their rounds.
    pub fn older_than(&self, round: Round) -> Vec<(Round, &Bytes)> {
        let older = self.heard.range(..(round, 0));
        older.map(|((round, _), bytes)| (*round, bytes)).collect()
    }
}

/// The round a consensus message belongs to (a chain's newest block's).
pub fn round_of(message: &ConsensusMessage) -> Round {
    match message {
        ConsensusMessage::Propose(block) => block.round,
        ConsensusMessage::Vote(vote) => vote.round,
        ConsensusMessage::Timeout(timeout) => timeout.round,
        ConsensusMessage::TC(tc) => tc.round,
        ConsensusMessage::Chain(blocks) => blocks.first().map_or(0, |b| b.round),
        _ => 0,
    }
}
