//! The transaction format: what clients sign and send, what the verifier checks and what the
//! executors run.
//!
//! Wire layout (bincode, fixed-width integers, little endian), in field order:
//! `sender[16] public_key[32] nonce:u64 payload signature[64]` where `payload` is a `u32` variant
//! tag followed by `destination[16] amount:u64` (native, tag 0) or
//! `script_len:u64 script destination[16] amount:u64` (Move, tag 1). A native transfer is
//! 148 bytes; a Move transfer adds the length prefix and the compiled script.
//!
//! The signature covers [`SIGNING_DOMAIN`] followed by every other field in the same layout, so
//! the signed message is the domain tag plus the encoding minus its last 64 bytes.

use bincode::Options;
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

const SIGNATURE_LEN: usize = 64;
const NATIVE_TAG: u32 = 0;
const MOVE_TAG: u32 = 1;

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
}

impl Payload {
    pub fn destination(&self) -> Address {
        match self {
            Payload::Native { destination, .. } | Payload::Move { destination, .. } => *destination,
        }
    }

    pub fn amount(&self) -> u64 {
        match self {
            Payload::Native { amount, .. } | Payload::Move { amount, .. } => *amount,
        }
    }
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

/// The only encoding options used on transactions: bincode's fixed-width integers (as
/// `bincode::serialize` writes them), a size limit, and no trailing bytes.
fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_TRANSACTION_SIZE as u64)
        .reject_trailing_bytes()
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

    /// Appends every field but the signature, in wire layout. Written by hand rather than
    /// through serde so it cannot fail; a test pins it to bincode's output.
    fn write_fields(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sender.0);
        out.extend_from_slice(&self.public_key.0);
        out.extend_from_slice(&self.nonce.to_le_bytes());
        match &self.payload {
            Payload::Native {
                destination,
                amount,
            } => {
                out.extend_from_slice(&NATIVE_TAG.to_le_bytes());
                out.extend_from_slice(&destination.0);
                out.extend_from_slice(&amount.to_le_bytes());
            }
            Payload::Move {
                script,
                destination,
                amount,
            } => {
                out.extend_from_slice(&MOVE_TAG.to_le_bytes());
                out.extend_from_slice(&(script.len() as u64).to_le_bytes());
                out.extend_from_slice(script);
                out.extend_from_slice(&destination.0);
                out.extend_from_slice(&amount.to_le_bytes());
            }
        }
    }

    fn fields_len(&self) -> usize {
        let payload = match &self.payload {
            Payload::Native { .. } => 4 + ADDRESS_LEN + 8,
            Payload::Move { script, .. } => 4 + 8 + script.len() + ADDRESS_LEN + 8,
        };
        ADDRESS_LEN + 32 + 8 + payload
    }

    /// Appends the signed message to `out`, so a verifier can pack a whole batch's messages
    /// into one buffer.
    pub fn write_signing_bytes(&self, out: &mut Vec<u8>) {
        out.reserve(SIGNING_DOMAIN.len() + self.fields_len());
        out.extend_from_slice(SIGNING_DOMAIN);
        self.write_fields(out);
    }

    /// The message the signature covers: the domain tag and every other field.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_signing_bytes(&mut out);
        out
    }

    /// Encoded size in bytes, without encoding.
    pub fn encoded_len(&self) -> usize {
        self.fields_len() + SIGNATURE_LEN
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.write_fields(&mut out);
        out.extend_from_slice(&self.signature.to_bytes());
        out
    }

    /// Decodes one transaction that must fill `bytes` exactly.
    pub fn decode(bytes: &[u8]) -> Result<Self, TxError> {
        if bytes.len() > MAX_TRANSACTION_SIZE {
            return Err(TxError::TooLarge {
                size: bytes.len(),
                max: MAX_TRANSACTION_SIZE,
            });
        }
        options()
            .deserialize(bytes)
            .map_err(|e| TxError::Malformed(e.to_string()))
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

    /// One transaction in 128 per sender is followed end to end for latency.
    pub fn is_sample(&self) -> bool {
        is_sample_nonce(self.nonce)
    }

    /// `"<first 8 hex digits of the sender>:<nonce>"`, as clients and nodes both report it.
    pub fn sample_id(&self) -> String {
        sample_id(&self.sender, self.nonce)
    }
}

pub(crate) fn is_sample_nonce(nonce: u64) -> bool {
    nonce.is_multiple_of(128)
}

pub(crate) fn sample_id(sender: &Address, nonce: u64) -> String {
    format!("{sender}:{nonce}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in script of the compiled transfer script's size range.
    fn script() -> Bytes {
        Bytes::from(vec![0xa1; 140])
    }

    fn native(kp: &KeyPair, nonce: u64) -> Transaction {
        let destination = Address::from_public_key(&KeyPair::from_seed(99).name);
        Transaction::sign(
            kp,
            nonce,
            Payload::Native {
                destination,
                amount: 42,
            },
        )
    }

    fn moving(kp: &KeyPair, nonce: u64) -> Transaction {
        let destination = Address::from_public_key(&KeyPair::from_seed(99).name);
        Transaction::sign(
            kp,
            nonce,
            Payload::Move {
                script: script(),
                destination,
                amount: 42,
            },
        )
    }

    #[test]
    fn round_trip_and_sizes() {
        let kp = KeyPair::from_seed(1);
        let tx = native(&kp, 7);
        let bytes = tx.encode();
        assert_eq!(bytes.len(), tx.encoded_len());
        assert!((140..=210).contains(&bytes.len()), "{}", bytes.len());
        assert_eq!(Transaction::decode(&bytes), Ok(tx.clone()));
        assert!(tx.verify().is_ok());

        let tx = moving(&kp, 8);
        let bytes = tx.encode();
        assert!((250..=330).contains(&bytes.len()), "{}", bytes.len());
        assert_eq!(Transaction::decode(&bytes), Ok(tx.clone()));
        assert!(tx.verify().is_ok());
    }

    #[test]
    fn hand_written_layout_is_bincode() {
        let kp = KeyPair::from_seed(2);
        for tx in [native(&kp, 1), moving(&kp, u64::MAX)] {
            let via_serde = bincode::serialize(&tx).expect("serialize");
            assert_eq!(tx.encode(), via_serde);
            let mut signed = SIGNING_DOMAIN.to_vec();
            signed.extend_from_slice(&via_serde[..via_serde.len() - SIGNATURE_LEN]);
            assert_eq!(tx.signing_bytes(), signed);
        }
    }

    #[test]
    fn garbage_truncated_and_trailing_bytes_are_errors() {
        let kp = KeyPair::from_seed(3);
        let bytes = moving(&kp, 1).encode();
        for cut in 0..bytes.len() {
            assert!(Transaction::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(Transaction::decode(&trailing).is_err());
        assert!(matches!(
            Transaction::decode(&vec![0u8; MAX_TRANSACTION_SIZE + 1]),
            Err(TxError::TooLarge { .. })
        ));
        // A bad variant tag and a script length far beyond the limit.
        let mut bad_tag = bytes.clone();
        bad_tag[56] = 9;
        assert!(Transaction::decode(&bad_tag).is_err());
        let mut huge = bytes;
        huge[60..68].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Transaction::decode(&huge).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        use proptest::prelude::*;
        proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..400))| {
            let _ = Transaction::decode(&bytes);
        });
    }

    #[test]
    fn tampering_breaks_the_signature_and_address() {
        let kp = KeyPair::from_seed(4);
        let mut tx = native(&kp, 3);
        tx.nonce = 4;
        assert!(matches!(tx.verify(), Err(TxError::BadSignature(_))));
        let mut tx = native(&kp, 3);
        tx.sender = Address::from_public_key(&KeyPair::from_seed(5).name);
        assert_eq!(tx.check_address(), Err(TxError::BadAddress));
    }

    #[test]
    fn samples() {
        let kp = KeyPair::from_seed(6);
        assert!(native(&kp, 0).is_sample());
        assert!(native(&kp, 256).is_sample());
        assert!(!native(&kp, 1).is_sample());
        let tx = native(&kp, 128);
        let id = tx.sample_id();
        assert_eq!(id, format!("{}:128", &tx.sender.to_hex()[..8]));
    }
}
