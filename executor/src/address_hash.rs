//! A cheap hasher for maps keyed by account address.
//!
//! Addresses are SHA-256 output, so their bytes are already uniformly spread and SipHash adds
//! nothing but cost (it showed up at several percent of a Move transfer and dominated a native
//! one). SipHash's other job, resisting crafted collisions, is not needed here either: every map
//! using this hasher holds only genesis accounts (transactions cannot create accounts), so an
//! attacker cannot insert keys, and grinding public keys to hit a bucket buys nothing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Folds the written bytes into a `u64`; for a 16-byte address that is two multiply-xor steps.
#[derive(Default, Clone, Copy)]
pub struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        for &byte in chunks.remainder() {
            self.mix(byte as u64);
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl AddressHasher {
    /// One round of a multiplicative mix: enough to spread a length prefix and carry the bits
    /// of earlier words into the high bits hashbrown uses for its control bytes.
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

pub type AddressMap<K, V> = HashMap<K, V, BuildHasherDefault<AddressHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(value: &T) -> u64 {
        BuildHasherDefault::<AddressHasher>::default().hash_one(value)
    }

    #[test]
    fn distinct_addresses_hash_apart() {
        let a = [1u8; 16];
        let mut b = a;
        b[15] = 2;
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a), hash(&[1u8; 16]));
        let mut map: AddressMap<[u8; 16], u32> = AddressMap::default();
        map.insert(a, 1);
        map.insert(b, 2);
        assert_eq!(map.get(&a), Some(&1));
        assert_eq!(map.get(&b), Some(&2));
    }
}
