use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::fmt;

pub const DIGEST_LEN: usize = 32;

/// A 32-byte digest: SHA-256 of a protocol message (a block, a vote, a timeout), BLAKE3-256 of a
/// batch ([`Digest::of_batch`]). Batches are hashed once per node, when sealed or received.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Digest(pub [u8; DIGEST_LEN]);

impl Digest {
    /// Hashes the concatenation of `parts`, without copying them into one buffer first.
    pub fn of_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update(part);
        }
        Digest(hasher.finalize().into())
    }

    pub fn of(bytes: &[u8]) -> Self {
        Self::of_parts([bytes])
    }

    /// A batch's digest: BLAKE3-256 of its bytes. Batches are the bulk of what a node hashes
    /// (every batch once per node, hundreds of kilobytes each); there BLAKE3 runs several
    /// times faster than SHA-256 even with the CPU's SHA extensions (`cargo bench -p crypto
    /// --bench digest`), while on the few hundred bytes of a block or a vote SHA-256 is the
    /// faster, so those stay SHA-256 ([`Digest::of`]).
    pub fn of_batch(bytes: &[u8]) -> Self {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.0.to_vec()
    }

    pub fn as_bytes(&self) -> &[u8; DIGEST_LEN] {
        &self.0
    }
}

impl AsRef<[u8]> for Digest {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", hex::encode(self.0))
    }
}

/// Short form for logs: the first 8 bytes in hex.
impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", hex::encode(&self.0[..8]))
    }
}

/// Anything that has a canonical digest (blocks, votes, timeouts, transactions).
pub trait Hash {
    fn digest(&self) -> Digest;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_hash_like_the_whole() {
        assert_eq!(
            Digest::of_parts([&b"ab"[..], &b"cd"[..]]),
            Digest::of(b"abcd")
        );
        assert_ne!(Digest::of(b"abcd"), Digest::of(b"abce"));
    }
}
