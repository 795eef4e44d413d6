//! Who attests a batch: its author and the members its place in the author's sequence names.

use config::{Committee, Stake};
use crypto::PublicKey;

/// The attesters of batch number `seq` by `author`: the author, then the other members in key
/// order from a start that moves by one with each batch, until they hold f+1 stake (the
/// validity threshold). The start of an author's batch 0 is the author's own place in the key
/// order, so the authors' batches of a given number do not all go to the same members.
pub fn attesters(committee: &Committee, author: &PublicKey, seq: u64) -> Vec<PublicKey> {
    let threshold = committee.validity_threshold();
    let mut chosen = vec![*author];
    let mut stake: Stake = committee.stake(author);
    let others: Vec<PublicKey> = committee
        .authorities
        .keys()
        .filter(|name| *name != author)
        .copied()
        .collect();
    if others.is_empty() {
        return chosen;
    }
    let place = committee
        .authorities
        .keys()
        .position(|name| name == author)
        .unwrap_or(0) as u64;
    let start = (place.wrapping_add(seq) % others.len() as u64) as usize;
    for name in others.iter().cycle().skip(start).take(others.len()) {
        if stake >= threshold {
            break;
        }
        chosen.push(*name);
        stake += committee.stake(name);
    }
    chosen
}
