//! Deserializing sequences without trusting the length the input announces.
//!
//! bincode reads a sequence's length from the input and reports it to serde as the size hint,
//! and serde's `Vec` preallocates up to 1 MiB from that hint. So a message of a few dozen bytes
//! that claims 2^60 digests made the node allocate a megabyte before finding out the digests are
//! not there. [`vec`] ignores all but a small part of the hint and grows the vector as elements
//! actually arrive, so memory stays proportional to the bytes received.

use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// The most a hint may make [`vec`] preallocate, in bytes.
pub const MAX_PREALLOCATION: usize = 1024;

/// `#[serde(deserialize_with = "plumbing::bounded::vec")]` for `Vec` fields decoded from the network.
pub fn vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_seq(VecVisitor(PhantomData))
}

struct VecVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for VecVisitor<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let most = MAX_PREALLOCATION / std::mem::size_of::<T>().max(1);
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(most));
        while let Some(element) = seq.next_element()? {
            out.push(element);
        }
        Ok(out)
    }
}
