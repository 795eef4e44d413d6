//! The load of the `hotstuff` mode: opaque transactions (format in `executor::opaque`) with ids
//! unique across clients.

use crate::load::{NextTx, TxSource};
use executor::opaque_transaction;

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
        Some(NextTx {
            bytes: opaque_transaction(self.size, id, sample),
            sample_id: sample.then(|| id.to_string()),
            invalid: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use executor::opaque_sample_id;

    #[test]
    fn samples_carry_their_client_unique_id() {
        let mut source = OpaqueSource::new(200, 3);
        let sample = source.next(true).expect("endless");
        assert_eq!(sample.bytes.len(), 200);
        let id = opaque_sample_id(&sample.bytes).expect("a sample");
        assert_eq!(sample.sample_id, Some(id.to_string()));
        assert_eq!(id >> 40, 3);
        let standard = source.next(false).expect("endless");
        assert_eq!(opaque_sample_id(&standard.bytes), None);
        assert_eq!(standard.sample_id, None);
        assert_ne!(standard.bytes, sample.bytes);
    }
}
