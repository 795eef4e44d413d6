//! Who leads a round: round-robin, or by reputation.
//!
//! Round-robin elects every member in turn, so a member that crashed (or stays silent) still gets
//! every n-th round, and each of its rounds costs the committee a timeout. With reputation (as in
//! DiemBFT v4 and Aptos's `LeaderReputation`), the leader is drawn, with a seed that is the round
//! alone, by weight:
//!
//! - A round opened by a QC (the common case) reads the last `window` blocks of the chain the QC
//!   certifies. A member whose latest turn as leader in it failed (a later block carries the TC
//!   of its round) weighs 1; one that authored a block or signed a certificate there, 1,000;
//!   anyone else 1. So a crashed member stops being elected after its first failed round, a
//!   silent one after a window, and both are still tried now and then; a block of theirs or
//!   their votes in a certificate bring them back. The authors of the last f blocks sit out,
//!   which spreads leadership as round-robin does.
//! - A round opened by a TC reads the same window of the chain the TC's high QC certifies, and
//!   the leader of the round the TC ended counts as failed. Nodes hold TCs of one round signed
//!   by different quorums, but their high QCs nearly always name the same block (each node takes
//!   up the high QC of every TC it sees), so they name the same leader. When several rounds in a
//!   row time out, each one's leader is worked out from the same chain in turn.
//!
//! Agreement. Every input is in the certificate that opened the round and the chain it names, and
//! the rule reads only what block digests bind: a block's author, round, parent, the TC it
//! carries and the signers of its QC (`Block::digest` covers them, so one digest cannot stand for
//! copies with different signer sets). Nodes holding the same certificate and blocks therefore
//! elect the same leader. Only the certificate of round r - 1 opens round r
//! (`Block::check_structure`): a block of round r carries that QC, or a TC of round r - 1, never
//! an older one, so a proposer cannot pick the history the draw reads. A voter checks a proposal
//! against the certificate the proposal itself carries, so it agrees with the proposer. A node
//! that lacks a block of the window cannot tell (`None`); it still votes for the first valid
//! proposal of the round (whoever proposes cannot change the safety rules), and learns the chain
//! as it syncs it. A round entered by joining timeouts has no certificate of the round before
//! here: its leader is not known until one arrives.
//!
//! What a Byzantine member can do. It cannot raise its own weight above an honest member's, nor
//! pick the seed. As the aggregator of a round's votes it can leave an honest member out of that
//! QC, but honest aggregators include every vote that arrives in time, and the member's own
//! certified blocks count too; a member left out everywhere keeps weight 1 and is back after its
//! next certified block. After a timeout of round r - 1, whoever proposes may carry any valid TC
//! of that round, and with it pick among the few high QCs its possible signer sets report: a
//! Byzantine member can thereby lead more of the rounds that follow timeouts than its share, but
//! it cannot keep an honest member out of them.

use crate::messages::{Block, TC};
use config::{Committee, LeaderRule, Round, Stake};
use crypto::{Digest, Hash, PublicKey};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Weight of a member that took part in the window, and of one that did not or whose latest
/// turn as leader failed (per unit of stake). The ratio is Aptos's for failed leaders: such a
/// member is still drawn, rarely.
const ACTIVE_WEIGHT: u64 = 1_000;
const INACTIVE_WEIGHT: u64 = 1;

/// Rounds in a row that timed out whose leaders are worked out one from the other.
const MAX_TIMED_OUT_CHAIN: Round = 1_000;

/// What opened a round: the QC of the round before (naming the block it certifies), or the TC
/// of the round before.
#[derive(Clone, Copy, Debug)]
pub enum Opening<'a> {
    Qc(&'a Digest),
    Tc(&'a TC),
}

impl<'a> Opening<'a> {
    /// What opened the round of `block`, as the block itself says.
    pub fn of(block: &'a Block) -> Self {
        match &block.tc {
            Some(tc) => Opening::Tc(tc),
            None => Opening::Qc(&block.qc.hash),
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
    /// The round a TC in the block says timed out, and the block that TC's high QC certifies
    /// (whose chain names the leader that failed).
    timed_out: Option<(Round, Digest)>,
    round: Round,
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
    /// Leaders by (round, the block the certificate that opened it names, whether that was a
    /// TC): each is asked for many times (by every later window that holds a TC of its round,
    /// and by the rounds after it that time out too). Only answers: "cannot tell" holds until
    /// the missing block arrives, so it is worked out again.
    memo: RefCell<HashMap<(Round, Digest, bool), PublicKey>>,
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
            memo: RefCell::default(),
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
                timed_out: block.tc.as_ref().map(|tc| (tc.round, tc.high_qc.hash)),
                round: block.round,
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
        self.memo.get_mut().retain(|(r, ..), _| *r >= round);
    }

    /// The leader of `round` when no certificate of the round before is known here (a round
    /// entered by joining timeouts): known only to a rule that reads the round alone.
    pub fn leader_of_round(&self, round: Round) -> Option<PublicKey> {
        match self.rule {
            LeaderRule::RoundRobin => self.leader(round, Opening::Qc(&Digest::default())),
            LeaderRule::Reputation => None,
        }
    }

    /// The leader of `round`, opened by `opening`; `None` if a block of the window is missing
    /// here.
    pub fn leader(&self, round: Round, opening: Opening<'_>) -> Option<PublicKey> {
        match (self.rule, opening) {
            (LeaderRule::RoundRobin, _) => {
                let count = self.members.len() as u64;
                Some(self.members[(round % count) as usize].0)
            }
            (LeaderRule::Reputation, Opening::Qc(anchor)) => self.after_qc(round, anchor),
            (LeaderRule::Reputation, Opening::Tc(tc)) => self.after_tc(round, &tc.high_qc.hash),
        }
    }

    /// The leader of `round`, opened by a TC of the round before whose high QC certifies
    /// `anchor`. Read from the round and the anchor alone (not the TC's own round, which a
    /// block may give older), so the memo holds one answer per key on every node.
    fn after_tc(&self, round: Round, anchor: &Digest) -> Option<PublicKey> {
        let failed = self.timed_out(round.saturating_sub(1), anchor)?;
        self.memoised((round, *anchor, true), || {
            self.by_reputation(round, anchor, Some(failed))
        })
    }

    fn after_qc(&self, round: Round, anchor: &Digest) -> Option<PublicKey> {
        self.memoised((round, *anchor, false), || {
            self.by_reputation(round, anchor, None)
        })
    }

    /// The member that failed `round`, which a TC with a high QC on `anchor` ended: the leader
    /// elected for the round after `anchor` by the QC rule, then, for each round up to `round`,
    /// by the TC rule with the one before it failed (no QC came in between, or the high QC would
    /// be higher). When the votes broadcast at the timeout certified `round` itself, the member
    /// that failed is the one elected after that QC, which never proposed.
    fn timed_out(&self, round: Round, anchor: &Digest) -> Option<PublicKey> {
        let certified = if *anchor == Digest::default() {
            0
        } else {
            self.links.get(anchor)?.round
        };
        // After longer runs of timeouts than this (an outage), the member that failed is taken
        // as the QC rule's: a bounded cost, and, as it depends on the round and the anchor
        // alone, the same answer on every node whichever rounds it was asked for before.
        if round > certified.saturating_add(MAX_TIMED_OUT_CHAIN) {
            return self.after_qc(round, anchor);
        }
        let mut leader = self.after_qc(certified.saturating_add(1), anchor)?;
        // `after_tc` of each later round, in a loop rather than by recursion.
        for later in certified.saturating_add(2)..=round {
            let failed = leader;
            leader = self.memoised((later, *anchor, true), || {
                self.by_reputation(later, anchor, Some(failed))
            })?;
        }
        Some(leader)
    }

    fn memoised(
        &self,
        key: (Round, Digest, bool),
        elect: impl FnOnce() -> Option<PublicKey>,
    ) -> Option<PublicKey> {
        if let Some(known) = self.memo.borrow().get(&key) {
            return Some(*known);
        }
        let leader = elect()?;
        self.memo.borrow_mut().insert(key, leader);
        Some(leader)
    }

    /// The draw for `round` from the window of `anchor`'s chain, with `failed_before` (the
    /// leader of the timed-out round just before, newer than the whole window) counted failed.
    fn by_reputation(
        &self,
        round: Round,
        anchor: &Digest,
        failed_before: Option<PublicKey>,
    ) -> Option<PublicKey> {
        let mut active = HashSet::new();
        // Members whose latest turn as leader in the window failed, and those whose latest
        // turn succeeded (a block of theirs), newest first: the first seen decides.
        let mut failed: HashSet<PublicKey> = failed_before.into_iter().collect();
        let mut decided = failed.clone();
        let mut recent = HashSet::new();
        let mut next = *anchor;
        for depth in 0..self.window {
            // The genesis block ends every chain, and has no author.
            if next == Digest::default() {
                break;
            }
            let link = self.links.get(&next)?;
            if decided.insert(link.author) {
                active.insert(link.author);
            }
            if let Some((timed_out, high_qc)) = link.timed_out {
                // Who failed the round the TC ended, worked out from its high QC. A node that
                // cannot tell who failed there cannot tell this round's leader either:
                // the nodes that can count that member as failed, and a guess would differ.
                let leader = self.timed_out(timed_out, &high_qc)?;
                if decided.insert(leader) {
                    failed.insert(leader);
                }
            }
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
                let weight = if active.contains(name) && !failed.contains(name) {
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
        draw(round, candidates)
    }
}

/// The member the round's seed falls on, each with its weight.
fn draw(round: Round, weighted: impl IntoIterator<Item = (PublicKey, u64)>) -> Option<PublicKey> {
    let weighted: Vec<(PublicKey, u64)> = weighted.into_iter().collect();
    let total: u64 = weighted.iter().map(|(_, w)| w).sum();
    let mut point = seed(round) % total.max(1);
    for (name, weight) in &weighted {
        if point < *weight {
            return Some(*name);
        }
        point -= weight;
    }
    weighted.last().map(|(name, _)| *name)
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
