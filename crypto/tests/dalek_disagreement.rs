//! What ed25519-dalek 2.2 itself does on adversarial input, kept as executable evidence for why
//! `crypto` does not use `VerifyingKey::verify{,_strict}` + `ed25519_dalek::verify_batch`:
//! dalek's single checks are cofactorless ([s]B − [k]A must encode to exactly R), its batch check
//! is a random linear combination without the cofactor, so a small-order error term is
//! cancelled whenever the (deterministic, transcript-derived) weight kills it. Filtering weak
//! keys and small-order R (what `verify_strict` adds) is not enough: mixed-order points pass those
//! filters. The last test checks that `crypto`'s own single and batch checks agree on the very
//! inputs where dalek's disagree.

mod common;

use common::*;
use crypto::{PublicKey, Signature};
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::traits::Identity;
use ed25519_dalek::{Signature as DalekSignature, Verifier, VerifyingKey};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn dalek_single(message: &[u8], sig: &[u8; 64], key: &[u8; 32]) -> bool {
    VerifyingKey::from_bytes(key)
        .map(|k| k.verify(message, &DalekSignature::from_bytes(sig)).is_ok())
        .unwrap_or(false)
}

fn dalek_strict(message: &[u8], sig: &[u8; 64], key: &[u8; 32]) -> bool {
    VerifyingKey::from_bytes(key)
        .map(|k| {
            k.verify_strict(message, &DalekSignature::from_bytes(sig))
                .is_ok()
        })
        .unwrap_or(false)
}

fn dalek_batch_of_one(message: &[u8], sig: &[u8; 64], key: &[u8; 32]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(key) else {
        return false;
    };
    ed25519_dalek::verify_batch(&[message], &[DalekSignature::from_bytes(sig)], &[key]).is_ok()
}

/// A signature with (R, s) = (small-order point `r_index`, 0) under public key `key`.
fn torsion_signature(r: [u8; 32]) -> [u8; 64] {
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&r);
    sig
}

/// Identity key, R = the order-2 point, s = 0: the error term is the order-2 point, so the
/// single check always rejects while the batch accepts whenever its weight is even.
#[test]
fn dalek_batch_accepts_small_order_error_that_single_rejects() {
    let key = small_order_bytes(0);
    let sig = torsion_signature(small_order_bytes(1));
    let found = (0..64u32).map(|i| i.to_le_bytes()).find(|message| {
        !dalek_single(message, &sig, &key) && dalek_batch_of_one(message, &sig, &key)
    });
    assert!(
        found.is_some(),
        "expected dalek 2.2 batch/single disagreement"
    );
}

/// Identity key, R = a non-canonical encoding of the identity, s = 0: the batch decompresses R
/// and accepts every time; the single check compares encodings and rejects every time.
#[test]
fn dalek_batch_accepts_non_canonical_r_that_single_rejects() {
    let key = small_order_bytes(0);
    let mut r = [0xffu8; 32];
    r[0] = 0xee; // y = p + 1
    r[31] = 0x7f;
    let sig = torsion_signature(r);
    assert!(!dalek_single(b"m", &sig, &key));
    assert!(dalek_batch_of_one(b"m", &sig, &key));
}

/// The weak identity key "signs" every message under dalek's plain `verify`.
#[test]
fn dalek_verify_accepts_the_identity_key_for_any_message() {
    let key = small_order_bytes(0);
    let sig = torsion_signature(small_order_bytes(0));
    assert!(dalek_single(b"anything", &sig, &key));
    assert!(dalek_single(b"anything else", &sig, &key));
    assert!(!dalek_strict(b"anything", &sig, &key));
}

/// Mixed-order key aB + T8: not weak, R = rB not small order, so `verify_strict` and the
/// `is_weak` / small-order-R filters let it through; still batch and strict single disagree.
#[test]
fn dalek_batch_and_verify_strict_disagree_on_mixed_order_key() {
    let mut rng = StdRng::seed_from_u64(1);
    let signer = RawSigner::new(&mut rng, small_order_point(4));
    let vk = VerifyingKey::from_bytes(&signer.key).expect("mixed-order key decompresses");
    assert!(!vk.is_weak());
    let found = (0..256u32).map(|i| i.to_le_bytes()).find(|message| {
        let sig = signer.sign(&mut rng, EdwardsPoint::identity(), message);
        !dalek_strict(message, &sig, &signer.key) && dalek_batch_of_one(message, &sig, &signer.key)
    });
    assert!(
        found.is_some(),
        "expected dalek 2.2 batch/strict disagreement"
    );
}

/// Honest key, R = rB + T2 (mixed order, not small order): strict single rejects every time,
/// the batch accepts whenever its weight is even.
#[test]
fn dalek_batch_and_verify_strict_disagree_on_mixed_order_r() {
    let mut rng = StdRng::seed_from_u64(2);
    let signer = RawSigner::new(&mut rng, EdwardsPoint::identity());
    let found = (0..64u32).map(|i| i.to_le_bytes()).find(|message| {
        let sig = signer.sign(&mut rng, small_order_point(1), message);
        !dalek_strict(message, &sig, &signer.key) && dalek_batch_of_one(message, &sig, &signer.key)
    });
    assert!(
        found.is_some(),
        "expected dalek 2.2 batch/strict disagreement"
    );
}

/// crypto's checks give one answer per input on all the cases above, whatever the batch.
#[test]
fn crypto_single_and_batch_agree_where_dalek_does_not() {
    let mut rng = StdRng::seed_from_u64(3);
    let honest = RawSigner::new(&mut rng, EdwardsPoint::identity());
    let mixed = RawSigner::new(&mut rng, small_order_point(4));
    let mut non_canonical_identity = [0xffu8; 32];
    non_canonical_identity[0] = 0xee;
    non_canonical_identity[31] = 0x7f;
    let mut cases: Vec<(Vec<u8>, [u8; 64], [u8; 32])> = Vec::new();
    for i in 0..64u32 {
        let m = i.to_le_bytes().to_vec();
        cases.push((
            m.clone(),
            torsion_signature(small_order_bytes(1)),
            small_order_bytes(0),
        ));
        cases.push((
            m.clone(),
            torsion_signature(non_canonical_identity),
            small_order_bytes(0),
        ));
        cases.push((
            m.clone(),
            torsion_signature(small_order_bytes(0)),
            small_order_bytes(0),
        ));
        let sig = mixed.sign(&mut rng, EdwardsPoint::identity(), &m);
        cases.push((m.clone(), sig, mixed.key));
        let sig = honest.sign(&mut rng, small_order_point(1), &m);
        cases.push((m, sig, honest.key));
    }
    for (message, sig, key) in &cases {
        let sig = Signature::from_bytes(sig);
        let key = PublicKey(*key);
        let single = sig.verify_bytes(message, &key).is_ok();
        let batch = Signature::verify_batch(&[message], &[sig], &[key]).is_ok();
        assert_eq!(single, batch, "message {message:?}");
    }
}
