//! HotStuff's authenticated messages: blocks, votes, quorum certificates (QC), timeouts and
//! timeout certificates (TC), each with the checks a replica runs before trusting it.

use config::{Committee, Round, Stake};
use crypto::{Digest, Hash, PublicKey, Signature, SignatureService};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

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
fn vote_digest(block: &Digest, round: Round) -> Digest {
    domain(b"hotmove/vote", &[block.as_ref(), &round.to_le_bytes()])
}

/// The digest a timeout (and so every signature inside a TC) signs.
fn timeout_digest(round: Round, high_qc_round: Round) -> Digest {
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
        if self.is_genesis() {
            return Ok(());
        }
        check_round(self.round)?;
        check_quorum(committee, self.votes.iter().map(|(name, _)| name))?;
        count_checks(self.votes.len());
        Signature::verify_batch_same_digest(&vote_digest(&self.hash, self.round), &self.votes)
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
    /// author leads the round depends on the chain (`leader.rs`): the core checks it.
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
        // would let the proposer pick the history the leader rule reads (see `leader.rs`).
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
pub(crate) mod tests {
    use super::*;
    use config::Authority;
    use crypto::{KeyPair, SecretKey};
    use std::net::SocketAddr;

    pub fn keys(n: u64) -> Vec<KeyPair> {
        let mut keys: Vec<_> = (0..n).map(KeyPair::from_seed).collect();
        keys.sort_by_key(|k| k.name);
        keys
    }

    pub fn committee(keys: &[KeyPair]) -> Committee {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Committee {
            authorities: keys
                .iter()
                .map(|k| {
                    (
                        k.name,
                        Authority {
                            stake: 1,
                            consensus_address: addr,
                            mempool_address: addr,
                            transactions_address: addr,
                        },
                    )
                })
                .collect(),
        }
    }

    pub fn vote(block_hash: Digest, round: Round, kp: &KeyPair) -> Vote {
        Vote {
            hash: block_hash,
            round,
            author: kp.name,
            signature: Signature::new(&vote_digest(&block_hash, round), &kp.secret),
        }
    }

    pub fn qc(block_hash: Digest, round: Round, signers: &[KeyPair]) -> QC {
        QC {
            hash: block_hash,
            round,
            votes: signers
                .iter()
                .map(|k| (k.name, vote(block_hash, round, k).signature))
                .collect(),
        }
    }

    /// A TC of `round` whose signers all report `high_qc`.
    pub fn tc(round: Round, high_qc: &QC, signers: &[KeyPair]) -> TC {
        TC {
            round,
            high_qc: high_qc.clone(),
            votes: signers
                .iter()
                .map(|k| {
                    let t = timeout(round, high_qc.clone(), k);
                    (k.name, t.signature, high_qc.round)
                })
                .collect(),
        }
    }

    pub fn timeout(round: Round, high_qc: QC, kp: &KeyPair) -> Timeout {
        let signature = Signature::new(&timeout_digest(round, high_qc.round), &kp.secret);
        Timeout {
            high_qc,
            round,
            author: kp.name,
            signature,
        }
    }

    pub fn signed_block(
        qc: QC,
        tc: Option<TC>,
        round: Round,
        payload: Vec<Digest>,
        author: &KeyPair,
    ) -> Block {
        let mut block = Block {
            qc,
            tc,
            author: author.name,
            round,
            payload,
            signature: Signature::default(),
        };
        block.signature = Signature::new(&block.digest(), &author.secret);
        block
    }

    fn outsider() -> (PublicKey, SecretKey) {
        let kp = KeyPair::from_seed(1000);
        (kp.name, kp.secret)
    }

    #[test]
    fn valid_qc_verifies() {
        let keys = keys(4);
        let committee = committee(&keys);
        let qc = qc(Digest::of(b"b"), 3, &keys[..3]);
        assert_eq!(qc.verify(&committee), Ok(()));
        assert_eq!(QC::genesis().verify(&committee), Ok(()));
    }

    #[test]
    fn every_signature_a_certificate_holds_is_counted_as_checked() {
        // Tests of this binary verify concurrently: the counter grows by at least this much.
        let keys = keys(4);
        let committee = committee(&keys);
        let qc = qc(Digest::of(b"b"), 3, &keys[..3]);
        let vote = vote(Digest::of(b"b"), 3, &keys[0]);
        let before = signatures_checked();
        assert_eq!(qc.verify(&committee), Ok(()));
        assert_eq!(vote.verify(&committee), Ok(()));
        assert!(signatures_checked() - before >= 4);
    }

    #[test]
    fn qc_rejects_bad_signature_duplicates_outsiders_and_small_quorums() {
        let keys = keys(4);
        let committee = committee(&keys);
        let hash = Digest::of(b"b");

        let mut bad = qc(hash, 3, &keys[..3]);
        bad.votes[1].1 = vote(Digest::of(b"other"), 3, &keys[1]).signature;
        assert_eq!(bad.verify(&committee), Err(MessageError::InvalidSignature));

        let mut dup = qc(hash, 3, &keys[..2]);
        dup.votes.push(dup.votes[0]);
        assert_eq!(
            dup.verify(&committee),
            Err(MessageError::DuplicateAuthority(keys[0].name))
        );

        let (name, secret) = outsider();
        let mut stranger = qc(hash, 3, &keys[..2]);
        stranger
            .votes
            .push((name, Signature::new(&vote_digest(&hash, 3), &secret)));
        assert_eq!(
            stranger.verify(&committee),
            Err(MessageError::UnknownAuthority(name))
        );

        let small = qc(hash, 3, &keys[..2]);
        assert_eq!(
            small.verify(&committee),
            Err(MessageError::NotEnoughStake { have: 2, need: 3 })
        );
    }

    #[test]
    fn vote_rejects_bad_signature_and_outsider() {
        let keys = keys(4);
        let committee = committee(&keys);
        let hash = Digest::of(b"b");
        let good = vote(hash, 2, &keys[0]);
        assert_eq!(good.verify(&committee), Ok(()));
        let mut forged = good.clone();
        forged.round = 3;
        assert_eq!(
            forged.verify(&committee),
            Err(MessageError::InvalidSignature)
        );
        let (name, secret) = outsider();
        let stranger = Vote {
            hash,
            round: 2,
            author: name,
            signature: Signature::new(&vote_digest(&hash, 2), &secret),
        };
        assert_eq!(
            stranger.verify(&committee),
            Err(MessageError::UnknownAuthority(name))
        );
    }

    #[test]
    fn tc_rejects_bad_signature_duplicates_outsiders() {
        let keys = keys(4);
        let committee = committee(&keys);
        let tc_of = |signers: &[KeyPair]| TC {
            round: 5,
            high_qc: QC::genesis(),
            votes: signers
                .iter()
                .map(|k| {
                    let t = timeout(5, QC::genesis(), k);
                    (k.name, t.signature, 0)
                })
                .collect(),
        };
        assert_eq!(tc_of(&keys[..3]).verify(&committee), Ok(()));

        let mut lied = tc_of(&keys[..3]);
        lied.votes[0].2 = 4; // claims a higher QC round than it signed...
        lied.high_qc = qc(Digest::of(b"b"), 4, &keys[..3]); // ...even one with a real QC
        assert_eq!(lied.verify(&committee), Err(MessageError::InvalidSignature));

        let mut dup = tc_of(&keys[..2]);
        dup.votes.push(dup.votes[1]);
        assert_eq!(
            dup.verify(&committee),
            Err(MessageError::DuplicateAuthority(keys[1].name))
        );

        let (name, secret) = outsider();
        let mut stranger = tc_of(&keys[..2]);
        stranger
            .votes
            .push((name, Signature::new(&timeout_digest(5, 0), &secret), 0));
        assert_eq!(
            stranger.verify(&committee),
            Err(MessageError::UnknownAuthority(name))
        );
        assert!(matches!(
            tc_of(&keys[..2]).verify(&committee),
            Err(MessageError::NotEnoughStake { .. })
        ));
    }

    #[test]
    fn timeout_checks_its_high_qc() {
        let keys = keys(4);
        let committee = committee(&keys);
        let good = timeout(4, qc(Digest::of(b"b"), 3, &keys[..3]), &keys[0]);
        assert_eq!(good.verify(&committee), Ok(()));
        let weak = timeout(4, qc(Digest::of(b"b"), 3, &keys[..1]), &keys[0]);
        assert!(matches!(
            weak.verify(&committee),
            Err(MessageError::NotEnoughStake { .. })
        ));
    }

    /// One Byzantine signer claims `high_qc_round = u64::MAX` inside a TC
    /// otherwise made of honest timeouts. Every signature is genuine, but no QC of that round
    /// exists, so the TC must not verify (it would make every later proposal unvotable).
    #[test]
    fn byzantine_tc_claiming_an_uncertified_high_qc_round_is_rejected() {
        let keys = keys(4);
        let committee = committee(&keys);
        let honest_qc = qc(Digest::of(b"b3"), 3, &keys[..3]);
        let mut votes: Vec<_> = keys[..2]
            .iter()
            .map(|k| (k.name, timeout(5, honest_qc.clone(), k).signature, 3))
            .collect();
        let byzantine = &keys[3];
        votes.push((
            byzantine.name,
            Signature::new(&timeout_digest(5, Round::MAX), &byzantine.secret),
            Round::MAX,
        ));
        // Whatever QC the forger attaches, it is not one of round u64::MAX.
        let forged = TC {
            round: 5,
            high_qc: honest_qc.clone(),
            votes,
        };
        assert!(matches!(
            forged.verify(&committee),
            Err(MessageError::Malformed(_))
        ));
        let mut claimed = forged.clone();
        claimed.high_qc.round = Round::MAX;
        assert!(claimed.verify(&committee).is_err());
        // The honest part alone plus the Byzantine member's truthful timeout does verify.
        let mut honest = forged;
        honest.votes[2] = (
            byzantine.name,
            timeout(5, honest_qc.clone(), byzantine).signature,
            3,
        );
        assert_eq!(honest.verify(&committee), Ok(()));
        // And the carried QC must be genuine.
        honest.high_qc = qc(Digest::of(b"other"), 3, &keys[..1]);
        assert!(honest.verify(&committee).is_err());
    }

    /// The block digest binds the TC, so a relay can neither strip a block's TC
    /// nor swap it for another one without breaking the leader's signature.
    #[test]
    fn byzantine_relay_cannot_strip_or_swap_a_blocks_tc() {
        let keys = keys(4);
        let committee = committee(&keys);
        let leader = keys
            .iter()
            .find(|k| k.name == committee.leader(4))
            .expect("leader");
        let tc_of = |high_qc_round: Round| {
            let high_qc = if high_qc_round == 0 {
                QC::genesis()
            } else {
                qc(Digest::of(b"b"), high_qc_round, &keys[..3])
            };
            TC {
                round: 3,
                high_qc: high_qc.clone(),
                votes: keys[..3]
                    .iter()
                    .map(|k| {
                        let t = timeout(3, high_qc.clone(), k);
                        (k.name, t.signature, high_qc_round)
                    })
                    .collect(),
            }
        };
        let block = signed_block(QC::genesis(), Some(tc_of(0)), 4, vec![], leader);
        assert_eq!(block.verify(&committee), Ok(()));

        // Stripped, it is malformed (a round after a QC of round 0 with no TC between).
        let mut stripped = block.clone();
        stripped.tc = None;
        assert!(stripped.verify(&committee).is_err());

        let mut swapped = block.clone();
        swapped.tc = Some(tc_of(2));
        assert!(swapped.verify(&committee).is_err());
    }

    /// A block of round r is opened by the certificate of round r - 1 alone: its QC when it
    /// carries no TC, its TC otherwise. A member holding QC(r - 1) could otherwise attach an old
    /// TC, whose election (under reputation) names a leader of its choosing, or blames a member
    /// it picks for a round it never led. Before, any TC of an earlier round passed.
    #[test]
    fn byzantine_a_block_carries_only_the_certificate_of_the_round_before() {
        let keys = keys(4);
        let committee = committee(&keys);
        let tc_of = |round: Round| TC {
            round,
            high_qc: QC::genesis(),
            votes: keys[..3]
                .iter()
                .map(|k| (k.name, timeout(round, QC::genesis(), k).signature, 0))
                .collect(),
        };
        let parent = qc(Digest::of(b"b5"), 5, &keys[..3]);
        let block = |qc: QC, tc: Option<TC>, round| signed_block(qc, tc, round, vec![], &keys[0]);
        // The two honest shapes: QC(r - 1), or TC(r - 1) with an older QC.
        assert_eq!(block(parent.clone(), None, 6).verify(&committee), Ok(()));
        assert_eq!(
            block(QC::genesis(), Some(tc_of(5)), 6).verify(&committee),
            Ok(())
        );
        // QC(r - 1) with an old TC, and an old TC alone.
        for (qc, tc) in [(parent.clone(), tc_of(3)), (QC::genesis(), tc_of(3))] {
            assert!(matches!(
                block(qc, Some(tc), 6).check_structure(&committee),
                Err(MessageError::Malformed(_))
            ));
        }
        // A QC of an older round with no TC to account for the rounds between.
        assert!(matches!(
            block(parent, None, 8).check_structure(&committee),
            Err(MessageError::Malformed(_))
        ));
    }

    /// The leader rule reads who signed a block's QC, so the block's digest must bind them: a
    /// proposer, a relay or a sync responder could otherwise hand out one block (one digest)
    /// with different valid signer sets, and nodes recording different copies would weigh a
    /// member differently and elect different leaders. Before, the digest covered the certified
    /// block's hash alone.
    #[test]
    fn byzantine_one_block_cannot_carry_two_signer_sets() {
        let keys = keys(4);
        let committee = committee(&keys);
        let parent = Digest::of(b"b1");
        let block = signed_block(qc(parent, 1, &keys[..3]), None, 2, vec![], &keys[0]);
        let mut other_signers = block.clone();
        other_signers.qc = qc(parent, 1, &keys[1..]);
        assert_eq!(other_signers.qc.verify(&committee), Ok(()));
        assert_ne!(block.digest(), other_signers.digest());
        assert_eq!(
            other_signers.verify(&committee),
            Err(MessageError::InvalidSignature)
        );
        // The same signers in another order are another copy too.
        let mut reordered = block.clone();
        reordered.qc.votes.reverse();
        assert_ne!(block.digest(), reordered.digest());
    }

    #[test]
    fn block_checks_signature_and_qc() {
        let keys = keys(4);
        let committee = committee(&keys);
        let leader = keys
            .iter()
            .find(|k| k.name == committee.leader(1))
            .expect("leader");
        let block = signed_block(QC::genesis(), None, 1, vec![Digest::of(b"x")], leader);
        assert_eq!(block.verify(&committee), Ok(()));

        let mut tampered = block.clone();
        tampered.payload.push(Digest::of(b"y"));
        assert_eq!(
            tampered.verify(&committee),
            Err(MessageError::InvalidSignature)
        );
    }
}
