//! What the integration tests share.

use crypto::KeyPair;
use executor::{Address, Genesis};

/// The key pairs and the addresses of `genesis`' accounts, in its order.
pub fn accounts(genesis: &Genesis) -> (Vec<KeyPair>, Vec<Address>) {
    (
        genesis.keypairs().expect("secret keys"),
        genesis.addresses(),
    )
}
