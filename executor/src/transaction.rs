//! The transaction: who sends it, with which key and nonce, what it asks for (its [`Payload`],
//! and the workload [`Call`] a payload may carry), and which transactions are followed end to
//! end as samples. What its bytes are (the wire layout, the message its signature covers,
//! signing and verifying) is `codec.rs`'s, above it; the workloads that build calls are above
//! both.

use bytes::Bytes;
use crypto::{CryptoError, Digest, PublicKey, Signature};
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

/// A workload's call and its arguments; the signer, always the sender, is implicit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Call {
    DoNothing,
    CpuHeavy {
        length: u64,
    },
    KvStore {
        first_key: u64,
        keys: u64,
        value_size: u64,
        version: u64,
    },
    SmallBank(Procedure),
}

/// SmallBank's six procedures; the signer is the account that pays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Procedure {
    Amalgamate { to: Address },
    Balance,
    DepositChecking { amount: u64 },
    SendPayment { to: Address, amount: u64 },
    TransactSavings { amount: u64 },
    WriteCheck { amount: u64 },
}

/// The largest calls the bare VM runs: it meters nothing, so without a bound one transaction
/// could hold the executor for as long as its sender likes (the adapter's gas bounds them).
pub const MAX_UNMETERED_SORT: u64 = 10_000;
pub const MAX_UNMETERED_KEYS: u64 = 64;
pub const MAX_UNMETERED_VALUE_SIZE: u64 = 1_024;

impl Call {
    /// Whether the bare VM runs this call (see [`MAX_UNMETERED_SORT`]).
    pub fn within_unmetered_bounds(&self) -> bool {
        match self {
            Call::CpuHeavy { length } => *length <= MAX_UNMETERED_SORT,
            Call::KvStore {
                keys, value_size, ..
            } => *keys <= MAX_UNMETERED_KEYS && *value_size <= MAX_UNMETERED_VALUE_SIZE,
            Call::DoNothing | Call::SmallBank(_) => true,
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

    /// The sender address must be the one derived from the public key, or anyone could sign
    /// for any account with their own key.
    pub fn check_address(&self) -> Result<(), TxError> {
        if Address::from_public_key(&self.public_key) == self.sender {
            Ok(())
        } else {
            Err(TxError::BadAddress)
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyPair;

    fn native(kp: &KeyPair, nonce: u64) -> Transaction {
        let destination = Address::from_public_key(&KeyPair::from_seed(99).name);
        let payload = Payload::Native {
            destination,
            amount: 42,
        };
        Transaction::sign(kp, nonce, payload)
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
