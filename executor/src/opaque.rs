//! Transactions of the `hotstuff` mode: opaque bytes of a chosen size, never decoded by
//! consensus. The first byte says whether the transaction is a latency sample (0) or not (1);
//! the next 8 are a big-endian id, so no two transactions are equal and a sample can be
//! followed from client to commit. Clients write this format, nodes read it back.

use bytes::{BufMut, Bytes, BytesMut};

/// Tag byte plus id.
pub const OPAQUE_MIN_SIZE: usize = 9;
const SAMPLE: u8 = 0;
const STANDARD: u8 = 1;

/// An opaque transaction of `size` bytes (at least [`OPAQUE_MIN_SIZE`]) carrying `id`.
pub fn opaque_transaction(size: usize, id: u64, sample: bool) -> Bytes {
    let mut tx = BytesMut::with_capacity(size.max(OPAQUE_MIN_SIZE));
    tx.put_u8(if sample { SAMPLE } else { STANDARD });
    tx.put_u64(id);
    tx.resize(size.max(OPAQUE_MIN_SIZE), 0);
    tx.freeze()
}

/// The id of an opaque transaction if it is a sample.
pub fn opaque_sample_id(tx: &[u8]) -> Option<u64> {
    if tx.first() != Some(&SAMPLE) {
        return None;
    }
    let bytes: [u8; 8] = tx.get(1..OPAQUE_MIN_SIZE)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_and_others_are_not_samples() {
        let sample = opaque_transaction(200, 42, true);
        assert_eq!(sample.len(), 200);
        assert_eq!(opaque_sample_id(&sample), Some(42));
        let standard = opaque_transaction(200, 43, false);
        assert_eq!(opaque_sample_id(&standard), None);
        assert_ne!(opaque_transaction(200, 44, false), standard);
        assert_eq!(opaque_sample_id(&[SAMPLE, 1, 2]), None);
        assert_eq!(opaque_sample_id(&[]), None);
    }
}
