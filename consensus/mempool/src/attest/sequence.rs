//! Where each author is in its sequence of batches, as this node saw it: which of an author's
//! batches this node may attest.
//!
//! An author numbers its batches 0, 1, 2, ... and the number names the batch's attesters
//! ([`super::attesters`]). Were any number accepted, an author would pick, batch by batch, the
//! number that names its victim. So a member attests a batch only if its number follows the
//! last one it got from that author: the numbers walk the committee in turn, and each member
//! attests its share of the author's batches whatever the author does.
//!
//! Numbers that do not follow happen to honest authors too: a restarted author counts from 0
//! again, and a batch lost on the way (a peer's buffer overflowing) leaves a gap. This node then
//! takes the new number as the author's place, but attests none of its next `others` batches
//! (one turn of the committee): an author that jumps to aim its next batch gets that batch, and
//! the ones of a whole turn after it, checked by every node instead, and the jump buys it no
//! attester of its choosing. A batch that comes again (a retransmission of one this node holds)
//! changes nothing.

use config::Committee;
use crypto::PublicKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Clone, Default)]
pub struct Sequences {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Batches of one turn: how long attesting pauses after a number that does not follow.
    turn: u64,
    authors: Mutex<HashMap<PublicKey, Place>>,
}

#[derive(Clone, Copy)]
struct Place {
    /// The number the author's next batch should carry.
    next: u64,
    /// Batches numbered below this are not attested (a turn after a jump).
    attest_from: u64,
}

impl Sequences {
    pub fn new(committee: &Committee) -> Self {
        Sequences {
            inner: Arc::new(Inner {
                turn: committee.size().saturating_sub(1) as u64,
                authors: Mutex::default(),
            }),
        }
    }

    /// `author` sent batch number `seq`, which this node did not hold yet (`fresh`) or did.
    /// Whether this node may attest it: its number follows the author's last one, and it is not
    /// in the turn after a jump. Before the first batch of an author, its next number is 0.
    pub fn arrived(&self, author: PublicKey, seq: u64, fresh: bool) -> bool {
        let mut authors = self
            .inner
            .authors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let place = authors.entry(author).or_insert(Place {
            next: 0,
            attest_from: 0,
        });
        if seq == place.next {
            place.next = seq.saturating_add(1);
            return fresh && seq >= place.attest_from;
        }
        if seq < place.next && !fresh {
            // Sent again: nothing new.
            return false;
        }
        // A jump, either way: a restart, a lost batch, or an author aiming.
        place.next = seq.saturating_add(1);
        place.attest_from = seq.saturating_add(self.inner.turn);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::Authority;
    use crypto::KeyPair;

    fn committee(n: u64) -> Committee {
        let address = "127.0.0.1:1".parse().expect("address");
        let authorities = (0..n)
            .map(|i| {
                let authority = Authority {
                    stake: 1,
                    consensus_address: address,
                    mempool_address: address,
                    transactions_address: address,
                };
                (KeyPair::from_seed(i).name, authority)
            })
            .collect();
        Committee { authorities }
    }

    #[test]
    fn consecutive_batches_are_attested_and_repeats_are_not() {
        let sequences = Sequences::new(&committee(4));
        let author = KeyPair::from_seed(0).name;
        assert!(sequences.arrived(author, 0, true));
        assert!(sequences.arrived(author, 1, true));
        assert!(!sequences.arrived(author, 1, false), "a retransmission");
        assert!(
            !sequences.arrived(author, 0, false),
            "an older retransmission"
        );
        assert!(sequences.arrived(author, 2, true));
    }

    #[test]
    fn after_a_jump_a_whole_turn_goes_unattested() {
        let sequences = Sequences::new(&committee(4));
        let author = KeyPair::from_seed(0).name;
        assert!(sequences.arrived(author, 0, true));
        // Forwards (an author aiming, or a lost batch), then three batches of the turn.
        assert!(!sequences.arrived(author, 7, true));
        assert!(!sequences.arrived(author, 8, true));
        assert!(!sequences.arrived(author, 9, true));
        assert!(sequences.arrived(author, 10, true));
        // Backwards with a batch this node does not hold: the author restarted.
        assert!(!sequences.arrived(author, 0, true));
        assert!(!sequences.arrived(author, 1, true));
        assert!(!sequences.arrived(author, 2, true));
        assert!(sequences.arrived(author, 3, true));
    }
}
