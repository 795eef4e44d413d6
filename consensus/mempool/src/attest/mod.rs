//! Signatures checked once per committee (`--verify=attested`): each batch's transactions are
//! checked by f+1 stake of members, its *attesters*, who sign what they found (an
//! [`Attestation`]: the positions of the invalid transactions, or none) and send it to every
//! member. A node that holds f+1 stake of matching statements for a batch drops the transactions
//! they name and checks no signature of it: at least one of the statements is honest, and an
//! honest one is what the node's own check would find. Without such statements it checks the
//! batch itself, so a Byzantine attester can make nodes work, never make them disagree.
//!
//! The attesters of a batch are its author (which checks its batch as it seals it) and members
//! named by the batch's place in its author's sequence ([`attesters`]): an author numbers its
//! batches 0, 1, 2, ... and each member attests only a batch whose number follows the last one
//! it got from that author ([`Sequences`]), so the author cannot choose, batch by batch, who
//! checks it, and every member attests its share of every author's batches. What "invalid"
//! means (malformed, or a bad signature) is the application's: the node hands the mempool the
//! check ([`CheckBatch`]); the mempool never decodes a transaction.

mod attester;
mod delays;
mod queue;
mod sequence;
mod table;

pub use attester::{Attester, AttesterInput, Conduct};
pub use delays::{StatementDelays, MAX_WAIT, MIN_WAIT};
pub use queue::CheckQueue;
pub use sequence::Sequences;
pub use table::{Attestations, Limits, Verdict};

use batch::Batch;
use config::{Committee, Stake};
use crypto::{CryptoError, Digest, PublicKey, SecretKey, Signature};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The positions, in batch order, of the transactions of `batch` that are invalid.
pub type CheckBatch = dyn Fn(&Batch) -> Vec<u32> + Send + Sync;

/// What a node attests with: the application's check, the table of statements it shares with
/// the stage that executes committed batches, and how its attester behaves (honestly, but for
/// the test knob that makes a member misbehave).
#[derive(Clone)]
pub struct Attesting {
    pub check: Arc<CheckBatch>,
    pub table: Attestations,
    pub conduct: Conduct,
}

impl std::fmt::Debug for Attesting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attesting")
    }
}

/// One member's signed statement of which transactions of a batch are invalid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attestation {
    pub batch: Digest,
    /// The batch's author, as the attester got the batch from it...
    pub author: PublicKey,
    /// ...and the batch's place in the author's sequence: with the author, it names the
    /// attesters.
    pub seq: u64,
    /// The transactions the batch holds (its header's count): no position reaches it.
    pub tx_count: u32,
    /// Positions of the invalid transactions, strictly ascending.
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    pub invalid: Vec<u32>,
    pub attester: PublicKey,
    pub signature: Signature,
}

/// What an attester found in a batch: how many transactions it holds and which are invalid.
/// Statements count together only if they found exactly the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub tx_count: u32,
    pub invalid: Vec<u32>,
}

impl Attestation {
    pub fn new(
        batch: Digest,
        author: PublicKey,
        seq: u64,
        finding: Finding,
        attester: PublicKey,
        secret: &SecretKey,
    ) -> Self {
        let Finding { tx_count, invalid } = finding;
        let digest = statement_digest(&batch, &author, seq, tx_count, &invalid);
        Attestation {
            batch,
            author,
            seq,
            tx_count,
            invalid,
            attester,
            signature: Signature::new(&digest, secret),
        }
    }

    /// Checks the positions (strictly ascending, each below the batch's count, a count no
    /// batch exceeds) and the attester's signature.
    pub fn verify(&self, max_batch_txs: u32) -> Result<(), AttestationError> {
        if self.tx_count > max_batch_txs {
            return Err(AttestationError::TooManyTransactions {
                count: self.tx_count,
                max: max_batch_txs,
            });
        }
        if self.invalid.windows(2).any(|w| w[0] >= w[1]) {
            return Err(AttestationError::Unordered);
        }
        if let Some(last) = self.invalid.last().filter(|p| **p >= self.tx_count) {
            return Err(AttestationError::BeyondTheBatch {
                position: *last,
                count: self.tx_count,
            });
        }
        let digest = statement_digest(
            &self.batch,
            &self.author,
            self.seq,
            self.tx_count,
            &self.invalid,
        );
        Ok(self.signature.verify(&digest, &self.attester)?)
    }

    pub fn finding(&self) -> Finding {
        Finding {
            tx_count: self.tx_count,
            invalid: self.invalid.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AttestationError {
    #[error("the invalid positions are not strictly ascending")]
    Unordered,
    #[error("position {position} is beyond the batch's {count} transactions")]
    BeyondTheBatch { position: u32, count: u32 },
    #[error("a batch of {count} transactions: no batch holds more than {max}")]
    TooManyTransactions { count: u32, max: u32 },
    #[error("bad attestation signature: {0}")]
    Signature(#[from] CryptoError),
    #[error("{attester} is not an attester of batch {seq} by {author}")]
    NotAnAttester {
        attester: PublicKey,
        author: PublicKey,
        seq: u64,
    },
}

/// What an attester signs: the batch, its author and place, and the finding, under a tag of
/// its own so no other signed message of the protocol can pass for a statement.
fn statement_digest(
    batch: &Digest,
    author: &PublicKey,
    seq: u64,
    tx_count: u32,
    invalid: &[u32],
) -> Digest {
    let header = [
        seq.to_le_bytes().as_slice(),
        tx_count.to_le_bytes().as_slice(),
        (invalid.len() as u64).to_le_bytes().as_slice(),
    ]
    .concat();
    let positions: Vec<u8> = invalid.iter().flat_map(|p| p.to_le_bytes()).collect();
    Digest::of_parts([
        &b"hotmove-attestation-v2"[..],
        batch.as_ref(),
        &author.0,
        &header,
        &positions,
    ])
}

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

#[cfg(test)]
mod tests;
