//! HotStuff's authenticated messages: blocks, votes, quorum certificates (QC), timeouts and
//! timeout certificates (TC), each with the checks a replica runs before trusting it; and the two
//! pieces of evidence replies carry: the proof that a block committed (`commit_proof`) and a
//! member's signed acts (`record`).

use config::{Committee, Round, Stake};
use crypto::{Digest, Hash, PublicKey, Signature, SignatureService};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

pub mod commit_proof;
pub mod record;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum MessageError {
    #[error("invalid signature")]
    InvalidSignature,
    #[error("{0} is not in the committee")]
    UnknownAuthority(PublicKey),
    #[error("{0} signed twice")]
    DuplicateAuthority(PublicKey),
    #[error("certificate has stake {have}, needs {need}")]
    NotEnoughStake { have: Stake, need: Stake },
    #[error("{author} is not the leader of round {round}")]
    WrongLeader { author: PublicKey, round: Round },
    #[error("malformed: {0}")]
    Malformed(String),
}

fn domain(tag: &'static [u8], parts: &[&[u8]]) -> Digest {
    Digest::of_parts(std::iter::once(tag).chain(parts.iter().copied()))
}

/// The digest a vote (and so every signature inside a QC) signs.
pub(crate) fn vote_digest(block: &Digest, round: Round) -> Digest {
    domain(b"hotmove/vote", &[block.as_ref(), &round.to_le_bytes()])
}

/// The digest a timeout (and so every signature inside a TC) signs.
pub(crate) fn timeout_digest(round: Round, high_qc_round: Round) -> Digest {
    domain(
        b"hotmove/timeout",
        &[&round.to_le_bytes(), &high_qc_round.to_le_bytes()],
    )
}

/// Signatures this process has checked in consensus messages (votes, blocks, timeouts and the
/// votes inside certificates), valid or not. Per process, like the network's traffic counters: a
/// node is one process and reports it per round on its METRICS line.
static SIGNATURES_CHECKED: AtomicU64 = AtomicU64::new(0);

fn count_checks(signatures: usize) {
    SIGNATURES_CHECKED.fetch_add(signatures as u64, Ordering::Relaxed);
}

/// The signatures of consensus messages checked since the process started.
pub fn signatures_checked() -> u64 {
    SIGNATURES_CHECKED.load(Ordering::Relaxed)
}

/// Rejects the one round no honest node ever reaches: `round + 1` must not overflow anywhere.
fn check_round(round: Round) -> Result<(), MessageError> {
    if round == Round::MAX {
        return Err(MessageError::Malformed(format!(
            "round {round} is out of range"
        )));
    }
    Ok(())
}

/// Checks that `signers` are distinct committee members whose stake reaches a quorum.
fn check_quorum<'a>(
    committee: &Committee,
    signers: impl Iterator<Item = &'a PublicKey>,
) -> Result<(), MessageError> {
    let mut seen = HashSet::new();
    let mut stake: Stake = 0;
    for name in signers {
        if !seen.insert(*name) {
            return Err(MessageError::DuplicateAuthority(*name));
        }
        let weight = committee.stake(name);
        if weight == 0 {
            return Err(MessageError::UnknownAuthority(*name));
        }
        stake += weight;
    }
    let need = committee.quorum_threshold();
    if stake < need {
        return Err(MessageError::NotEnoughStake { have: stake, need });
    }
    Ok(())
}

#[derive(Clone, Serialize, Deserialize, Default, PartialEq, Eq)]
pub struct QC {
    pub hash: Digest,
    pub round: Round,
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    pub votes: Vec<(PublicKey, Signature)>,
}

impl QC {
    /// The certificate every replica starts from; it certifies the genesis block.
    pub fn genesis() -> Self {
        QC::default()
    }

    pub fn is_genesis(&self) -> bool {
        *self == QC::genesis()
    }

    pub fn verify(&self, committee: &Committee) -> Result<(), MessageError> {
        self.verify_trusting(committee, None)
    }

    /// [`QC::verify`], except that the entry equal to `own` (a replica's own vote for this
    /// block, its key and the signature it made) is not checked again: ed25519 signing is
    /// deterministic, so those bytes are the valid signature the replica made. Any other entry,
    /// under the replica's key or not, is checked; the quorum counts every signer as before.
    pub fn verify_trusting(
        &self,
        committee: &Committee,
        own: Option<(&PublicKey, &Signature)>,
    ) -> Result<(), MessageError> {
        if self.is_genesis() {
            return Ok(());
        }
        check_round(self.round)?;
        check_quorum(committee, self.votes.iter().map(|(name, _)| name))?;
        let others: Vec<&(PublicKey, Signature)> = self
            .votes
            .iter()
            .filter(|(name, signature)| own != Some((name, signature)))
            .collect();
        count_checks(others.len());
        Signature::verify_batch_same_digest(&vote_digest(&self.hash, self.round), others)
            .map_err(|_| MessageError::InvalidSignature)
    }
}

impl fmt::Debug for QC {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QC({}, {})", self.hash, self.round)
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TC {
    pub round: Round,
    /// The highest QC among the timeouts (DiemBFT v4): the next leader extends it, and it proves
    /// that the highest round the signers report is a round that really was certified.
    pub high_qc: QC,
    /// Each signer with its signature and the round of the highest QC it knew.
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    pub votes: Vec<(PublicKey, Signature, Round)>,
}

impl TC {
    /// Checks, cheapest first: the structure, the quorum, that the highest signed QC round is
    /// the round of the QC the TC carries (so no signer can claim a QC that does not exist and
    /// lock every later proposal out), every timeout signature, and finally that QC itself.
    pub fn verify(&self, committee: &Committee) -> Result<(), MessageError> {
        check_round(self.round)?;
        check_quorum(committee, self.votes.iter().map(|(name, _, _)| name))?;
        let highest = self.high_qc_rounds().max().unwrap_or(0);
        if highest != self.high_qc.round {
            return Err(MessageError::Malformed(format!(
                "TC of round {} carries a QC of round {} but its signers report {highest}",
                self.round, self.high_qc.round
            )));
        }
        // Every signed round is at most `highest`, so this bounds all of them.
        if highest >= self.round {
            return Err(MessageError::Malformed(format!(
                "TC of round {} reports a QC of round {highest}",
                self.round
            )));
        }
        count_checks(self.votes.len());
        for (name, signature, high_qc_round) in &self.votes {
            signature
                .verify(&timeout_digest(self.round, *high_qc_round), name)
                .map_err(|_| MessageError::InvalidSignature)?;
        }
        self.high_qc.verify(committee)
    }

    pub fn high_qc_rounds(&self) -> impl Iterator<Item = Round> + '_ {
        self.votes.iter().map(|(_, _, r)| *r)
    }

    /// What a block signs of its TC: all of it, so a relay can neither strip nor swap it.
    fn digest(&self) -> Digest {
        let round = self.round.to_le_bytes();
        let qc_round = self.high_qc.round.to_le_bytes();
        let votes: Vec<[u8; 104]> = self
            .votes
            .iter()
            .map(|(name, signature, high_qc_round)| {
                let mut bytes = [0u8; 104];
                bytes[..32].copy_from_slice(&name.0);
                bytes[32..96].copy_from_slice(&signature.to_bytes());
                bytes[96..].copy_from_slice(&high_qc_round.to_le_bytes());
                bytes
            })
            .collect();
        let parts = [&round[..], self.high_qc.hash.as_ref(), &qc_round]
            .into_iter()
            .chain(votes.iter().map(|v| &v[..]));
        domain(b"hotmove/tc", &parts.collect::<Vec<_>>())
    }
}

impl fmt::Debug for TC {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TC({})", self.round)
    }
}

#[derive(Clone, Serialize, Deserialize, Default, PartialEq, Eq)]
pub struct Block {
    /// Certifies the parent: a block extends the block its QC certifies.
    pub qc: QC,
    /// Present when the previous round ended by timeout rather than by a QC.
    pub tc: Option<TC>,
    pub author: PublicKey,
    pub round: Round,
    /// Digests of mempool batches; the batches themselves travel through the mempool.
    #[serde(deserialize_with = "plumbing::bounded::vec")]
    pub payload: Vec<Digest>,
    pub signature: Signature,
}

impl Block {
    pub async fn new(
        qc: QC,
        tc: Option<TC>,
        author: PublicKey,
        round: Round,
        payload: Vec<Digest>,
        signature_service: &SignatureService,
    ) -> Self {
        let mut block = Block {
            qc,
            tc,
            author,
            round,
            payload,
            signature: Signature::default(),
        };
        block.signature = signature_service.request_signature(block.digest()).await;
        block
    }

    pub fn genesis() -> Self {
        Block::default()
    }

    pub fn parent(&self) -> &Digest {
        &self.qc.hash
    }

    pub fn verify(&self, committee: &Committee) -> Result<(), MessageError> {
        self.check_structure(committee)?;
        self.verify_signature()?;
        self.qc.verify(committee)?;
        if let Some(tc) = &self.tc {
            tc.verify(committee)?;
        }
        Ok(())
    }

    /// The checks that cost no cryptography, run before any signature is looked at. Whether the
    /// author leads the round depends on the chain (`liveness/leader.rs`): the core checks it.
    pub fn check_structure(&self, committee: &Committee) -> Result<(), MessageError> {
        check_round(self.round)?;
        if committee.stake(&self.author) == 0 {
            return Err(MessageError::UnknownAuthority(self.author));
        }
        if self.qc.round >= self.round {
            return Err(MessageError::Malformed(format!(
                "block of round {} carries a QC of round {}",
                self.round, self.qc.round
            )));
        }
        // Only the certificate of the round before opens a round (the QC check above makes
        // `round - 1` safe): its QC when the block carries no TC, else the TC. An older TC
        // would let the proposer pick the history the leader rule reads (see `liveness/leader.rs`).
        let before = self.round - 1;
        match &self.tc {
            Some(tc) if tc.round != before => Err(MessageError::Malformed(format!(
                "block of round {} carries a TC of round {}, not of round {before}",
                self.round, tc.round
            ))),
            None if self.qc.round != before => Err(MessageError::Malformed(format!(
                "block of round {} carries a QC of round {} and no TC of round {before}",
                self.round, self.qc.round
            ))),
            _ => Ok(()),
        }
    }

    /// The author's signature alone; the certificates inside are checked on their own (the core
    /// skips the ones it already holds).
    pub fn verify_signature(&self) -> Result<(), MessageError> {
        count_checks(1);
        self.signature
            .verify(&self.digest(), &self.author)
            .map_err(|_| MessageError::InvalidSignature)
    }
}

impl Hash for Block {
    fn digest(&self) -> Digest {
        let round = self.round.to_le_bytes();
        // The TC is bound too (a flag, then its digest), or a relay could strip or swap it.
        let tc = match &self.tc {
            None => vec![0u8],
            Some(tc) => std::iter::once(1u8).chain(tc.digest().0).collect(),
        };
        // Who signed the QC is bound too, in its order: the leader rule reads the signers, so
        // one digest must not stand for copies of the block with different signer sets.
        let signers = (self.qc.votes.len() as u64).to_le_bytes();
        let parts = [
            self.author.0.as_ref(),
            &round,
            self.qc.hash.as_ref(),
            &signers,
        ]
        .into_iter()
        .chain(self.qc.votes.iter().map(|(name, _)| name.0.as_ref()))
        .chain([tc.as_slice()])
        .chain(self.payload.iter().map(|d| d.as_ref()));
        Digest::of_parts(std::iter::once(&b"hotmove/block"[..]).chain(parts))
    }
}

impl fmt::Debug for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "B{}({}, {}, {:?}, {} batches)",
            self.round,
            self.digest(),
            self.author,
            self.qc,
            self.payload.len()
        )
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Vote {
    pub hash: Digest,
    pub round: Round,
    pub author: PublicKey,
    pub signature: Signature,
}

impl Vote {
    pub async fn new(block: &Block, author: PublicKey, service: &SignatureService) -> Self {
        let hash = block.digest();
        let signature = service
            .request_signature(vote_digest(&hash, block.round))
            .await;
        Vote {
            hash,
            round: block.round,
            author,
            signature,
        }
    }

    pub fn verify(&self, committee: &Committee) -> Result<(), MessageError> {
        check_round(self.round)?;
        if committee.stake(&self.author) == 0 {
            return Err(MessageError::UnknownAuthority(self.author));
        }
        count_checks(1);
        self.signature
            .verify(&vote_digest(&self.hash, self.round), &self.author)
            .map_err(|_| MessageError::InvalidSignature)
    }
}

impl fmt::Debug for Vote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "V({}, {}, {})", self.author, self.round, self.hash)
    }
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Timeout {
    pub high_qc: QC,
    pub round: Round,
    pub author: PublicKey,
    pub signature: Signature,
}

impl Timeout {
    pub async fn new(
        high_qc: QC,
        round: Round,
        author: PublicKey,
        service: &SignatureService,
    ) -> Self {
        let signature = service
            .request_signature(timeout_digest(round, high_qc.round))
            .await;
        Timeout {
            high_qc,
            round,
            author,
            signature,
        }
    }

    pub fn verify(&self, committee: &Committee) -> Result<(), MessageError> {
        self.check_structure(committee)?;
        self.verify_signature()?;
        self.high_qc.verify(committee)
    }

    /// The checks that cost no cryptography, run before any signature is looked at.
    pub fn check_structure(&self, committee: &Committee) -> Result<(), MessageError> {
        check_round(self.round)?;
        if committee.stake(&self.author) == 0 {
            return Err(MessageError::UnknownAuthority(self.author));
        }
        // A node times out of a round after the QC it holds, never at or before it.
        if self.high_qc.round >= self.round {
            return Err(MessageError::Malformed(format!(
                "timeout of round {} carries a QC of round {}",
                self.round, self.high_qc.round
            )));
        }
        Ok(())
    }

    /// The signer's signature alone; the high QC is checked on its own (the core skips it when
    /// it already holds that QC).
    pub fn verify_signature(&self) -> Result<(), MessageError> {
        count_checks(1);
        self.signature
            .verify(
                &timeout_digest(self.round, self.high_qc.round),
                &self.author,
            )
            .map_err(|_| MessageError::InvalidSignature)
    }
}

impl fmt::Debug for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TV({}, {}, {:?})", self.author, self.round, self.high_qc)
    }
}

#[cfg(test)]
pub(crate) mod tests;
