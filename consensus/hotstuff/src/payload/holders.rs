//! Up to which round every peer is known to hold the committed chain, learnt from the QCs this
//! node processes: what lets the committer free a committed batch's bytes without waiting out
//! the whole GC window (see `GcWindow`).
//!
//! A member that signs a QC of round r voted for that block, and a node votes for a block only
//! once the block, its ancestors and all their batches are stored (`Core::process_block`). A
//! certified block of round r also extends every block committed at a round up to r (two-chain
//! safety). So once every other member signed a QC of round r or above, none of them is owed a
//! batch committed at round r or below: a peer cannot be "still synchronising" those. A peer
//! that is behind (partitioned, crashed, slow, or Byzantine and pretending to be) stops signing,
//! the round this returns stops moving, and batches stay for the full GC window as before.

use crate::messages::QC;
use config::{Committee, Round};
use crypto::PublicKey;
use std::collections::HashMap;
use tokio::sync::watch;

pub struct PeerRounds {
    /// Per other member, the highest round of a QC it signed (0: none seen).
    highest: HashMap<PublicKey, Round>,
    /// The minimum of `highest` (`Round::MAX` without peers), published to the committer.
    tx_held_by_all: watch::Sender<Round>,
}

impl PeerRounds {
    /// Tracks the members of `committee` other than `name`; the receiver reads
    /// [`PeerRounds::held_by_all`] as it moves.
    pub fn new(name: PublicKey, committee: &Committee) -> (Self, watch::Receiver<Round>) {
        let highest: HashMap<PublicKey, Round> = committee
            .authorities
            .keys()
            .filter(|member| **member != name)
            .map(|member| (*member, 0))
            .collect();
        let (tx_held_by_all, rx) = watch::channel(Self::minimum(&highest));
        (
            PeerRounds {
                highest,
                tx_held_by_all,
            },
            rx,
        )
    }

    fn minimum(highest: &HashMap<PublicKey, Round>) -> Round {
        highest.values().copied().min().unwrap_or(Round::MAX)
    }

    /// Records the signers of `qc`, which the caller verified (an unverified QC could name
    /// members that never voted).
    pub fn certified(&mut self, qc: &QC) {
        let mut moved = false;
        for (signer, _) in &qc.votes {
            if let Some(round) = self.highest.get_mut(signer) {
                if qc.round > *round {
                    *round = qc.round;
                    moved = true;
                }
            }
        }
        if moved {
            let held = Self::minimum(&self.highest);
            self.tx_held_by_all.send_if_modified(|current| {
                let changed = *current != held;
                *current = held;
                changed
            });
        }
    }

    /// Every other member holds the committed chain up to this round.
    #[cfg(test)]
    pub fn held_by_all(&self) -> Round {
        *self.tx_held_by_all.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{committee, keys, qc};
    use crypto::Digest;

    #[test]
    fn moves_only_once_every_other_member_signed() {
        let keys = keys(4);
        let (mut rounds, rx) = PeerRounds::new(keys[0].name, &committee(&keys));
        assert_eq!(rounds.held_by_all(), 0);
        // Members 0, 1 and 2 certify rounds 1 to 5; member 3 never signs: nothing moves.
        for round in 1..=5u64 {
            rounds.certified(&qc(Digest::of(&round.to_le_bytes()), round, &keys[..3]));
        }
        assert_eq!(rounds.held_by_all(), 0);
        // Member 3 signs round 6, member 1 does not: the lowest of the others (1 at 5) counts.
        let signers = [keys[0].clone(), keys[2].clone(), keys[3].clone()];
        rounds.certified(&qc(Digest::of(b"6"), 6, &signers));
        assert_eq!(rounds.held_by_all(), 5);
        assert_eq!(*rx.borrow(), 5);
        // An older QC moves nobody back.
        rounds.certified(&qc(Digest::of(b"2"), 2, &keys[1..]));
        assert_eq!(*rx.borrow(), 5);
    }

    #[test]
    fn a_lone_authority_owes_nobody() {
        let keys = keys(1);
        let (rounds, _rx) = PeerRounds::new(keys[0].name, &committee(&keys));
        assert_eq!(rounds.held_by_all(), Round::MAX);
    }
}
