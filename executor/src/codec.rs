//! The bytes of a transaction: its wire layout, written and read by hand, and the message its
//! signature covers (so signing and verifying are here too).
//!
//! Wire layout (bincode, fixed-width integers, little endian), in field order:
//! `sender[16] public_key[32] nonce:u64 payload signature[64]` where `payload` is a `u32` variant
//! tag followed by `destination[16] amount:u64` (native, tag 0) or
//! `script_len:u64 script destination[16] amount:u64` (Move, tag 1) or `destination[16]
//! amount:u64` (Move entry function, tag 2); a workload's call is `script_len:u64 script call`
//! (tag 3) or `call` (tag 4), where `call` is a `u32` tag and its arguments (below). A
//! native transfer is 148 bytes, and so is an entry function call; a Move script transfer adds
//! the length prefix and the compiled script.
//!
//! The signature covers [`SIGNING_DOMAIN`] followed by every other field in the same layout, so
//! the signed message is the domain tag plus the encoding minus its last 64 bytes.
//!
//! The layout is exactly what bincode (fixed-width integers, little endian, no trailing bytes,
//! size limit) produces for the serde derive of [`Transaction`]; the tests check both directions
//! against bincode itself, on valid, mutated and random input. Doing it by hand matters for
//! speed: through serde, every byte of the five fixed-size arrays (addresses, key, signature) is
//! a separate sequence element, which made a decode cost several hundred nanoseconds, and every
//! node decodes every transaction. Writing by hand also cannot fail, so `encode` returns bytes,
//! not a `Result`.

use crate::transaction::{
    is_sample_nonce, sample_id, Address, Call, Payload, Procedure, Transaction, TxError,
    ADDRESS_LEN, MAX_TRANSACTION_SIZE, SIGNING_DOMAIN,
};
use bytes::Bytes;
use crypto::{KeyPair, PublicKey, Signature};

const SIGNATURE_LEN: usize = 64;
const NATIVE_TAG: u32 = 0;
const MOVE_TAG: u32 = 1;
const MOVE_ENTRY_TAG: u32 = 2;
const WORKLOAD_SCRIPT_TAG: u32 = 3;
const WORKLOAD_ENTRY_TAG: u32 = 4;

// The variant tags of `Call` and `Procedure`, in declaration order as serde numbers them.
const DO_NOTHING_TAG: u32 = 0;
const CPU_HEAVY_TAG: u32 = 1;
const KV_STORE_TAG: u32 = 2;
const SMALL_BANK_TAG: u32 = 3;
const AMALGAMATE_TAG: u32 = 0;
const BALANCE_TAG: u32 = 1;
const DEPOSIT_CHECKING_TAG: u32 = 2;
const SEND_PAYMENT_TAG: u32 = 3;
const TRANSACT_SAVINGS_TAG: u32 = 4;
const WRITE_CHECK_TAG: u32 = 5;

impl Transaction {
    /// Builds and signs a transaction from `keys`' account.
    pub fn sign(keys: &KeyPair, nonce: u64, payload: Payload) -> Self {
        let mut tx = Self::unsigned(keys.name, nonce, payload);
        tx.signature = Signature::sign_bytes(&tx.signing_bytes(), &keys.secret);
        tx
    }

    /// Appends the signed message to `out`, so a verifier can pack a whole batch's messages
    /// into one buffer.
    pub fn write_signing_bytes(&self, out: &mut Vec<u8>) {
        out.reserve(SIGNING_DOMAIN.len() + fields_len(self));
        out.extend_from_slice(SIGNING_DOMAIN);
        write_fields(self, out);
    }

    /// The message the signature covers: the domain tag and every other field.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_signing_bytes(&mut out);
        out
    }

    /// Encoded size in bytes, without encoding.
    pub fn encoded_len(&self) -> usize {
        fields_len(self) + SIGNATURE_LEN
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        write_fields(self, &mut out);
        out.extend_from_slice(&self.signature.to_bytes());
        out
    }

    /// Decodes one transaction that must fill `bytes` exactly (at most
    /// [`MAX_TRANSACTION_SIZE`] bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, TxError> {
        decode(bytes)
    }

    /// Address check and signature check, one transaction at a time.
    pub fn verify(&self) -> Result<(), TxError> {
        self.check_address()?;
        self.signature
            .verify_bytes(&self.signing_bytes(), &self.public_key)?;
        Ok(())
    }
}

/// Where the nonce sits in an encoded transaction: after the sender and the public key.
const NONCE_OFFSET: usize = ADDRESS_LEN + 32;

/// The sample id of an encoded transaction, read from the fixed offsets of its sender and nonce
/// without decoding it (the mempool peeks at every transaction it seals, and must not decode).
/// `None` for a transaction that is not a sample or too short to be one.
pub fn signed_sample_id(tx: &[u8]) -> Option<String> {
    // Shorter than the smallest transaction (a call without arguments: two tags): not a
    // transaction at all.
    if tx.len() < NONCE_OFFSET + 8 + 4 + 4 + SIGNATURE_LEN {
        return None;
    }
    let sender = Address(tx.get(..ADDRESS_LEN)?.try_into().ok()?);
    let nonce = u64::from_le_bytes(tx.get(NONCE_OFFSET..NONCE_OFFSET + 8)?.try_into().ok()?);
    is_sample_nonce(&sender, nonce).then(|| sample_id(&sender, nonce))
}

/// Bytes of every field but the signature.
fn fields_len(tx: &Transaction) -> usize {
    let payload = match &tx.payload {
        Payload::Native { .. } | Payload::MoveEntry { .. } => 4 + ADDRESS_LEN + 8,
        Payload::Move { script, .. } => 4 + 8 + script.len() + ADDRESS_LEN + 8,
        Payload::WorkloadScript { script, call } => 4 + 8 + script.len() + call_len(call),
        Payload::WorkloadEntry { call } => 4 + call_len(call),
    };
    ADDRESS_LEN + 32 + 8 + payload
}

fn call_len(call: &Call) -> usize {
    4 + match call {
        Call::DoNothing => 0,
        Call::CpuHeavy { .. } => 8,
        Call::KvStore { .. } => 4 * 8,
        Call::SmallBank(procedure) => {
            4 + match procedure {
                Procedure::Balance => 0,
                Procedure::Amalgamate { .. } => ADDRESS_LEN,
                Procedure::SendPayment { .. } => ADDRESS_LEN + 8,
                Procedure::DepositChecking { .. }
                | Procedure::TransactSavings { .. }
                | Procedure::WriteCheck { .. } => 8,
            }
        }
    }
}

/// A variant tag and its u64 fields.
fn u64s(tag: u32, values: &[u64], out: &mut Vec<u8>) {
    out.extend_from_slice(&tag.to_le_bytes());
    for value in values {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn write_call(call: &Call, out: &mut Vec<u8>) {
    match call {
        Call::DoNothing => u64s(DO_NOTHING_TAG, &[], out),
        Call::CpuHeavy { length } => u64s(CPU_HEAVY_TAG, &[*length], out),
        Call::KvStore {
            first_key,
            keys,
            value_size,
            version,
        } => u64s(
            KV_STORE_TAG,
            &[*first_key, *keys, *value_size, *version],
            out,
        ),
        Call::SmallBank(procedure) => {
            out.extend_from_slice(&SMALL_BANK_TAG.to_le_bytes());
            match procedure {
                Procedure::Amalgamate { to } => {
                    out.extend_from_slice(&AMALGAMATE_TAG.to_le_bytes());
                    out.extend_from_slice(&to.0);
                }
                Procedure::Balance => u64s(BALANCE_TAG, &[], out),
                Procedure::DepositChecking { amount } => {
                    u64s(DEPOSIT_CHECKING_TAG, &[*amount], out)
                }
                Procedure::SendPayment { to, amount } => {
                    out.extend_from_slice(&SEND_PAYMENT_TAG.to_le_bytes());
                    out.extend_from_slice(&to.0);
                    out.extend_from_slice(&amount.to_le_bytes());
                }
                Procedure::TransactSavings { amount } => {
                    u64s(TRANSACT_SAVINGS_TAG, &[*amount], out)
                }
                Procedure::WriteCheck { amount } => u64s(WRITE_CHECK_TAG, &[*amount], out),
            }
        }
    }
}

fn read_call(reader: &mut Reader<'_>) -> Result<Call, TxError> {
    Ok(match reader.u32()? {
        DO_NOTHING_TAG => Call::DoNothing,
        CPU_HEAVY_TAG => Call::CpuHeavy {
            length: reader.u64()?,
        },
        KV_STORE_TAG => Call::KvStore {
            first_key: reader.u64()?,
            keys: reader.u64()?,
            value_size: reader.u64()?,
            version: reader.u64()?,
        },
        SMALL_BANK_TAG => Call::SmallBank(match reader.u32()? {
            AMALGAMATE_TAG => Procedure::Amalgamate {
                to: Address(reader.array()?),
            },
            BALANCE_TAG => Procedure::Balance,
            DEPOSIT_CHECKING_TAG => Procedure::DepositChecking {
                amount: reader.u64()?,
            },
            SEND_PAYMENT_TAG => Procedure::SendPayment {
                to: Address(reader.array()?),
                amount: reader.u64()?,
            },
            TRANSACT_SAVINGS_TAG => Procedure::TransactSavings {
                amount: reader.u64()?,
            },
            WRITE_CHECK_TAG => Procedure::WriteCheck {
                amount: reader.u64()?,
            },
            tag => return Err(malformed(format!("unknown procedure variant {tag}"))),
        }),
        tag => return Err(malformed(format!("unknown call variant {tag}"))),
    })
}

/// A script: its length, then its bytes (bounded by what is left of the input).
fn read_script(reader: &mut Reader<'_>) -> Result<Bytes, TxError> {
    let length = reader.u64()?;
    let length = usize::try_from(length)
        .ok()
        .filter(|length| *length <= reader.0.len())
        .ok_or_else(|| malformed(format!("script length {length} exceeds the input")))?;
    Ok(Bytes::copy_from_slice(reader.take(length)?))
}

/// Appends every field but the signature, in wire order.
fn write_fields(tx: &Transaction, out: &mut Vec<u8>) {
    out.extend_from_slice(&tx.sender.0);
    out.extend_from_slice(&tx.public_key.0);
    out.extend_from_slice(&tx.nonce.to_le_bytes());
    match &tx.payload {
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
        Payload::MoveEntry {
            destination,
            amount,
        } => {
            out.extend_from_slice(&MOVE_ENTRY_TAG.to_le_bytes());
            out.extend_from_slice(&destination.0);
            out.extend_from_slice(&amount.to_le_bytes());
        }
        Payload::WorkloadScript { script, call } => {
            out.extend_from_slice(&WORKLOAD_SCRIPT_TAG.to_le_bytes());
            out.extend_from_slice(&(script.len() as u64).to_le_bytes());
            out.extend_from_slice(script);
            write_call(call, out);
        }
        Payload::WorkloadEntry { call } => {
            out.extend_from_slice(&WORKLOAD_ENTRY_TAG.to_le_bytes());
            write_call(call, out);
        }
    }
}

/// Decodes one transaction that fills `bytes` exactly.
fn decode(bytes: &[u8]) -> Result<Transaction, TxError> {
    // Bounding the input bounds everything: the script length is checked against what is left.
    if bytes.len() > MAX_TRANSACTION_SIZE {
        return Err(TxError::TooLarge {
            size: bytes.len(),
            max: MAX_TRANSACTION_SIZE,
        });
    }
    let mut reader = Reader(bytes);
    let sender = Address(reader.array()?);
    let public_key = PublicKey(reader.array()?);
    let nonce = reader.u64()?;
    let payload = match reader.u32()? {
        NATIVE_TAG => Payload::Native {
            destination: Address(reader.array()?),
            amount: reader.u64()?,
        },
        MOVE_TAG => Payload::Move {
            script: read_script(&mut reader)?,
            destination: Address(reader.array()?),
            amount: reader.u64()?,
        },
        MOVE_ENTRY_TAG => Payload::MoveEntry {
            destination: Address(reader.array()?),
            amount: reader.u64()?,
        },
        WORKLOAD_SCRIPT_TAG => Payload::WorkloadScript {
            script: read_script(&mut reader)?,
            call: read_call(&mut reader)?,
        },
        WORKLOAD_ENTRY_TAG => Payload::WorkloadEntry {
            call: read_call(&mut reader)?,
        },
        tag => return Err(malformed(format!("unknown payload variant {tag}"))),
    };
    let signature = Signature::from_bytes(&reader.array()?);
    if !reader.0.is_empty() {
        return Err(malformed(format!("{} trailing bytes", reader.0.len())));
    }
    Ok(Transaction {
        sender,
        public_key,
        nonce,
        payload,
        signature,
    })
}

fn malformed(message: String) -> TxError {
    TxError::Malformed(message)
}

/// The unread rest of the input.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TxError> {
        if self.0.len() < n {
            return Err(malformed(format!(
                "truncated: needed {n} more bytes, {} left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TxError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    fn u32(&mut self) -> Result<u32, TxError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, TxError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests;
