//! Who leads a round: round-robin, or by reputation.
//!
//! Round-robin elects every member in turn, so a member that crashed (or stays silent) still gets
//! every n-th round, and each of its rounds costs the committee a timeout. With reputation (as in
//! DiemBFT v4 and Aptos's `LeaderReputation`), the leader of a round is drawn from the members
//! that took part in the chain's recent history: the authors of the last `window` blocks of the
//! chain the round extends, and the members whose votes certified them. A member that stops
//! taking part falls out of that history within `window` blocks and is then elected rarely
//! (weight 1 against 1,000), so it costs a timeout now and then, not every n-th round; once it
//! takes part again (its votes are in a certificate, or a block of its is certified) it is back
//! at full weight.
//!
//! Agreement. Every input is in the chain the round's proposal extends, named by the
//! certificate that opened the round: the QC of the previous round in the common case (the
//! anchor is the block it certifies), or the high QC of the previous round's TC after a timeout.
//! Nodes holding the same certificate and the same blocks compute the same leader; the draw is
//! seeded by the round alone. A voter checks a proposal against the anchor the proposal itself
//! names, so it agrees with the proposer. A node that lacks a block of the window cannot
//! compute it (`None`): it does not vote or propose until it has synced the chain.
//!
//! What a Byzantine member can do. It cannot raise its own weight above an honest member's, nor
//! pick the seed. As the aggregator of a round's votes it can leave an honest member out of that
//! QC, but honest aggregators include every vote that arrives in time, and the honest member's
//! own certified blocks count too; a member left out everywhere keeps weight 1 > 0 and is back
//! after its next certified block. After a timeout, a leader with several certified branches to
//! extend could try each as an anchor: the windows differ only in their last few blocks, so the
//! choice moves little (the tests check the share it gets).

use super::messages::Block;
use crate::config::{Committee, Round, Stake};
use crypto::{Digest, Hash, PublicKey};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Weight of a member that took part in the window, and of one that did not (per unit of
/// stake). The ratio is Aptos's for failed leaders: a silent member is still drawn, rarely.
const ACTIVE_WEIGHT: u64 = 1_000;
const INACTIVE_WEIGHT: u64 = 1;

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

/// What the election reads of a block: the header fields, not the payload.
#[derive(Clone, Debug)]
struct Link {
    author: PublicKey,
    parent: Digest,
    /// The members whose votes certified the parent (the signers of the block's QC).
    parent_signers: Vec<PublicKey>,
}

pub struct LeaderElector {
    rule: LeaderRule,
    /// Members in key order, with their stake.
    members: Vec<(PublicKey, Stake)>,
    /// Blocks of the history window: how many of the anchor's chain count.
    window: usize,
    /// The authors of this many of the anchor's latest blocks are not drawn (unless no one else
    /// could be), which spreads leadership as round-robin does.
    exclude: usize,
    /// The header of every block seen with a valid signature and certificate, by digest.
    links: HashMap<Digest, Link>,
    /// Digests by round, to forget old links.
    by_round: BTreeMap<Round, Vec<Digest>>,
}

impl LeaderElector {
    pub fn new(rule: LeaderRule, committee: &Committee, window: usize) -> Self {
        let members: Vec<(PublicKey, Stake)> = committee
            .authorities
            .iter()
            .map(|(name, authority)| (*name, authority.stake))
            .collect();
        let exclude = (members.len().saturating_sub(1) / 3).min(window);
        LeaderElector {
            rule,
            members,
            window,
            exclude,
            links: HashMap::new(),
            by_round: BTreeMap::new(),
        }
    }

    pub fn rule(&self) -> LeaderRule {
        self.rule
    }

    /// Remembers the header of `block`, whose signature and certificate the caller checked.
    pub fn record(&mut self, block: &Block) {
        if self.rule == LeaderRule::RoundRobin {
            return;
        }
        let digest = block.digest();
        if self.links.contains_key(&digest) {
            return;
        }
        self.links.insert(
            digest,
            Link {
                author: block.author,
                parent: *block.parent(),
                parent_signers: block.qc.votes.iter().map(|(name, _)| *name).collect(),
            },
        );
        self.by_round.entry(block.round).or_default().push(digest);
    }

    /// Forgets the blocks below `round`.
    pub fn prune(&mut self, round: Round) {
        let keep = self.by_round.split_off(&round);
        for digest in std::mem::replace(&mut self.by_round, keep)
            .into_values()
            .flatten()
        {
            self.links.remove(&digest);
        }
    }

    /// The anchor of a proposal: the block its round's opening certificate certifies.
    pub fn anchor_of(block: &Block) -> Digest {
        match &block.tc {
            Some(tc) => tc.high_qc.hash,
            None => block.qc.hash,
        }
    }

    /// The leader of `round`, whose proposal extends the chain ending at `anchor`; `None` if a
    /// block of the window is missing here.
    pub fn leader(&self, round: Round, anchor: &Digest) -> Option<PublicKey> {
        let count = self.members.len() as u64;
        let round_robin = self.members[(round % count) as usize].0;
        match self.rule {
            LeaderRule::RoundRobin => Some(round_robin),
            LeaderRule::Reputation => self.by_reputation(round, anchor),
        }
    }

    fn by_reputation(&self, round: Round, anchor: &Digest) -> Option<PublicKey> {
        let mut active = HashSet::new();
        let mut recent = HashSet::new();
        let mut next = *anchor;
        for depth in 0..self.window {
            // The genesis block ends every chain, and has no author.
            if next == Digest::default() {
                break;
            }
            let link = self.links.get(&next)?;
            active.insert(link.author);
            active.extend(link.parent_signers.iter().copied());
            if depth < self.exclude {
                recent.insert(link.author);
            }
            next = link.parent;
        }
        let mut candidates: Vec<(PublicKey, u64)> = self
            .members
            .iter()
            .filter(|(name, _)| !recent.contains(name))
            .map(|(name, stake)| {
                let weight = if active.contains(name) {
                    ACTIVE_WEIGHT
                } else {
                    INACTIVE_WEIGHT
                };
                (*name, weight * u64::from(*stake))
            })
            .collect();
        if candidates.is_empty() {
            candidates = self
                .members
                .iter()
                .map(|(name, stake)| (*name, u64::from(*stake)))
                .collect();
        }
        let total: u64 = candidates.iter().map(|(_, w)| w).sum();
        let mut draw = seed(round) % total.max(1);
        for (name, weight) in &candidates {
            if draw < *weight {
                return Some(*name);
            }
            draw -= weight;
        }
        candidates.last().map(|(name, _)| *name)
    }
}

/// A number every node derives from the round alone, so no one can steer it.
fn seed(round: Round) -> u64 {
    let digest = Digest::of_parts([b"hotmove/leader".as_slice(), &round.to_le_bytes()]);
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests;
