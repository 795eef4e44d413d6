//! The hash every choice of a twins run is made of (a lie, a message's fate on the network): a
//! hash of the seed and of what it is about, never a draw from a stream, so a seed replays to the
//! same run.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// What a lie is about, hashed with the seed into a choice.
pub fn hash(parts: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}
