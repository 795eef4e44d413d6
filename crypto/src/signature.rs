use crate::digest::Digest;
use crate::error::CryptoError;
use crate::keys::{PublicKey, SecretKey};
use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{IsIdentity, VartimeMultiscalarMul};
use ed25519_dalek::Signer;
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha512};
use std::iter::once;

/// An ed25519 signature. Serialized as its 64 raw bytes (two halves, since serde derives
/// only arrays up to 32).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signature {
    part1: [u8; 32],
    part2: [u8; 32],
}

impl std::fmt::Debug for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sig({})", hex::encode(&self.part1[..4]))
    }
}

impl Signature {
    /// Signs a consensus digest.
    pub fn new(digest: &Digest, secret: &SecretKey) -> Self {
        Self::sign_bytes(digest.as_ref(), secret)
    }

    /// Signs arbitrary bytes (a transaction's canonical encoding).
    pub fn sign_bytes(message: &[u8], secret: &SecretKey) -> Self {
        Self::from_bytes(&secret.0.sign(message).to_bytes())
    }

    pub fn from_bytes(bytes: &[u8; 64]) -> Self {
        let mut part1 = [0; 32];
        let mut part2 = [0; 32];
        part1.copy_from_slice(&bytes[..32]);
        part2.copy_from_slice(&bytes[32..]);
        Signature { part1, part2 }
    }

    pub fn to_bytes(&self) -> [u8; 64] {
        let mut bytes = [0; 64];
        bytes[..32].copy_from_slice(&self.part1);
        bytes[32..].copy_from_slice(&self.part2);
        bytes
    }

    /// Checks a signature over a protocol digest (a block, a vote, a timeout, a statement). Those
    /// are signed by committee members, a few keys that sign every round, so their decoded keys
    /// come from [`SIGNERS`] instead of being decompressed at every check.
    pub fn verify(&self, digest: &Digest, public_key: &PublicKey) -> Result<(), CryptoError> {
        let a = SIGNERS.decode(public_key)?;
        Prepared::with_key(digest.as_ref(), self, public_key, a)?.verify()
    }

    /// Checks one signature over `message` with the rules of [`Prepared`]: canonical encodings,
    /// no small-order key or R, s < L, and the cofactored equation. Batch verification decides
    /// every input exactly as this does, so the outcome never depends on how items are batched.
    pub fn verify_bytes(&self, message: &[u8], public_key: &PublicKey) -> Result<(), CryptoError> {
        Prepared::new(message, self, public_key)?.verify()
    }

    /// Checks many signatures over one digest (a QC's or TC's votes) in one batch.
    pub fn verify_batch_same_digest<'a, I>(digest: &Digest, votes: I) -> Result<(), CryptoError>
    where
        I: IntoIterator<Item = &'a (PublicKey, Signature)>,
    {
        let prepared = votes
            .into_iter()
            .map(|(key, signature)| {
                Prepared::with_key(digest.as_ref(), signature, key, SIGNERS.decode(key)?)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Prepared::verify_batch(&prepared)
    }

    /// Batch verification of independent (message, signature, key) triples. Fails if any one is
    /// invalid, without saying which: callers that need to know fall back to [`Self::verify_bytes`].
    pub fn verify_batch(
        messages: &[&[u8]],
        signatures: &[Signature],
        keys: &[PublicKey],
    ) -> Result<(), CryptoError> {
        if messages.len() != signatures.len() || messages.len() != keys.len() {
            return Err(CryptoError::BatchLengthMismatch {
                messages: messages.len(),
                signatures: signatures.len(),
                keys: keys.len(),
            });
        }
        let prepared = messages
            .iter()
            .zip(signatures)
            .zip(keys)
            .map(|((message, signature), key)| Prepared::new(message, signature, key))
            .collect::<Result<Vec<_>, _>>()?;
        Prepared::verify_batch(&prepared)
    }
}

/// One (message, signature, key) triple, decoded and hashed, ready for the verification
/// equation. Decoding is where the cheap rules are enforced, once, for single and batch checks
/// alike:
/// - A and R must be canonical encodings of points that are not of small order (rejects weak
///   keys that "sign" everything, and the encodings on which dalek's own single and batch
///   checks disagree);
/// - s must be canonical (s < L), so a signature has one encoding of s.
///
/// The equation is the cofactored one, [8]([s]B − [k]A − R) = 0 with k = SHA-512(R‖A‖M).
/// Cofactorless verification (dalek's `verify` and `verify_strict`) cannot be batched
/// consistently: a mixed-order A or R leaves a small-order error term that a random linear
/// combination cancels with probability up to 1/2, so whether such an item passes would depend
/// on its batch. Multiplying by the cofactor removes that term in both checks, which makes
/// single and batch verification agree on every input (up to the 2^-128 soundness error of the
/// batch's random weights). Honest signatures are valid under both rules.
pub struct Prepared {
    a: EdwardsPoint,
    r: EdwardsPoint,
    s: Scalar,
    k: Scalar,
}

impl Prepared {
    pub fn new(
        message: &[u8],
        signature: &Signature,
        key: &PublicKey,
    ) -> Result<Self, CryptoError> {
        Self::with_key(message, signature, key, decode_key(key)?)
    }

    /// As [`Self::new`] with the key already decoded by [`decode_key`] (or a cache of it).
    pub fn with_key(
        message: &[u8],
        signature: &Signature,
        key: &PublicKey,
        a: EdwardsPoint,
    ) -> Result<Self, CryptoError> {
        let r = decode_point(&signature.part1).ok_or(CryptoError::InvalidSignature)?;
        let s = Option::<Scalar>::from(Scalar::from_canonical_bytes(signature.part2))
            .ok_or(CryptoError::InvalidSignature)?;
        let mut hash = Sha512::new();
        hash.update(signature.part1);
        hash.update(key.0);
        hash.update(message);
        let k = Scalar::from_bytes_mod_order_wide(&hash.finalize().into());
        Ok(Prepared { a, r, s, k })
    }

    /// [`Self::check`] as the public checks answer it.
    fn verify(&self) -> Result<(), CryptoError> {
        self.check()
            .then_some(())
            .ok_or(CryptoError::InvalidSignature)
    }

    /// [`Self::check_batch`] as the public checks answer it.
    fn verify_batch(items: &[Prepared]) -> Result<(), CryptoError> {
        Self::check_batch(items)
            .then_some(())
            .ok_or(CryptoError::InvalidSignature)
    }

    /// The single check: [8]([s]B − [k]A − R) = 0.
    pub fn check(&self) -> bool {
        let sb_minus_ka =
            EdwardsPoint::vartime_double_scalar_mul_basepoint(&self.k, &-self.a, &self.s);
        (sb_minus_ka - self.r).mul_by_cofactor().is_identity()
    }

    /// The batch check: [8](Σ z_i·R_i + Σ z_i·k_i·A_i − (Σ z_i·s_i)·B) = 0 for independent random
    /// 128-bit weights z_i, in one multiscalar multiplication. Passes whenever every item passes
    /// [`Self::check`]; if one fails, passes only with probability about 2^-128 (the weights come
    /// from a CSPRNG, so an adversary cannot choose inputs against them).
    pub fn check_batch(items: &[Prepared]) -> bool {
        match items {
            [] => true,
            [one] => one.check(),
            _ => {
                let mut rng = rand::thread_rng();
                let weights: Vec<Scalar> = items
                    .iter()
                    .map(|_| Scalar::from(rng.gen::<u128>()))
                    .collect();
                let b_coefficient: Scalar = -items
                    .iter()
                    .zip(&weights)
                    .map(|(item, z)| z * item.s)
                    .sum::<Scalar>();
                let scalars = once(b_coefficient)
                    .chain(weights.iter().copied())
                    .chain(items.iter().zip(&weights).map(|(item, z)| z * item.k));
                let points = once(ED25519_BASEPOINT_POINT)
                    .chain(items.iter().map(|item| item.r))
                    .chain(items.iter().map(|item| item.a));
                EdwardsPoint::vartime_multiscalar_mul(scalars, points)
                    .mul_by_cofactor()
                    .is_identity()
            }
        }
    }
}

/// Decodes a public key for verification, with the same rules as `decode_point` (through the
/// key type's own decoder). Depends on the key bytes alone, so its result can be cached.
pub(crate) fn decode_key(key: &PublicKey) -> Result<EdwardsPoint, CryptoError> {
    key.verifying_key()
        .ok()
        .filter(|vk| is_canonical_y(&key.0) && !vk.is_weak())
        .map(|vk| vk.to_edwards())
        .ok_or(CryptoError::InvalidPublicKey)
}

/// The decoded keys of the members that sign protocol digests ([`Signature::verify`] and
/// [`Signature::verify_batch_same_digest`]). A committee's keys sign every round; at a few hundred
/// rounds a second, decompressing each at every check was a tenth of a `hotstuff` node's
/// signature work. A memo of a pure function of the key bytes, so sharing it across the process
/// (and across committees, in tests) changes no answer; [`KeyCache`]'s limit bounds it.
static SIGNERS: std::sync::LazyLock<KeyCache> =
    std::sync::LazyLock::new(|| KeyCache::new(SIGNER_CACHE_LIMIT));

/// Far above any committee (the report's largest is 48 members), so a real committee's keys
/// stay decoded; a flood of other keys only costs the clear and the decoding it would have
/// paid anyway.
const SIGNER_CACHE_LIMIT: usize = 4096;

/// Decoded public keys of recent signers. Decompressing a key costs about a quarter of a batched
/// verification, and a block's signers repeat (accounts send many transactions), so the
/// verifier decodes each key once. Only valid keys are kept; the map is cleared when it reaches
/// `limit` entries, which bounds memory without bookkeeping on the hot path.
pub struct KeyCache {
    keys: std::sync::RwLock<std::collections::HashMap<PublicKey, EdwardsPoint>>,
    limit: usize,
}

impl KeyCache {
    pub fn new(limit: usize) -> Self {
        KeyCache {
            keys: std::sync::RwLock::new(std::collections::HashMap::new()),
            limit,
        }
    }

    pub fn decode(&self, key: &PublicKey) -> Result<EdwardsPoint, CryptoError> {
        if let Some(point) = self
            .keys
            .read()
            .ok()
            .and_then(|keys| keys.get(key).copied())
        {
            return Ok(point);
        }
        let point = decode_key(key)?;
        if let Ok(mut keys) = self.keys.write() {
            if keys.len() >= self.limit {
                keys.clear();
            }
            keys.insert(*key, point);
        }
        Ok(point)
    }
}

/// Decodes a point for verification: `None` unless `bytes` is the canonical encoding of a point
/// that is not of small order. Decompression alone accepts y >= p and a sign bit on x = 0;
/// the first case is rejected here by a byte comparison, the second only occurs on the
/// small-order points (0, ±1), rejected after decompression.
fn decode_point(bytes: &[u8; 32]) -> Option<EdwardsPoint> {
    if !is_canonical_y(bytes) {
        return None;
    }
    let point = CompressedEdwardsY(*bytes).decompress()?;
    (!point.is_small_order()).then_some(point)
}

/// Whether the low 255 bits (little-endian y) are below p = 2^255 − 19. The values p..2^255−1
/// are exactly: first byte >= 0xed, thirty bytes 0xff, last byte 0x7f ignoring the sign bit.
fn is_canonical_y(bytes: &[u8; 32]) -> bool {
    !(bytes[0] >= 0xed && bytes[1..31].iter().all(|&b| b == 0xff) && bytes[31] & 0x7f == 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_cache_decodes_like_decode_key_and_stays_bounded() {
        let cache = KeyCache::new(3);
        let keys: Vec<PublicKey> = (0..5)
            .map(|i| crate::keys::KeyPair::from_seed(i).name)
            .collect();
        for key in keys.iter().chain(keys.iter()) {
            assert_eq!(cache.decode(key), decode_key(key));
        }
        assert!(cache.keys.read().expect("lock").len() <= 3);
        // Invalid keys are rejected every time and never cached.
        let identity = {
            let mut bytes = [0u8; 32];
            bytes[0] = 1;
            PublicKey(bytes)
        };
        assert_eq!(cache.decode(&identity), Err(CryptoError::InvalidPublicKey));
        assert!(!cache.keys.read().expect("lock").contains_key(&identity));
    }
    use crate::keys::KeyPair;

    #[test]
    fn digest_checks_keep_the_signers_keys_decoded_and_answer_as_verify_bytes() {
        let kp = KeyPair::from_seed(31);
        let digest = Digest::of(b"round");
        let good = Signature::new(&digest, &kp.secret);
        let bad = Signature::new(&Digest::of(b"other"), &kp.secret);
        for sig in [good, bad] {
            assert_eq!(
                sig.verify(&digest, &kp.name),
                sig.verify_bytes(digest.as_ref(), &kp.name)
            );
        }
        assert!(SIGNERS.keys.read().expect("lock").contains_key(&kp.name));
        let batch = [(kp.name, good), (KeyPair::from_seed(32).name, good)];
        assert_eq!(
            Signature::verify_batch_same_digest(&digest, &batch[..1]),
            Ok(())
        );
        assert_eq!(
            Signature::verify_batch_same_digest(&digest, &batch),
            Err(CryptoError::InvalidSignature)
        );
        // An invalid key is refused as before and never kept.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let identity = PublicKey(identity);
        assert_eq!(
            good.verify(&digest, &identity),
            Err(CryptoError::InvalidPublicKey)
        );
        assert!(!SIGNERS.keys.read().expect("lock").contains_key(&identity));
    }

    #[test]
    fn sign_and_verify_digest() {
        let kp = KeyPair::from_seed(1);
        let other = KeyPair::from_seed(2);
        let digest = Digest::of(b"hello");
        let sig = Signature::new(&digest, &kp.secret);
        assert!(sig.verify(&digest, &kp.name).is_ok());
        assert_eq!(
            sig.verify(&digest, &other.name),
            Err(CryptoError::InvalidSignature)
        );
        assert_eq!(
            sig.verify(&Digest::of(b"other"), &kp.name),
            Err(CryptoError::InvalidSignature)
        );
    }

    #[test]
    fn batch_same_digest_rejects_one_bad_vote() {
        let digest = Digest::of(b"block");
        let mut votes: Vec<_> = (0..4)
            .map(|i| {
                let kp = KeyPair::from_seed(i);
                (kp.name, Signature::new(&digest, &kp.secret))
            })
            .collect();
        assert!(Signature::verify_batch_same_digest(&digest, &votes).is_ok());
        votes[2].1 = Signature::new(&Digest::of(b"x"), &KeyPair::from_seed(2).secret);
        assert!(Signature::verify_batch_same_digest(&digest, &votes).is_err());
    }

    #[test]
    fn batch_verification_matches_single_verification() {
        let items: Vec<(Vec<u8>, Signature, PublicKey)> = (0..20)
            .map(|i| {
                let kp = KeyPair::from_seed(i);
                let message = vec![i as u8; 10];
                (
                    message.clone(),
                    Signature::sign_bytes(&message, &kp.secret),
                    kp.name,
                )
            })
            .collect();
        let messages: Vec<&[u8]> = items.iter().map(|(m, _, _)| m.as_slice()).collect();
        let mut sigs: Vec<Signature> = items.iter().map(|(_, s, _)| *s).collect();
        let keys: Vec<PublicKey> = items.iter().map(|(_, _, k)| *k).collect();
        assert!(Signature::verify_batch(&messages, &sigs, &keys).is_ok());
        assert!(Signature::verify_batch(&[], &[], &[]).is_ok());
        sigs[13] = sigs[12];
        assert!(sigs[13].verify_bytes(messages[13], &keys[13]).is_err());
        assert_eq!(
            Signature::verify_batch(&messages, &sigs, &keys),
            Err(CryptoError::InvalidSignature)
        );
        assert!(matches!(
            Signature::verify_batch(&messages[1..], &sigs, &keys),
            Err(CryptoError::BatchLengthMismatch { .. })
        ));
    }

    #[test]
    fn non_canonical_s_is_rejected() {
        let kp = KeyPair::from_seed(4);
        let mut bytes = Signature::sign_bytes(b"m", &kp.secret).to_bytes();
        // s + L: same scalar mod L, different encoding (s < L < 2^253, so it fits).
        let l: [u8; 32] = [
            0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9,
            0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ];
        let mut carry = 0u16;
        for (byte, l) in bytes[32..].iter_mut().zip(l) {
            let sum = *byte as u16 + l as u16 + carry;
            *byte = sum as u8;
            carry = sum >> 8;
        }
        let sig = Signature::from_bytes(&bytes);
        assert_eq!(
            sig.verify_bytes(b"m", &kp.name),
            Err(CryptoError::InvalidSignature)
        );
    }

    #[test]
    fn identity_key_does_not_sign_everything() {
        // dalek's plain `verify` accepts (R, s) = (identity, 0) under the identity key for any
        // message; the small-order key check rejects it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let mut sig = [0u8; 64];
        sig[0] = 1;
        let sig = Signature::from_bytes(&sig);
        assert_eq!(
            sig.verify_bytes(b"anything", &PublicKey(identity)),
            Err(CryptoError::InvalidPublicKey)
        );
    }

    #[test]
    fn canonical_y_check_matches_a_decompression_round_trip() {
        use rand::{rngs::StdRng, RngCore, SeedableRng};
        let mut rng = StdRng::seed_from_u64(5);
        let mut cases: Vec<[u8; 32]> = (0..2000)
            .map(|_| {
                let mut b = [0u8; 32];
                rng.fill_bytes(&mut b);
                b
            })
            .collect();
        // Every y in p - 3 ..= 2^255 - 1, with both sign bits, plus (0, ±1) with a sign bit.
        for low in 0xea..=0xffu8 {
            for top in [0x7f, 0xff] {
                let mut b = [0xffu8; 32];
                b[0] = low;
                b[31] = top;
                cases.push(b);
            }
        }
        let mut one = [0u8; 32];
        one[0] = 1;
        cases.push(one);
        one[31] = 0x80;
        cases.push(one);
        for bytes in cases {
            let expected = CompressedEdwardsY(bytes)
                .decompress()
                .filter(|p| p.compress().to_bytes() == bytes && !p.is_small_order());
            assert_eq!(
                decode_point(&bytes).map(|p| p.compress()),
                expected.map(|p| p.compress()),
                "{}",
                hex::encode(bytes)
            );
        }
    }

    #[test]
    fn signature_bincode_is_64_bytes() {
        let kp = KeyPair::from_seed(3);
        let sig = Signature::sign_bytes(b"tx", &kp.secret);
        let bytes = bincode::serialize(&sig).expect("serialize");
        assert_eq!(bytes.len(), 64);
        let back: Signature = bincode::deserialize(&bytes).expect("deserialize");
        assert_eq!(back, sig);
    }
}
