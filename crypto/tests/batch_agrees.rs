//! Batch and parallel verification must decide every item exactly as `Signature::verify_bytes`
//! does, on honest and on adversarial input, whatever the thread count and chunking.

mod common;

use common::*;
use crypto::{KeyPair, ParallelVerifier, PublicKey, Signature};
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{Identity, IsIdentity};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;

#[derive(Clone, Debug)]
struct Item {
    message: Vec<u8>,
    signature: Signature,
    key: PublicKey,
}

fn view(item: &Item) -> (&[u8], &Signature, &PublicKey) {
    (&item.message, &item.signature, &item.key)
}

fn single(item: &Item) -> bool {
    item.signature
        .verify_bytes(&item.message, &item.key)
        .is_ok()
}

/// How an item is built. `expected` says what the rules must decide for it, where that does not
/// depend on chance; the property itself is agreement with the single check.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Valid,
    WrongMessage,
    FlipR(u8),
    FlipS(u8),
    WrongKey,
    InvalidKeyEncoding,
    ZeroSignature,
    /// Small-order key, signature (small-order R, s).
    SmallOrderKey {
        key: usize,
        r: usize,
        s: u8,
    },
    /// Honest key, R a small-order point, s = k·a so the cofactored equation holds.
    SmallOrderR(usize),
    /// A valid signature with s replaced by s + L.
    NonCanonicalS,
    /// A non-canonical key or R encoding (including the small-order ones), with s = 0 or 1.
    NonCanonicalKey {
        key: usize,
        r: usize,
        s: u8,
    },
    NonCanonicalR {
        r: usize,
    },
    /// Key aB + T (T of order 2, 4 or 8), signed honestly: valid under the cofactored rule,
    /// valid under dalek's cofactorless rule only when 8 | k·ord(T)/…, i.e. by chance.
    MixedOrderKey(usize),
    /// Honest key, R = rB + T, s = r + k·a: same story with the torsion in R.
    MixedOrderR(usize),
    /// Mixed-order key and R whose torsion parts do not cancel.
    MixedOrderBoth(usize, usize),
    /// 64 random bytes under a random 32-byte key.
    Garbage,
}

impl Kind {
    fn expected(self) -> Option<bool> {
        match self {
            Kind::Valid | Kind::MixedOrderKey(_) | Kind::MixedOrderR(_) => Some(true),
            // Torsion cancels or not depending on k; either way cofactored-valid.
            Kind::MixedOrderBoth(..) => Some(true),
            Kind::Garbage => None,
            _ => Some(false),
        }
    }
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        6 => Just(Kind::Valid),
        1 => Just(Kind::WrongMessage),
        1 => any::<u8>().prop_map(Kind::FlipR),
        1 => any::<u8>().prop_map(Kind::FlipS),
        1 => Just(Kind::WrongKey),
        1 => Just(Kind::InvalidKeyEncoding),
        1 => Just(Kind::ZeroSignature),
        1 => (0..8usize, 0..8usize, 0..3u8).prop_map(|(key, r, s)| Kind::SmallOrderKey { key, r, s }),
        1 => (0..8usize).prop_map(Kind::SmallOrderR),
        1 => Just(Kind::NonCanonicalS),
        1 => (0..64usize, 0..64usize, 0..2u8).prop_map(|(key, r, s)| Kind::NonCanonicalKey { key, r, s }),
        1 => (0..64usize).prop_map(|r| Kind::NonCanonicalR { r }),
        1 => (1..8usize).prop_map(Kind::MixedOrderKey),
        1 => (1..8usize).prop_map(Kind::MixedOrderR),
        1 => (1..8usize, 1..8usize).prop_map(|(a, r)| Kind::MixedOrderBoth(a, r)),
        1 => Just(Kind::Garbage),
    ]
}

fn raw_signature(r: [u8; 32], s: [u8; 32]) -> Signature {
    let mut bytes = [0u8; 64];
    bytes[..32].copy_from_slice(&r);
    bytes[32..].copy_from_slice(&s);
    Signature::from_bytes(&bytes)
}

fn small_scalar(s: u8) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    bytes[0] = s;
    bytes
}

fn build(kind: Kind, rng: &mut StdRng) -> Item {
    let message: Vec<u8> = (0..rng.gen_range(0..48)).map(|_| rng.gen()).collect();
    let kp = KeyPair::from_seed(rng.gen_range(0..16));
    let honest = Signature::sign_bytes(&message, &kp.secret);
    let item = |message: Vec<u8>, signature: Signature, key: [u8; 32]| Item {
        message,
        signature,
        key: PublicKey(key),
    };
    let non_canonical = non_canonical_encodings();
    match kind {
        Kind::Valid => item(message, honest, kp.name.0),
        Kind::WrongMessage => {
            let mut other = message.clone();
            other.push(1);
            item(other, honest, kp.name.0)
        }
        Kind::FlipR(bit) | Kind::FlipS(bit) => {
            let offset = if matches!(kind, Kind::FlipR(_)) {
                0
            } else {
                256
            };
            let bit = offset + bit as usize;
            let mut bytes = honest.to_bytes();
            bytes[bit / 8] ^= 1 << (bit % 8);
            item(message, Signature::from_bytes(&bytes), kp.name.0)
        }
        Kind::WrongKey => {
            let other = KeyPair::from_seed(100 + rng.gen_range(0..16));
            item(message, honest, other.name.0)
        }
        Kind::InvalidKeyEncoding => item(message, honest, invalid_point_encoding(rng)),
        Kind::ZeroSignature => item(message, Signature::default(), kp.name.0),
        Kind::SmallOrderKey { key, r, s } => item(
            message,
            raw_signature(small_order_bytes(r), small_scalar(s)),
            small_order_bytes(key),
        ),
        Kind::SmallOrderR(t) => {
            let signer = RawSigner::new(rng, EdwardsPoint::identity());
            let sig = signer.sign_with_nonce(Scalar::ZERO, small_order_point(t), &message);
            item(message, Signature::from_bytes(&sig), signer.key)
        }
        Kind::NonCanonicalS => {
            let bytes = honest.to_bytes();
            let mut s = [0u8; 32];
            s.copy_from_slice(&bytes[32..]);
            let r: [u8; 32] = bytes[..32].try_into().expect("32 bytes");
            item(message, raw_signature(r, add_l(&s)), kp.name.0)
        }
        Kind::NonCanonicalKey { key, r, s } => {
            let key = non_canonical[key % non_canonical.len()];
            let r = if r % 2 == 0 {
                non_canonical[r % non_canonical.len()]
            } else {
                small_order_bytes(r)
            };
            item(message, raw_signature(r, small_scalar(s)), key)
        }
        Kind::NonCanonicalR { r } => {
            // Under the identity key and s = 0 the equation reduces to [8]R = 0, which holds for
            // the non-canonical encodings of small-order points: only the encoding rules
            // reject these.
            let r = non_canonical[r % non_canonical.len()];
            item(message, raw_signature(r, [0; 32]), small_order_bytes(0))
        }
        Kind::MixedOrderKey(t) => {
            let signer = RawSigner::new(rng, small_order_point(t));
            let sig = signer.sign(rng, EdwardsPoint::identity(), &message);
            item(message, Signature::from_bytes(&sig), signer.key)
        }
        Kind::MixedOrderR(t) => {
            let signer = RawSigner::new(rng, EdwardsPoint::identity());
            let sig = signer.sign(rng, small_order_point(t), &message);
            item(message, Signature::from_bytes(&sig), signer.key)
        }
        Kind::MixedOrderBoth(a, r) => {
            let signer = RawSigner::new(rng, small_order_point(a));
            let sig = signer.sign(rng, small_order_point(r), &message);
            item(message, Signature::from_bytes(&sig), signer.key)
        }
        Kind::Garbage => {
            let mut sig = [0u8; 64];
            rng.fill(&mut sig[..]);
            item(message, Signature::from_bytes(&sig), rng.gen())
        }
    }
}

/// Verifiers are built once: a pool per proptest case would dominate the run time.
fn verifiers() -> &'static [ParallelVerifier] {
    static VERIFIERS: OnceLock<Vec<ParallelVerifier>> = OnceLock::new();
    VERIFIERS.get_or_init(|| {
        let mut all = Vec::new();
        for threads in [1, 2] {
            for min_chunk in [1, 3, 8, 64] {
                all.push(ParallelVerifier::with_min_chunk(threads, min_chunk).expect("pool"));
            }
        }
        all
    })
}

fn batch_ok(items: &[&Item]) -> bool {
    let messages: Vec<&[u8]> = items.iter().map(|it| it.message.as_slice()).collect();
    let signatures: Vec<Signature> = items.iter().map(|it| it.signature).collect();
    let keys: Vec<PublicKey> = items.iter().map(|it| it.key).collect();
    Signature::verify_batch(&messages, &signatures, &keys).is_ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn batch_and_parallel_agree_with_single(
        kinds in prop::collection::vec(kind_strategy(), 0..40),
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let items: Vec<Item> = kinds.iter().map(|&k| build(k, &mut rng)).collect();
        let expected: Vec<bool> = items.iter().map(single).collect();

        for (kind, &valid) in kinds.iter().zip(&expected) {
            if let Some(want) = kind.expected() {
                prop_assert_eq!(valid, want, "{:?}", kind);
            }
        }

        // Long-lived verifiers have adapted to this test's high invalid rate (small first batches
        // or single checks); fresh ones start with whole-chunk batches, then adapt once.
        for verifier in verifiers() {
            prop_assert_eq!(
                &verifier.verify(&items, view),
                &expected,
                "threads {} min_chunk {}",
                verifier.threads(),
                verifier.min_chunk()
            );
        }
        for threads in [1, 2] {
            for min_chunk in [1, 3, 8, 64] {
                let fresh = ParallelVerifier::with_min_chunk(threads, min_chunk).expect("pool");
                for call in 0..2 {
                    prop_assert_eq!(
                        &fresh.verify(&items, view),
                        &expected,
                        "fresh, call {} threads {} min_chunk {}",
                        call,
                        threads,
                        min_chunk
                    );
                }
            }
        }

        // Signature::verify_batch: the whole slice passes iff every item does; the valid items
        // pass together; each invalid item sinks a batch of the valid ones.
        let all: Vec<&Item> = items.iter().collect();
        prop_assert_eq!(batch_ok(&all), expected.iter().all(|&v| v));
        let valid: Vec<&Item> = items.iter().zip(&expected).filter(|(_, &v)| v).map(|(it, _)| it).collect();
        prop_assert!(batch_ok(&valid));
        for (item, _) in items.iter().zip(&expected).filter(|(_, &v)| !v) {
            let mut batch = valid.clone();
            batch.insert(rng.gen_range(0..=batch.len()), item);
            prop_assert!(!batch_ok(&batch));
            prop_assert!(!batch_ok(&[item]));
        }
    }
}

#[test]
fn small_order_vectors_are_the_torsion_group() {
    let points: Vec<EdwardsPoint> = (0..8).map(small_order_point).collect();
    for (i, p) in points.iter().enumerate() {
        assert_eq!(p.compress().to_bytes(), small_order_bytes(i), "canonical");
        assert!(p.mul_by_cofactor().is_identity(), "order divides 8");
        for q in &points[..i] {
            assert_ne!(p.compress(), q.compress(), "distinct");
        }
    }
    // Eight distinct points of order dividing 8: all of E[8]. The orders are 1, 2, 4, 4, 8 x 4.
    let order = |p: &EdwardsPoint| {
        let mut q = *p;
        let mut n = 1;
        while !q.is_identity() {
            q += p;
            n += 1;
        }
        n
    };
    let orders: Vec<u32> = points.iter().map(order).collect();
    assert_eq!(orders, vec![1, 2, 4, 4, 8, 8, 8, 8]);
}

#[test]
fn non_canonical_encodings_decompress_to_other_encodings() {
    let encodings = non_canonical_encodings();
    assert!(encodings.len() >= 4);
    for bytes in encodings {
        let point = CompressedEdwardsY(bytes)
            .decompress()
            .expect("chosen because it decompresses");
        assert_ne!(point.compress().to_bytes(), bytes);
    }
}

/// Every small-order key with every small-order R (canonical or not) and small s, over a few
/// messages, as one batch and item by item: the exhaustive version of the weak-key cases.
#[test]
fn all_small_order_combinations_agree() {
    let mut rs: Vec<[u8; 32]> = (0..8).map(small_order_bytes).collect();
    rs.extend(non_canonical_encodings());
    let keys = rs.clone();
    let mut items = Vec::new();
    for key in &keys {
        for r in &rs {
            for s in 0..3u8 {
                for m in 0..2u8 {
                    items.push(Item {
                        message: vec![m],
                        signature: raw_signature(*r, small_scalar(s)),
                        key: PublicKey(*key),
                    });
                }
            }
        }
    }
    let expected: Vec<bool> = items.iter().map(single).collect();
    assert!(expected.iter().all(|&v| !v));
    for verifier in verifiers() {
        assert_eq!(verifier.verify(&items, view), expected);
    }
    for item in &items {
        assert!(!batch_ok(&[item]));
    }
}

/// Mixed-order keys and R with every torsion point: all cofactored-valid, in one batch and
/// item by item, and together with honest signatures.
#[test]
fn all_mixed_order_combinations_agree() {
    let mut rng = StdRng::seed_from_u64(11);
    let mut items = Vec::new();
    for a in 0..8 {
        let signer = RawSigner::new(&mut rng, small_order_point(a));
        for r in 0..8 {
            for m in 0..4u8 {
                let message = vec![m; 3];
                let sig = signer.sign(&mut rng, small_order_point(r), &message);
                items.push(Item {
                    message,
                    signature: Signature::from_bytes(&sig),
                    key: PublicKey(signer.key),
                });
            }
        }
    }
    let expected: Vec<bool> = items.iter().map(single).collect();
    assert!(expected.iter().all(|&v| v));
    let all: Vec<&Item> = items.iter().collect();
    assert!(batch_ok(&all));
    for verifier in verifiers() {
        assert_eq!(verifier.verify(&items, view), expected);
    }
}
