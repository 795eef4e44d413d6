//! The transaction format: what clients sign and send, what the verifier checks and what the
//! executors run.
//!
//! Wire layout (bincode, fixed-width integers, little endian), in field order:
//! `sender[16] public_key[32] nonce:u64 payload signature[64]` where `payload` is a `u32` variant
//! tag followed by `destination[16] amount:u64` (native, tag 0) or
//! `script_len:u64 script destination[16] amount:u64` (Move, tag 1) or `destination[16]
//! amount:u64` (Move entry function, tag 2); a workload's call is `script_len:u64 script call`
//! (tag 3) or `call` (tag 4), where `call` is a `u32` tag and its arguments (see `codec.rs`). A
//! native transfer is 148 bytes, and so is an entry function call; a Move script transfer adds
//! the length prefix and the compiled script.
//!
//! The signature covers [`SIGNING_DOMAIN`] followed by every other field in the same layout, so
//! the signed message is the domain tag plus the encoding minus its last 64 bytes.

use crate::codec;
use crate::workload::Call;
use bytes::Bytes;
use crypto::{CryptoError, Digest, KeyPair, PublicKey, Signature};
use move_core_types::account_address::AccountAddress;
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// An account address has the length of a Move `AccountAddress`, so the two map one to one.
pub const ADDRESS_LEN: usize = AccountAddress::LENGTH;

/// Largest encoded transaction `decode` accepts. The transfer script is about 150 bytes; the
/// limit also bounds what a forged length prefix can make the decoder allocate.
pub const MAX_TRANSACTION_SIZE: usize = 2048;

/// Prepended to the signed bytes so a transaction signature can never be replayed as a
/// consensus signature (those sign 32-byte digests) or as another protocol's message.
pub const SIGNING_DOMAIN: &[u8] = b"HotMove/transaction/v1\0";

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TxError {
    #[error("transaction of {size} bytes exceeds the {max}-byte limit")]
    TooLarge { size: usize, max: usize },
    #[error("malformed transaction: {0}")]
    Malformed(String),
    #[error("sender address does not derive from the public key")]
    BadAddress,
    #[error("invalid signature: {0}")]
    BadSignature(#[from] CryptoError),
}

/// An account: the first [`ADDRESS_LEN`] bytes of the SHA-256 of its ed25519 public key.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Address(pub [u8; ADDRESS_LEN]);

impl Address {
    pub fn from_public_key(key: &PublicKey) -> Self {
        let digest = Digest::of(&key.0);
        let mut address = [0u8; ADDRESS_LEN];
        address.copy_from_slice(&digest.0[..ADDRESS_LEN]);
        Address(address)
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_hex())
    }
}

/// Short form for logs and sample ids: the first 8 hex digits.
impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", hex::encode(&self.0[..4]))
    }
}

/// What a transaction does. Both variants move `amount` to `destination`; the Move one does it by
/// running `script` (the compiled `transfer.move`) in the Move VM.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    Native {
        destination: Address,
        amount: u64,
    },
    Move {
        script: Bytes,
        destination: Address,
        amount: u64,
    },
    /// The same transfer through the entry function `Coin::transfer_entry` instead of a script
    /// (`--payload=entry`): no script bytes travel, and the VM neither hashes nor loads one.
    MoveEntry {
        destination: Address,
        amount: u64,
    },
    /// A workload's call (`--workload`) through its script, which the transaction carries.
    WorkloadScript {
        script: Bytes,
        call: Call,
    },
    /// A workload's call through its entry function.
    WorkloadEntry {
        call: Call,
    },
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Native {
                destination,
                amount,
            } => write!(f, "Native({amount} -> {destination})"),
            Payload::Move {
                script,
                destination,
                amount,
            } => write!(
                f,
                "Move({amount} -> {destination}, script {} bytes)",
                script.len()
            ),
            Payload::MoveEntry {
                destination,
                amount,
            } => write!(f, "MoveEntry({amount} -> {destination})"),
            Payload::WorkloadScript { script, call } => {
                write!(f, "WorkloadScript({call:?}, script {} bytes)", script.len())
            }
            Payload::WorkloadEntry { call } => write!(f, "WorkloadEntry({call:?})"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    pub sender: Address,
    pub public_key: PublicKey,
    pub nonce: u64,
    pub payload: Payload,
    pub signature: Signature,
}

impl Transaction {
    /// Builds and signs a transaction from `keys`' account.
    pub fn sign(keys: &KeyPair, nonce: u64, payload: Payload) -> Self {
        let mut tx = Self::unsigned(keys.name, nonce, payload);
        tx.signature = Signature::sign_bytes(&tx.signing_bytes(), &keys.secret);
        tx
    }

    /// A transaction with an all-zero signature: for the standalone `movevm` mode and benches,
    /// where signatures are not checked and signing would dominate the cost.
    pub fn unsigned(public_key: PublicKey, nonce: u64, payload: Payload) -> Self {
        Transaction {
            sender: Address::from_public_key(&public_key),
            public_key,
            nonce,
            payload,
            signature: Signature::default(),
        }
    }

    /// Appends the signed message to `out`, so a verifier can pack a whole batch's messages
    /// into one buffer.
    pub fn write_signing_bytes(&self, out: &mut Vec<u8>) {
        out.reserve(SIGNING_DOMAIN.len() + codec::fields_len(self));
        out.extend_from_slice(SIGNING_DOMAIN);
        codec::write_fields(self, out);
    }

    /// The message the signature covers: the domain tag and every other field.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_signing_bytes(&mut out);
        out
    }

    /// Encoded size in bytes, without encoding.
    pub fn encoded_len(&self) -> usize {
        codec::fields_len(self) + codec::SIGNATURE_LEN
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        codec::write_fields(self, &mut out);
        out.extend_from_slice(&self.signature.to_bytes());
        out
    }

    /// Decodes one transaction that must fill `bytes` exactly (at most
    /// [`MAX_TRANSACTION_SIZE`] bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, TxError> {
        codec::decode(bytes)
    }

    /// The sender address must be the one derived from the public key, or anyone could sign
    /// for any account with their own key.
    pub fn check_address(&self) -> Result<(), TxError> {
        if Address::from_public_key(&self.public_key) == self.sender {
            Ok(())
        } else {
            Err(TxError::BadAddress)
        }
    }

    /// Address check and signature check, one transaction at a time.
    pub fn verify(&self) -> Result<(), TxError> {
        self.check_address()?;
        self.signature
            .verify_bytes(&self.signing_bytes(), &self.public_key)?;
        Ok(())
    }

    /// One transaction in `SAMPLE_PERIOD` per sender is followed end to end for latency.
    pub fn is_sample(&self) -> bool {
        is_sample_nonce(&self.sender, self.nonce)
    }

    /// `"<first 8 hex digits of the sender>:<nonce>"`, as clients and nodes both report it.
    pub fn sample_id(&self) -> String {
        sample_id(&self.sender, self.nonce)
    }
}

/// Every `SAMPLE_PERIOD`-th nonce of a sender is a sample.
pub const SAMPLE_PERIOD: u64 = 128;

/// The phase is offset by the sender's first address byte: clients send round-robin over their
/// accounts, and without the offset every account would reach a sample nonce at the same moment,
/// so samples would come in rare clusters instead of evenly over the run.
pub(crate) fn is_sample_nonce(sender: &Address, nonce: u64) -> bool {
    (nonce + sender.0[0] as u64).is_multiple_of(SAMPLE_PERIOD)
}

pub(crate) fn sample_id(sender: &Address, nonce: u64) -> String {
    format!("{sender}:{nonce}")
}

/// Where the nonce sits in an encoded transaction: after the sender and the public key.
const NONCE_OFFSET: usize = ADDRESS_LEN + 32;

/// The sample id of an encoded transaction, read from the fixed offsets of its sender and nonce
/// without decoding it (the mempool peeks at every transaction it seals, and must not decode).
/// `None` for a transaction that is not a sample or too short to be one.
pub fn signed_sample_id(tx: &[u8]) -> Option<String> {
    // Shorter than the smallest transaction (a call without arguments: two tags): not a
    // transaction at all.
    if tx.len() < NONCE_OFFSET + 8 + 4 + 4 + crate::codec::SIGNATURE_LEN {
        return None;
    }
    let sender = Address(tx.get(..ADDRESS_LEN)?.try_into().ok()?);
    let nonce = u64::from_le_bytes(tx.get(NONCE_OFFSET..NONCE_OFFSET + 8)?.try_into().ok()?);
    is_sample_nonce(&sender, nonce).then(|| sample_id(&sender, nonce))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(kp: &KeyPair, nonce: u64) -> Transaction {
        let destination = Address::from_public_key(&KeyPair::from_seed(99).name);
        let payload = Payload::Native {
            destination,
            amount: 42,
        };
        Transaction::sign(kp, nonce, payload)
    }

    #[test]
    fn tampering_breaks_the_signature_and_address() {
        let kp = KeyPair::from_seed(4);
        assert!(native(&kp, 3).verify().is_ok());
        let mut tx = native(&kp, 3);
        tx.nonce = 4;
        assert!(matches!(tx.verify(), Err(TxError::BadSignature(_))));
        let mut tx = native(&kp, 3);
        tx.sender = Address::from_public_key(&KeyPair::from_seed(5).name);
        assert_eq!(tx.check_address(), Err(TxError::BadAddress));
        assert_eq!(tx.verify(), Err(TxError::BadAddress));
    }

    #[test]
    fn samples() {
        let kp = KeyPair::from_seed(6);
        let sender = native(&kp, 0).sender;
        let phase = (SAMPLE_PERIOD - sender.0[0] as u64 % SAMPLE_PERIOD) % SAMPLE_PERIOD;
        assert!(native(&kp, phase).is_sample());
        assert!(native(&kp, phase + 2 * SAMPLE_PERIOD).is_sample());
        assert!(!native(&kp, phase + 1).is_sample());
        let samples = (0..10 * SAMPLE_PERIOD)
            .filter(|&n| native(&kp, n).is_sample())
            .count();
        assert_eq!(samples, 10);
        let tx = native(&kp, phase);
        assert_eq!(
            tx.sample_id(),
            format!("{}:{phase}", &tx.sender.to_hex()[..8])
        );
    }

    #[test]
    fn samples_are_found_in_the_encoding_without_decoding() {
        let kp = KeyPair::from_seed(5);
        let sender = Address::from_public_key(&kp.name);
        let phase = (SAMPLE_PERIOD - sender.0[0] as u64 % SAMPLE_PERIOD) % SAMPLE_PERIOD;
        let script = Bytes::from(vec![0xa1; 140]);
        let moving = |nonce| {
            let payload = Payload::Move {
                script: script.clone(),
                destination: sender,
                amount: 1,
            };
            Transaction::sign(&kp, nonce, payload)
        };
        for tx in [native(&kp, phase), moving(phase + SAMPLE_PERIOD)] {
            assert!(tx.is_sample());
            assert_eq!(signed_sample_id(&tx.encode()), Some(tx.sample_id()));
        }
        for tx in [native(&kp, phase + 1), moving(phase + 5)] {
            assert!(!tx.is_sample());
            assert_eq!(signed_sample_id(&tx.encode()), None);
        }
        // Cut short: not a transaction, whatever its first bytes say.
        let bytes = native(&kp, phase).encode();
        assert_eq!(signed_sample_id(&bytes[..60]), None);
        assert_eq!(signed_sample_id(&[]), None);
    }

    #[test]
    fn sample_phases_differ_between_senders() {
        let phases: std::collections::HashSet<u64> = (0..20)
            .map(|seed| {
                let kp = KeyPair::from_seed(seed);
                (0..SAMPLE_PERIOD)
                    .find(|&n| native(&kp, n).is_sample())
                    .expect("one sample per period")
            })
            .collect();
        assert!(phases.len() > 10, "{phases:?}");
    }
}
