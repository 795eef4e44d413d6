use super::*;
use crate::transaction::SAMPLE_PERIOD;
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

/// Every call and procedure, as a script and as an entry call.
fn workload_calls(kp: &KeyPair, nonce: u64) -> Vec<Transaction> {
    let to = destination();
    let calls = [
        Call::DoNothing,
        Call::CpuHeavy { length: 128 },
        Call::KvStore {
            first_key: 1,
            keys: 4,
            value_size: 32,
            version: u64::MAX,
        },
        Call::SmallBank(Procedure::Amalgamate { to }),
        Call::SmallBank(Procedure::Balance),
        Call::SmallBank(Procedure::DepositChecking { amount: 5 }),
        Call::SmallBank(Procedure::SendPayment { to, amount: 6 }),
        Call::SmallBank(Procedure::TransactSavings { amount: 7 }),
        Call::SmallBank(Procedure::WriteCheck { amount: 8 }),
    ];
    calls
        .into_iter()
        .flat_map(|call| {
            [
                Payload::WorkloadScript {
                    script: script(),
                    call: call.clone(),
                },
                Payload::WorkloadEntry { call },
            ]
        })
        .map(|payload| Transaction::sign(kp, nonce, payload))
        .collect()
}

#[test]
fn layout_is_bincode() {
    let kp = KeyPair::from_seed(2);
    let mut txs = vec![native(&kp, 1), moving(&kp, u64::MAX), entry(&kp, 3)];
    txs.extend(workload_calls(&kp, 4));
    for tx in txs {
        assert_eq!(tx.encoded_len(), tx.encode().len());
        assert_eq!(Transaction::decode(&tx.encode()), Ok(tx.clone()));
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

/// The fuzz corpus is written by `executor/fuzz/seeds.py`, an encoder of its own: every seed
/// decodes, verifies and re-encodes to the same bytes, and the workload seeds carry the calls
/// the script says.
#[test]
fn the_fuzz_seeds_decode() {
    let seeds: [(&str, &[u8]); 5] = [
        (
            "native",
            include_bytes!("../../fuzz/corpus/transaction/seed-native"),
        ),
        (
            "move",
            include_bytes!("../../fuzz/corpus/transaction/seed-move"),
        ),
        (
            "move-empty-script",
            include_bytes!("../../fuzz/corpus/transaction/seed-move-empty-script"),
        ),
        (
            "kvstore-entry",
            include_bytes!("../../fuzz/corpus/transaction/seed-kvstore-entry"),
        ),
        (
            "smallbank-script",
            include_bytes!("../../fuzz/corpus/transaction/seed-smallbank-script"),
        ),
    ];
    let mut payloads = Vec::new();
    for (name, bytes) in seeds {
        let tx = Transaction::decode(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(tx.verify().is_ok(), "{name}");
        assert_eq!(tx.encode(), bytes, "{name}");
        payloads.push(tx.payload);
    }
    assert_eq!(
        payloads[3],
        Payload::WorkloadEntry {
            call: Call::KvStore {
                first_key: 8,
                keys: 4,
                value_size: 32,
                version: 2
            }
        }
    );
    assert!(matches!(
        &payloads[4],
        Payload::WorkloadScript {
            call: Call::SmallBank(Procedure::SendPayment { amount: 7, .. }),
            ..
        }
    ));
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
        kind in 0..21u8,
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
            2 => entry(&kp, nonce),
            call => workload_calls(&kp, nonce).swap_remove(usize::from(call - 3)),
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
