//! Shared by the consensus fuzz targets: the counting allocator and a committee to verify against.

pub mod alloc;

use config::Authority;
use config::Committee;
use crypto::KeyPair;
use std::net::SocketAddr;
use std::sync::OnceLock;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// The committee size of the seeds and of `committee`.
pub const NODES: u64 = 4;

/// Keys `KeyPair::from_seed(0..NODES)`, sorted by name (the committee's leader order).
pub fn keys() -> Vec<KeyPair> {
    let mut keys: Vec<_> = (0..NODES).map(KeyPair::from_seed).collect();
    keys.sort_by_key(|k| k.name);
    keys
}

/// A committee of the seed keys, one stake each, so seeds carry valid signatures and the fuzzer
/// reaches the checks past the signature.
pub fn committee() -> &'static Committee {
    static COMMITTEE: OnceLock<Committee> = OnceLock::new();
    COMMITTEE.get_or_init(|| {
        let address = SocketAddr::from(([127, 0, 0, 1], 0));
        Committee {
            authorities: keys()
                .into_iter()
                .map(|k| {
                    let authority = Authority {
                        stake: 1,
                        consensus_address: address,
                        mempool_address: address,
                        transactions_address: address,
                    };
                    (k.name, authority)
                })
                .collect(),
        }
    })
}
