use crate::error::CryptoError;
use ed25519_dalek::{SigningKey, VerifyingKey};
use rand::rngs::{OsRng, StdRng};
use rand::{CryptoRng, RngCore, SeedableRng};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The compressed ed25519 public key. It is also a node's name in the committee and, hashed, an
/// account's address. Kept as bytes: decompression happens only when a signature is checked.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(s: &str) -> Result<Self, CryptoError> {
        let bytes = hex::decode(s).map_err(|e| CryptoError::Hex(e.to_string()))?;
        let array: [u8; 32] = bytes
            .try_into()
            .map_err(|_| CryptoError::InvalidPublicKey)?;
        Ok(PublicKey(array))
    }

    pub(crate) fn verifying_key(&self) -> Result<VerifyingKey, CryptoError> {
        VerifyingKey::from_bytes(&self.0).map_err(|_| CryptoError::InvalidPublicKey)
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_hex())
    }
}

/// Short form for logs: the first 8 hex digits.
impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", &self.to_hex()[..8])
    }
}

// Human-readable formats (JSON config files) get hex; bincode gets the raw 32 bytes.
impl Serialize for PublicKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.serialize_str(&self.to_hex())
        } else {
            self.0.serialize(serializer)
        }
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let s = String::deserialize(deserializer)?;
            PublicKey::from_hex(&s).map_err(de::Error::custom)
        } else {
            Ok(PublicKey(<[u8; 32]>::deserialize(deserializer)?))
        }
    }
}

/// An ed25519 secret key (the 32-byte seed).
#[derive(Clone)]
pub struct SecretKey(pub(crate) SigningKey);

impl SecretKey {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0.to_bytes())
    }

    pub fn from_hex(s: &str) -> Result<Self, CryptoError> {
        let bytes = hex::decode(s).map_err(|e| CryptoError::Hex(e.to_string()))?;
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| CryptoError::InvalidSecretKey)?;
        Ok(SecretKey(SigningKey::from_bytes(&seed)))
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key().to_bytes())
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey(..)")
    }
}

impl Serialize for SecretKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for SecretKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        SecretKey::from_hex(&s).map_err(de::Error::custom)
    }
}

/// A key file: `{"name": <public key hex>, "secret": <secret key hex>}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyPair {
    pub name: PublicKey,
    pub secret: SecretKey,
}

impl KeyPair {
    pub fn generate<R: RngCore + CryptoRng>(rng: &mut R) -> Self {
        let (name, secret) = generate_keypair(rng);
        KeyPair { name, secret }
    }

    /// Deterministic keys for tests and for benchmark accounts derived from a seed.
    pub fn from_seed(seed: u64) -> Self {
        Self::generate(&mut StdRng::seed_from_u64(seed))
    }
}

pub fn generate_keypair<R: RngCore + CryptoRng>(rng: &mut R) -> (PublicKey, SecretKey) {
    let signing = SigningKey::generate(rng);
    (
        PublicKey(signing.verifying_key().to_bytes()),
        SecretKey(signing),
    )
}

pub fn generate_production_keypair() -> (PublicKey, SecretKey) {
    generate_keypair(&mut OsRng)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_json_and_bincode() {
        let kp = KeyPair::from_seed(7);
        let json = serde_json::to_string(&kp).expect("json");
        assert!(json.contains(&kp.name.to_hex()));
        let parsed: KeyPair = serde_json::from_str(&json).expect("parse");
        assert_eq!(parsed.name, kp.name);
        assert_eq!(parsed.secret.public(), kp.name);
        let bytes = bincode::serialize(&kp.name).expect("serialize");
        assert_eq!(bytes.len(), 32);
        let back: PublicKey = bincode::deserialize(&bytes).expect("deserialize");
        assert_eq!(back, kp.name);
        assert_eq!(kp.secret.public(), kp.name);
        let secret = SecretKey::from_hex(&kp.secret.to_hex()).expect("hex");
        assert_eq!(secret.public(), kp.name);
    }

    #[test]
    fn bad_hex_is_an_error() {
        assert!(PublicKey::from_hex("zz").is_err());
        assert!(PublicKey::from_hex("abcd").is_err());
        assert!(SecretKey::from_hex("00").is_err());
    }
}
