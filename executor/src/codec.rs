//! The transaction wire layout, written and read by hand.
//!
//! The layout is exactly what bincode (fixed-width integers, little endian, no trailing bytes,
//! size limit) produces for the serde derive of [`Transaction`]; the tests check both directions
//! against bincode itself, on valid, mutated and random input. Doing it by hand matters for
//! speed: through serde, every byte of the five fixed-size arrays (addresses, key, signature) is
//! a separate sequence element, which made a decode cost several hundred nanoseconds, and every
//! node decodes every transaction. Writing by hand also cannot fail, so `encode` returns bytes,
//! not a `Result`.

use crate::transaction::{
    Address, Payload, Transaction, TxError, ADDRESS_LEN, MAX_TRANSACTION_SIZE,
};
use bytes::Bytes;
use crypto::{PublicKey, Signature};

pub(crate) const SIGNATURE_LEN: usize = 64;
const NATIVE_TAG: u32 = 0;
const MOVE_TAG: u32 = 1;
const MOVE_ENTRY_TAG: u32 = 2;

/// Bytes of every field but the signature.
pub(crate) fn fields_len(tx: &Transaction) -> usize {
    let payload = match &tx.payload {
        Payload::Native { .. } | Payload::MoveEntry { .. } => 4 + ADDRESS_LEN + 8,
        Payload::Move { script, .. } => 4 + 8 + script.len() + ADDRESS_LEN + 8,
    };
    ADDRESS_LEN + 32 + 8 + payload
}

/// Appends every field but the signature, in wire order.
pub(crate) fn write_fields(tx: &Transaction, out: &mut Vec<u8>) {
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
    }
}

/// Decodes one transaction that fills `bytes` exactly.
pub(crate) fn decode(bytes: &[u8]) -> Result<Transaction, TxError> {
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
        MOVE_TAG => {
            let length = reader.u64()?;
            let length = usize::try_from(length)
                .ok()
                .filter(|length| *length <= reader.0.len())
                .ok_or_else(|| malformed(format!("script length {length} exceeds the input")))?;
            Payload::Move {
                script: Bytes::copy_from_slice(reader.take(length)?),
                destination: Address(reader.array()?),
                amount: reader.u64()?,
            }
        }
        MOVE_ENTRY_TAG => Payload::MoveEntry {
            destination: Address(reader.array()?),
            amount: reader.u64()?,
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
mod tests {
    use super::*;
    use crate::transaction::SIGNING_DOMAIN;
    use bincode::Options;
    use crypto::KeyPair;
    use proptest::prelude::*;

    /// The reference the hand-written codec must match.
    fn bincode_options() -> impl Options {
        bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .with_little_endian()
            .with_limit(MAX_TRANSACTION_SIZE as u64)
            .reject_trailing_bytes()
    }

    fn by_bincode(bytes: &[u8]) -> Option<Transaction> {
        bincode_options().deserialize(bytes).ok()
    }

    /// A stand-in script of the compiled transfer script's size range.
    fn script() -> Bytes {
        Bytes::from(vec![0xa1; 140])
    }

    fn destination() -> Address {
        Address::from_public_key(&KeyPair::from_seed(99).name)
    }

    fn native(kp: &KeyPair, nonce: u64) -> Transaction {
        let payload = Payload::Native {
            destination: destination(),
            amount: 42,
        };
        Transaction::sign(kp, nonce, payload)
    }

    fn moving(kp: &KeyPair, nonce: u64) -> Transaction {
        let payload = Payload::Move {
            script: script(),
            destination: destination(),
            amount: 42,
        };
        Transaction::sign(kp, nonce, payload)
    }

    fn entry(kp: &KeyPair, nonce: u64) -> Transaction {
        let payload = Payload::MoveEntry {
            destination: destination(),
            amount: 42,
        };
        Transaction::sign(kp, nonce, payload)
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

        // An entry function call is as small as a native transfer.
        let tx = entry(&kp, 9);
        let bytes = tx.encode();
        assert_eq!(bytes.len(), native(&kp, 9).encode().len());
        assert_eq!(Transaction::decode(&bytes), Ok(tx.clone()));
        assert!(tx.verify().is_ok());
    }

    #[test]
    fn layout_is_bincode() {
        let kp = KeyPair::from_seed(2);
        for tx in [native(&kp, 1), moving(&kp, u64::MAX), entry(&kp, 3)] {
            let via_serde = bincode_options().serialize(&tx).expect("serialize");
            assert_eq!(tx.encode(), via_serde);
            assert_eq!(by_bincode(&via_serde), Some(tx.clone()));
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
        // A bad variant tag, and a script length far beyond the input.
        let mut bad_tag = bytes.clone();
        bad_tag[56] = 9;
        assert!(Transaction::decode(&bad_tag).is_err());
        let mut huge = bytes;
        huge[60..68].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Transaction::decode(&huge).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_decode_like_bincode(
            bytes in proptest::collection::vec(any::<u8>(), 0..400)
        ) {
            prop_assert_eq!(Transaction::decode(&bytes).ok(), by_bincode(&bytes));
        }

        /// Valid encodings with one byte changed, cut short or extended: the two decoders must
        /// agree on every one (random bytes alone rarely get past the variant tag).
        #[test]
        fn mutated_encodings_decode_like_bincode(
            kind in 0..3u8,
            nonce in any::<u64>(),
            position in any::<prop::sample::Index>(),
            value in any::<u8>(),
            cut in any::<prop::sample::Index>(),
            extra in proptest::collection::vec(any::<u8>(), 0..3),
        ) {
            let kp = KeyPair::from_seed(4);
            let tx = match kind {
                0 => native(&kp, nonce),
                1 => moving(&kp, nonce),
                _ => entry(&kp, nonce),
            };
            let mut bytes = tx.encode();
            let at = position.index(bytes.len());
            bytes[at] = value;
            prop_assert_eq!(Transaction::decode(&bytes).ok(), by_bincode(&bytes));
            let short = &bytes[..cut.index(bytes.len() + 1)];
            prop_assert_eq!(Transaction::decode(short).ok(), by_bincode(short));
            bytes.extend_from_slice(&extra);
            prop_assert_eq!(Transaction::decode(&bytes).ok(), by_bincode(&bytes));
        }
    }
}
