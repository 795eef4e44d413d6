//! An attester's statement ([`Attestation`]): what it found in a batch, signed under a tag of its
//! own, and how a receiver checks one.

use crypto::{CryptoError, Digest, PublicKey, SecretKey, Signature};
use serde::{Deserialize, Serialize};

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
