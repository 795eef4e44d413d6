//! What the integration tests share.

use crypto::KeyPair;
use executor::{Address, Genesis};

/// The key pairs and the addresses of `genesis`' accounts, in its order.
pub fn accounts(genesis: &Genesis) -> (Vec<KeyPair>, Vec<Address>) {
    let keys = genesis
        .accounts
        .iter()
        .map(|a| a.keypair().expect("secret"))
        .collect();
    let addresses = genesis.accounts.iter().map(|a| a.address()).collect();
    (keys, addresses)
}
