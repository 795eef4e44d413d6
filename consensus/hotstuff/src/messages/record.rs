//! A member's signed acts, as one that lost its vote record is shown them (see
//! `safety/recall.rs`, and `safety/witness.rs` for what a node keeps of them).

use crate::messages::{timeout_digest, vote_digest, MessageError, QC, TC};
use config::Round;
use crypto::{Digest, PublicKey, Signature};
use serde::{Deserialize, Serialize};

/// One signed act of a member, with what its signature covers.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Debug)]
pub enum Act {
    /// A vote for block `hash` of `round`.
    Vote {
        hash: Digest,
        round: Round,
        signature: Signature,
    },
    /// A timeout of `round` that reported a high QC of `high_qc_round`.
    Timeout {
        round: Round,
        high_qc_round: Round,
        signature: Signature,
    },
}

impl Act {
    pub fn round(&self) -> Round {
        match self {
            Act::Vote { round, .. } | Act::Timeout { round, .. } => *round,
        }
    }

    /// Checks that `signer` signed this act.
    pub fn verify(&self, signer: &PublicKey) -> Result<(), MessageError> {
        let (digest, signature) = match self {
            Act::Vote {
                hash,
                round,
                signature,
            } => (vote_digest(hash, *round), signature),
            Act::Timeout {
                round,
                high_qc_round,
                signature,
            } => (timeout_digest(*round, *high_qc_round), signature),
        };
        signature
            .verify(&digest, signer)
            .map_err(|_| MessageError::InvalidSignature)
    }
}

/// A member's answer to a `RecordRequest`: what it holds that bounds the rounds the requester
/// may have signed in.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Debug)]
pub struct RecordReply {
    /// Who answers; the network handler checks it is the authenticated peer.
    pub author: PublicKey,
    /// The requester's signed act of the highest round this member holds.
    pub act: Option<Act>,
    /// The answering member's highest QC and highest TC: the committee reached the round after
    /// each.
    pub high_qc: QC,
    pub high_tc: Option<TC>,
}
