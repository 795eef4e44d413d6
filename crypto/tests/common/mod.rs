//! Adversarial ed25519 inputs shared by the integration tests: the eight small-order points,
//! non-canonical encodings, and signatures made with a chosen nonce point so that R or A can
//! carry a torsion component on purpose.
#![allow(dead_code)] // each test binary uses a different subset

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use rand::{Rng, RngCore};
use sha2::{Digest as _, Sha512};

/// Canonical encodings of the eight points of order dividing 8 (the torsion subgroup), as listed
/// in "Taming the many EdDSAs" and libsodium's blocklist. `small_order_vectors_are_the_torsion_group`
/// in batch_agrees.rs re-derives them, so a typo here fails a test rather than weakening one.
pub const SMALL_ORDER_HEX: [&str; 8] = [
    // order 1: (0, 1), the identity
    "0100000000000000000000000000000000000000000000000000000000000000",
    // order 2: (0, -1)
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    // order 4: (±sqrt(-1), 0)
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    // order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
];

/// The group order L = 2^252 + 27742317777372353535851937790883648493, little-endian.
pub const L_BYTES: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

pub fn small_order_bytes(i: usize) -> [u8; 32] {
    let mut out = [0u8; 32];
    hex::decode_to_slice(SMALL_ORDER_HEX[i % 8], &mut out).expect("test vector is valid hex");
    out
}

pub fn small_order_point(i: usize) -> EdwardsPoint {
    CompressedEdwardsY(small_order_bytes(i))
        .decompress()
        .expect("small-order test vector decompresses")
}

/// Encodings whose y coordinate is >= p (y = p + j, j < 19) or that carry a sign bit on x = 0,
/// and that still decompress: every non-canonical encoding dalek's decompression accepts.
pub fn non_canonical_encodings() -> Vec<[u8; 32]> {
    let mut out = Vec::new();
    for j in 0u8..19 {
        for sign in [0u8, 0x80] {
            // p + j = 2^255 - 19 + j: low byte 0xed + j, then 0xff..., top byte 0x7f.
            let mut bytes = [0xffu8; 32];
            bytes[0] = 0xed + j;
            bytes[31] = 0x7f | sign;
            if CompressedEdwardsY(bytes).decompress().is_some() {
                out.push(bytes);
            }
        }
    }
    // x = 0 with the sign bit set: "negative zero" forms of the points (0, 1) and (0, -1).
    for i in [0, 1] {
        let mut bytes = small_order_bytes(i);
        bytes[31] |= 0x80;
        out.push(bytes);
    }
    out
}

pub fn random_scalar(rng: &mut impl RngCore) -> Scalar {
    let mut wide = [0u8; 64];
    rng.fill_bytes(&mut wide);
    Scalar::from_bytes_mod_order_wide(&wide)
}

/// A 32-byte string that does not decompress to a curve point.
pub fn invalid_point_encoding(rng: &mut impl RngCore) -> [u8; 32] {
    loop {
        let bytes: [u8; 32] = rng.gen();
        if CompressedEdwardsY(bytes).decompress().is_none() {
            return bytes;
        }
    }
}

/// The ed25519 challenge k = SHA-512(R || A || M) mod L.
pub fn challenge(r: &[u8; 32], a: &[u8; 32], message: &[u8]) -> Scalar {
    let mut h = Sha512::new();
    h.update(r);
    h.update(a);
    h.update(message);
    Scalar::from_bytes_mod_order_wide(&h.finalize().into())
}

/// A signer that knows the discrete log `a` of the prime-order part of its key and publishes
/// `key` = aB + torsion. With torsion = identity it signs exactly like ed25519.
pub struct RawSigner {
    pub a: Scalar,
    pub key: [u8; 32],
}

impl RawSigner {
    pub fn new(rng: &mut impl RngCore, torsion: EdwardsPoint) -> Self {
        let a = random_scalar(rng);
        let key = (EdwardsPoint::mul_base(&a) + torsion).compress().to_bytes();
        RawSigner { a, key }
    }

    /// Signs with nonce point R = rB + torsion_r: s = r + k·a. The cofactorless equation
    /// [s]B = R + [k]A then misses by exactly torsion_r + k·(torsion of A), a small-order point.
    pub fn sign(
        &self,
        rng: &mut impl RngCore,
        torsion_r: EdwardsPoint,
        message: &[u8],
    ) -> [u8; 64] {
        self.sign_with_nonce(random_scalar(rng), torsion_r, message)
    }

    /// As [`Self::sign`] with the nonce r chosen by the caller (r = 0 makes R = torsion_r).
    pub fn sign_with_nonce(&self, r: Scalar, torsion_r: EdwardsPoint, message: &[u8]) -> [u8; 64] {
        let big_r = (EdwardsPoint::mul_base(&r) + torsion_r)
            .compress()
            .to_bytes();
        let k = challenge(&big_r, &self.key, message);
        let s = r + k * self.a;
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(&big_r);
        sig[32..].copy_from_slice(s.as_bytes());
        sig
    }
}

/// Adds L to the little-endian scalar `s` (s < L, so s + L < 2^254 fits): the same value mod L,
/// encoded non-canonically.
pub fn add_l(s: &[u8; 32]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut carry = 0u16;
    for i in 0..32 {
        let sum = s[i] as u16 + L_BYTES[i] as u16 + carry;
        out[i] = sum as u8;
        carry = sum >> 8;
    }
    out
}
