//! The lying instance. One of the Byzantine member's two instances runs its real core, as its
//! twin does, but what the core sends passes through a `Liar` on its way to the network, which
//! rewrites it (which lies: `scenario::Lies`) and signs what it makes up with the member's real
//! key: honest instances accept the signatures, and the lying is in what it chooses to sign and
//! to whom it sends it. It also hears what reaches its instance, to learn the certificates,
//! blocks and votes it lies with.
//!
//! Every choice is a hash of the seed and of what it is about (a message's content, a round, a
//! receiver), never a draw from a stream: the order in which messages sent at one instant reach
//! the network may vary between two runs of a seed (see `network.rs`), and a choice that read a
//! stream in that order would too. What it knows is kept by round and content (`memory.rs`)
//! for the same reason, so a seed replays to the same lies.

mod memory;

use super::choice::hash;
use super::scenario::{Lies, Withhold};
use crate::liveness::leader::Opening;
use crate::messages::tests::{signed_block, timeout, vote};
use crate::messages::{Block, Timeout, Vote};
use crate::wire::{self, ConsensusMessage};
use bytes::Bytes;
use config::{Committee, LeaderRule, Round};
use crypto::{KeyPair, PublicKey};
use memory::{round_of, Memory};
use std::collections::BTreeSet;
use std::hash::Hash;
use std::time::Duration;

/// A message the liar sends: to one instance, once `after` has passed (before the link's own
/// delay).
#[derive(Clone, Debug)]
pub struct Forged {
    pub to: usize,
    /// The round it goes by in the partitions (its own; a replayed message keeps its old one).
    pub round: Round,
    pub bytes: Bytes,
    pub after: Duration,
}

/// What the liar did over a run, for the report and for tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Told {
    /// Messages it handed the network, lies or not.
    pub sent: u64,
    /// Proposals sent carrying a certificate older than the round's (an old TC, or a QC of
    /// an earlier round than the one before with no TC of that round): counted on what was
    /// sent, whichever lie made it.
    pub older_certificates: u64,
    /// Of those, blocks of rounds its core did not propose in, whose old TC elects it.
    pub usurpations: u64,
    /// Messages sent to some peers of a round while others got another version.
    pub equivocations: u64,
    pub withheld: u64,
    pub delayed: u64,
    pub replayed: u64,
    /// A hash of every message sent, its receiver and its time, summed so that the order of
    /// messages sent at one instant does not count.
    pub fingerprint: u64,
}

/// Whether `block` carries a certificate older than the one that opens its round: a TC of a
/// round before `round - 1`, or, with no TC, a QC of such a round.
pub fn carries_older_certificate(block: &Block) -> bool {
    let before = block.round.saturating_sub(1);
    match &block.tc {
        Some(tc) => tc.round < before,
        None => block.qc.round < before,
    }
}

pub struct Liar {
    pub instance: usize,
    keys: KeyPair,
    seed: u64,
    lies: Lies,
    /// Every other instance.
    peers: Vec<usize>,
    timeout_delay: Duration,
    max_link_delay: Duration,
    memory: Memory,
    /// Rounds it sent a block of usurping the round's leader.
    usurped: BTreeSet<Round>,
    /// The peers it sent a vote for another block to, by round: once each (its core's vote of
    /// a round may go out once per address).
    lied_to: BTreeSet<(Round, usize)>,
    pub told: Told,
}

/// What a `Liar` needs of the scenario and the run.
pub struct Setting<'a> {
    pub instance: usize,
    pub instances: usize,
    pub keys: KeyPair,
    pub committee: &'a Committee,
    pub rule: LeaderRule,
    pub window: usize,
    pub seed: u64,
    pub lies: Lies,
    pub timeout_delay: Duration,
    pub max_link_delay: Duration,
}

impl Liar {
    pub fn new(setting: Setting<'_>) -> Self {
        Liar {
            instance: setting.instance,
            keys: setting.keys,
            seed: setting.seed,
            lies: setting.lies,
            peers: (0..setting.instances)
                .filter(|i| *i != setting.instance)
                .collect(),
            timeout_delay: setting.timeout_delay,
            max_link_delay: setting.max_link_delay,
            memory: Memory::new(setting.rule, setting.committee, setting.window),
            usurped: BTreeSet::new(),
            lied_to: BTreeSet::new(),
            told: Told::default(),
        }
    }

    /// A number for the choice `parts` describe, the same in every run of the seed.
    fn choose(&self, parts: impl Hash) -> u64 {
        hash((self.seed, self.instance, parts))
    }

    /// Whether the choice `parts` describe falls on its side with odds 1/2.
    fn coin(&self, parts: impl Hash) -> bool {
        self.choose(parts).is_multiple_of(2)
    }

    /// What its core sent (`bytes`, to the instances `receivers`) becomes what it sends.
    pub fn rewrite(&mut self, bytes: &Bytes, receivers: &[usize]) -> Vec<Forged> {
        let Ok(message) = wire::decode(bytes) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        self.hear(&message, bytes, &mut out);
        let round = round_of(&message);
        let lies = self.lies;
        match message {
            ConsensusMessage::Propose(block) if block.author == self.keys.name => {
                self.propose(&block, receivers, &mut out)
            }
            ConsensusMessage::Vote(vote) => {
                if lies.equivocate {
                    self.equivocate_vote(&vote, receivers, &mut out);
                }
                for to in receivers {
                    self.hold_back(*to, round, bytes.clone(), &mut out);
                }
            }
            ConsensusMessage::Timeout(timeout) => {
                for to in receivers {
                    match self.lower_timeout(&timeout, *to) {
                        Some(lower) => {
                            let lower = encode(&ConsensusMessage::Timeout(lower));
                            self.told.equivocations += 1;
                            self.hold_back(*to, round, lower, &mut out);
                        }
                        None => self.hold_back(*to, round, bytes.clone(), &mut out),
                    }
                }
            }
            _ => out.extend(receivers.iter().map(|to| Forged {
                to: *to,
                round,
                bytes: bytes.clone(),
                after: Duration::ZERO,
            })),
        }
        if lies.replay {
            self.replay(bytes, round, receivers, &mut out);
        }
        out
    }

    /// What reached its instance; returns what it sends in answer (blocks usurping a round).
    pub fn hear_delivered(&mut self, bytes: &Bytes) -> Vec<Forged> {
        let mut out = Vec::new();
        if let Ok(message) = wire::decode(bytes) {
            self.hear(&message, bytes, &mut out);
        }
        out
    }

    /// Counts what goes out; every message leaves through here.
    pub fn sent(&mut self, forged: &Forged, at_ms: u64) {
        self.told.sent += 1;
        let content = hash(&forged.bytes[..]);
        self.told.fingerprint =
            self.told
                .fingerprint
                .wrapping_add(hash((at_ms, forged.to, forged.after, content)));
        if let Ok(ConsensusMessage::Propose(block)) = wire::decode(&forged.bytes) {
            if carries_older_certificate(&block) {
                self.told.older_certificates += 1;
            }
        }
    }

    fn hear(&mut self, message: &ConsensusMessage, bytes: &Bytes, out: &mut Vec<Forged>) {
        self.memory.hear(message, bytes);
        if self.lies.old_certificates {
            self.usurp(out);
        }
    }

    /// With the QC of round r - 1 in hand and the round's leader someone else, a block of round
    /// r that carries an old TC electing the liar: a check that lets an old TC in lets it lead
    /// a round it was not elected for.
    fn usurp(&mut self, out: &mut Vec<Forged>) {
        let Some(qc) = self.memory.highest_qc() else {
            return;
        };
        let round = qc.round + 1;
        let name = self.keys.name;
        if self.usurped.contains(&round)
            || self.memory.leader(round, Opening::Qc(&qc.hash)) == Some(name)
        {
            return;
        }
        let Some(tc) = self.memory.old_tc_electing(round, &name) else {
            return;
        };
        let block = signed_block(qc.clone(), Some(tc), round, Vec::new(), &self.keys);
        self.usurped.insert(round);
        self.told.usurpations += 1;
        let bytes = encode(&ConsensusMessage::Propose(block));
        for to in self.peers.clone() {
            out.push(Forged {
                to,
                round,
                bytes: bytes.clone(),
                after: Duration::ZERO,
            });
        }
    }

    /// Its core's own proposal, to each receiver as it is, with an older certificate, or in
    /// another version.
    fn propose(&mut self, block: &Block, receivers: &[usize], out: &mut Vec<Forged>) {
        let aged = self
            .lies
            .old_certificates
            .then(|| self.aged(block))
            .flatten();
        let other = self.lies.equivocate.then(|| self.other(block)).flatten();
        let original = encode(&ConsensusMessage::Propose(block.clone()));
        let aged = aged.map(|b| encode(&ConsensusMessage::Propose(b)));
        let other = other.map(|b| encode(&ConsensusMessage::Propose(b)));
        for to in receivers {
            let bytes = match (&aged, &other) {
                (Some(aged), _) if self.coin(("aged", block.round, *to)) => aged.clone(),
                (_, Some(other)) if self.coin(("other", block.round, *to)) => {
                    self.told.equivocations += 1;
                    other.clone()
                }
                _ => original.clone(),
            };
            out.push(Forged {
                to: *to,
                round: block.round,
                bytes,
                after: Duration::ZERO,
            });
        }
    }

    /// `block` with an older certificate: an old TC beside the QC of the round before
    /// (preferably one whose election names the liar; with no old TC, an older QC in place of
    /// that QC), or, after a TC, an older QC than its own.
    fn aged(&self, block: &Block) -> Option<Block> {
        let before = block.round.checked_sub(1)?;
        let (qc, tc) = match &block.tc {
            None if block.qc.round == before && before > 0 => {
                let electing = self.memory.old_tc_electing(block.round, &self.keys.name);
                match electing.or_else(|| self.memory.tcs_below(before).next().cloned()) {
                    Some(tc) => (block.qc.clone(), Some(tc)),
                    None => (self.memory.qc_below(before), None),
                }
            }
            Some(_) => {
                let qc = self.memory.qc_below(block.qc.round);
                if qc == block.qc {
                    return None;
                }
                (qc, block.tc.clone())
            }
            None => return None,
        };
        let round = block.round;
        Some(signed_block(
            qc,
            tc,
            round,
            block.payload.clone(),
            &self.keys,
        ))
    }

    /// Another version of `block`: its QC with another signer set (its own vote, or one it
    /// heard, in place of a signer), or else its payload without its last batch.
    fn other(&self, block: &Block) -> Option<Block> {
        let mut qc = block.qc.clone();
        let signers: BTreeSet<PublicKey> = qc.votes.iter().map(|(name, _)| *name).collect();
        let spare = self
            .memory
            .votes_for(qc.round, qc.hash)
            .chain((!qc.is_genesis()).then(|| {
                let own = vote(qc.hash, qc.round, &self.keys);
                (own.author, own.signature)
            }))
            .find(|(name, _)| !signers.contains(name));
        let mut payload = block.payload.clone();
        match spare {
            Some(spare) if !qc.votes.is_empty() => {
                let at = (self.choose(("signer", block.round)) % qc.votes.len() as u64) as usize;
                qc.votes[at] = spare;
            }
            _ if !payload.is_empty() => {
                payload.pop();
            }
            _ => return None,
        }
        Some(signed_block(
            qc,
            block.tc.clone(),
            block.round,
            payload,
            &self.keys,
        ))
    }

    /// Besides its vote to the round's next leader, votes for other blocks of the round it
    /// heard of, signed, to some of the other peers.
    fn equivocate_vote(&mut self, own: &Vote, receivers: &[usize], out: &mut Vec<Forged>) {
        let others = self.memory.other_proposals(own.round, &own.hash);
        if others.is_empty() {
            return;
        }
        self.lied_to = self.lied_to.split_off(&(own.round, 0));
        for to in self.peers.clone() {
            if receivers.contains(&to)
                || !self.coin(("vote", own.round, to))
                || !self.lied_to.insert((own.round, to))
            {
                continue;
            }
            let pick = (self.choose(("which", own.round, to)) % others.len() as u64) as usize;
            let lie = vote(others[pick], own.round, &self.keys);
            self.told.equivocations += 1;
            let bytes = encode(&ConsensusMessage::Vote(lie));
            self.hold_back(to, own.round, bytes, out);
        }
    }

    /// To some receivers, `timeout` reporting a lower high QC than its own (one it heard).
    fn lower_timeout(&self, own: &Timeout, to: usize) -> Option<Timeout> {
        if !self.lies.equivocate || own.high_qc.round == 0 || !self.coin(("timeout", own.round, to))
        {
            return None;
        }
        let high_qc = self.memory.qc_below(own.high_qc.round);
        Some(timeout(own.round, high_qc, &self.keys))
    }

    /// A vote or a timeout, withheld, held back until just before the receivers' round timers
    /// fire, or sent.
    fn hold_back(&mut self, to: usize, round: Round, bytes: Bytes, out: &mut Vec<Forged>) {
        let after = match self.lies.withhold {
            Some(Withhold::Drop) => {
                self.told.withheld += 1;
                return;
            }
            Some(Withhold::Delay) => {
                self.told.delayed += 1;
                // The link adds up to its largest delay; a margin of 1-50 ms keeps the message
                // ahead of a timer started when the liar's was.
                let margin = Duration::from_millis(1 + self.choose(("margin", round, to)) % 50);
                self.timeout_delay
                    .saturating_sub(self.max_link_delay + margin)
            }
            None => Duration::ZERO,
        };
        out.push(Forged {
            to,
            round,
            bytes,
            after,
        });
    }

    /// Now and then, beside what its core sent (`bytes`, of `round`, to `receivers`), a message
    /// of an earlier round it heard or sent goes out again, to one peer, within a round timer's
    /// delay.
    fn replay(&mut self, bytes: &Bytes, round: Round, receivers: &[usize], out: &mut Vec<Forged>) {
        let choice = self.choose(("replay", hash(&bytes[..]), receivers));
        if !choice.is_multiple_of(4) {
            return;
        }
        let older = self.memory.older_than(round);
        if older.is_empty() {
            return;
        }
        let (old_round, old) = older[((choice >> 8) % older.len() as u64) as usize];
        let old = old.clone();
        let to = self.peers[((choice >> 24) % self.peers.len() as u64) as usize];
        let delay = self.timeout_delay.as_millis().max(1) as u64;
        let after = Duration::from_millis((choice >> 40) % delay);
        out.push(Forged {
            to,
            round: old_round,
            bytes: old,
            after,
        });
        self.told.replayed += 1;
    }
}

fn encode(message: &ConsensusMessage) -> Bytes {
    match wire::encode(message) {
        Ok(bytes) => bytes,
        Err(e) => panic!("the liar cannot encode its message: {e}"),
    }
}

#[cfg(test)]
mod tests;
