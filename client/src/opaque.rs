//! Transactions of the `hotstuff` mode: opaque bytes of a chosen size. A sample starts with 0
//! followed by its big-endian u64 id; every other transaction starts with 1 followed by a
//! counter, so no two transactions are equal.

use crate::load::{NextTx, TxSource};
use bytes::{BufMut, Bytes, BytesMut};

pub const MIN_SIZE: usize = 9;
const SAMPLE: u8 = 0;
const STANDARD: u8 = 1;

pub struct OpaqueSource {
    size: usize,
    /// Ids are unique across clients: the client index sits in the top bits.
    id_base: u64,
    counter: u64,
}

impl OpaqueSource {
    pub fn new(size: usize, client_index: u64) -> Self {
        OpaqueSource {
            size,
            id_base: client_index << 40,
            counter: 0,
        }
    }
}

impl TxSource for OpaqueSource {
    fn next(&mut self, sample: bool) -> Option<NextTx> {
        self.counter += 1;
        let id = self.id_base | self.counter;
        let mut tx = BytesMut::with_capacity(self.size);
        tx.put_u8(if sample { SAMPLE } else { STANDARD });
        tx.put_u64(id);
        tx.resize(self.size, 0);
        Some(NextTx {
            bytes: Bytes::from(tx),
            sample_id: sample.then(|| id.to_string()),
            invalid: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_carry_their_id() {
        let mut source = OpaqueSource::new(200, 3);
        let sample = source.next(true).expect("endless");
        assert_eq!(sample.bytes.len(), 200);
        assert_eq!(sample.bytes[0], SAMPLE);
        let id = u64::from_be_bytes(sample.bytes[1..9].try_into().expect("8 bytes"));
        assert_eq!(sample.sample_id, Some(id.to_string()));
        assert_eq!(id >> 40, 3);
        let standard = source.next(false).expect("endless");
        assert_eq!(standard.bytes[0], STANDARD);
        assert_eq!(standard.sample_id, None);
        assert_ne!(standard.bytes, sample.bytes);
    }
}
