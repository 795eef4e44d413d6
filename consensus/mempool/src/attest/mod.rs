//! Signatures checked once per committee (`--verify=attested`): each batch's transactions are
//! checked by f+1 stake of members, its *attesters*, who sign what they found (an
//! [`Attestation`]: the positions of the invalid transactions, or none) and send it to every
//! member. A node that holds f+1 stake of matching statements for a batch drops the transactions
//! they name and checks no signature of it: at least one of the statements is honest, and an
//! honest one is what the node's own check would find. Without such statements it checks the
//! batch itself, so a Byzantine attester can make nodes work, never make them disagree.
//!
//! The attesters of a batch are its author (which checks its batch as it seals it) and members
//! named by the batch digest, so the work spreads evenly over the committee
//! ([`attesters`]). What "invalid" means (malformed, or a bad signature) is the application's:
//! the node hands the mempool the check ([`CheckBatch`]); the mempool never decodes a
//! transaction.

mod attester;
mod table;

pub use attester::{Attester, AttesterInput};
pub use table::{Attestations, Verdict};

use batch::Batch;
use config::{Committee, Stake};
use crypto::{CryptoError, Digest, PublicKey, SecretKey, Signature};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The positions, in batch order, of the transactions of `batch` that are invalid.
pub type CheckBatch = dyn Fn(&Batch) -> Vec<u32> + Send + Sync;

/// What a node attests with: the application's check and the table of statements it shares with
/// the stage that executes committed batches.
#[derive(Clone)]
pub struct Attesting {
    pub check: Arc<CheckBatch>,
    pub table: Attestations,
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
    /// The batch's author, as the attester knows it (it names the other attesters).
    pub author: PublicKey,
    /// Positions of the invalid transactions, strictly ascending.
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    pub invalid: Vec<u32>,
    pub attester: PublicKey,
    pub signature: Signature,
}

impl Attestation {
    pub fn new(
        batch: Digest,
        author: PublicKey,
        invalid: Vec<u32>,
        attester: PublicKey,
        secret: &SecretKey,
    ) -> Self {
        let signature = Signature::new(&statement_digest(&batch, &author, &invalid), secret);
        Attestation {
            batch,
            author,
            invalid,
            attester,
            signature,
        }
    }

    /// Checks the positions' order and the attester's signature.
    pub fn verify(&self) -> Result<(), AttestationError> {
        if self.invalid.windows(2).any(|w| w[0] >= w[1]) {
            return Err(AttestationError::Unordered);
        }
        let digest = statement_digest(&self.batch, &self.author, &self.invalid);
        Ok(self.signature.verify(&digest, &self.attester)?)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AttestationError {
    #[error("the invalid positions are not strictly ascending")]
    Unordered,
    #[error("bad attestation signature: {0}")]
    Signature(#[from] CryptoError),
    #[error("{attester} is not an attester of batch {batch} by {author}")]
    NotAnAttester {
        attester: PublicKey,
        batch: Digest,
        author: PublicKey,
    },
}

/// What an attester signs: the batch, its author and the invalid positions, under a tag of its
/// own so no other signed message of the protocol can pass for a statement.
fn statement_digest(batch: &Digest, author: &PublicKey, invalid: &[u32]) -> Digest {
    let count = (invalid.len() as u64).to_le_bytes();
    let positions: Vec<u8> = invalid.iter().flat_map(|p| p.to_le_bytes()).collect();
    Digest::of_parts([
        &b"hotmove-attestation-v1"[..],
        batch.as_ref(),
        &author.0,
        &count,
        &positions,
    ])
}

/// The attesters of `batch` by `author`: the author, then the other members in key order from a
/// start the digest names, until they hold f+1 stake (the validity threshold). Digests are
/// uniform, so every member attests its share of the others' batches.
pub fn attesters(committee: &Committee, batch: &Digest, author: &PublicKey) -> Vec<PublicKey> {
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
    let mut start = [0u8; 8];
    start.copy_from_slice(&batch.as_ref()[..8]);
    let start = (u64::from_le_bytes(start) % others.len() as u64) as usize;
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
