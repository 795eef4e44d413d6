//! The ingress check of a node whose transactions are signed: the mempool checks its clients'
//! transactions before it seals them (see `mempool::Ingress`), on the node's verifier pool with
//! a history of invalid items of its own, and the verifier stage takes the batches this node
//! sealed so as checked.

use crypto::{Digest, ParallelVerifier};
use mempool::{CheckedBatches, Ingress};
use stages::verifier::{check_transactions, KnownBatches};
use std::sync::Arc;

/// The mempool's check of client transactions, on `verifier`'s threads and decoded keys. Its
/// own history of invalid items: a node's clients may forge many, while the batches its peers
/// seal from checked transactions hold none, and a shared history would size the groups of one
/// for the other's forgeries (see `ParallelVerifier::sharing_threads`).
pub fn ingress(verifier: &ParallelVerifier) -> Ingress {
    let verifier = Arc::new(verifier.sharing_threads());
    Ingress {
        // Decoding on the pool too: all of the check is the verifier's CPU in the stage table.
        check: Arc::new(move |txs: &[&[u8]]| {
            verifier
                .install(|| check_transactions(&verifier, txs.iter().copied(), txs.len()).invalid())
        }),
        checked: CheckedBatches::default(),
    }
}

/// Under `--verify=all`, what the verifier stage knows without checking: this node's own
/// batches, sealed from transactions its ingress check passed, hold no invalid one. Every other
/// batch is checked in full.
pub struct OwnBatches(pub CheckedBatches);

impl KnownBatches for OwnBatches {
    fn known_invalid(&self, batch: &Digest) -> Option<Vec<u32>> {
        self.0.contains(batch).then(Vec::new)
    }

    fn forget(&self, batch: &Digest) {
        self.0.forget(batch);
    }
}
