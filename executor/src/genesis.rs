//! The genesis accounts file: `{"accounts": [{"public_key", "secret_key", "balance"}]}`.
//!
//! Nodes read the keys and balances; clients also read the secret keys, since in this testbed the
//! load generator signs for the genesis accounts.

use crate::transaction::Address;
use crypto::{KeyPair, PublicKey, SecretKey};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GenesisError {
    #[error("cannot read genesis file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write genesis file {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("genesis file {path} is not valid JSON: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("genesis account {index}: secret key does not match public key")]
    KeyMismatch { index: usize },
    #[error("genesis account {index}: public key appears twice")]
    Duplicate { index: usize },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GenesisAccount {
    pub public_key: PublicKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<SecretKey>,
    pub balance: u64,
}

impl GenesisAccount {
    pub fn address(&self) -> Address {
        Address::from_public_key(&self.public_key)
    }

    /// The account's key pair, if the file carries its secret key.
    pub fn keypair(&self) -> Option<KeyPair> {
        self.secret_key.as_ref().map(|secret| KeyPair {
            name: self.public_key,
            secret: secret.clone(),
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Genesis {
    pub accounts: Vec<GenesisAccount>,
}

impl Genesis {
    /// `accounts` accounts holding `balance` each; account `i` is `KeyPair::from_seed(seed + i)`,
    /// so every process that runs this with the same arguments gets the same file.
    pub fn generate(accounts: usize, balance: u64, seed: u64) -> Self {
        let accounts = (0..accounts as u64)
            .map(|i| {
                let kp = KeyPair::from_seed(seed.wrapping_add(i));
                GenesisAccount {
                    public_key: kp.name,
                    secret_key: Some(kp.secret),
                    balance,
                }
            })
            .collect();
        Genesis { accounts }
    }

    pub fn load(path: impl AsRef<Path>) -> Result<Self, GenesisError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GenesisError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let genesis: Genesis =
            serde_json::from_str(&text).map_err(|source| GenesisError::Parse {
                path: path.display().to_string(),
                source,
            })?;
        genesis.validate()?;
        Ok(genesis)
    }

    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), GenesisError> {
        let path = path.as_ref();
        let write_error = |source| GenesisError::Write {
            path: path.display().to_string(),
            source,
        };
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| write_error(std::io::Error::other(e)))?;
        std::fs::write(path, json + "\n").map_err(write_error)
    }

    /// Rejects files that would make the executors disagree or fail at start: the same key
    /// twice (one account, two balances) or a secret key that signs for another account.
    pub fn validate(&self) -> Result<(), GenesisError> {
        let mut seen = HashSet::with_capacity(self.accounts.len());
        for (index, account) in self.accounts.iter().enumerate() {
            if !seen.insert(account.public_key) {
                return Err(GenesisError::Duplicate { index });
            }
            if let Some(secret) = &account.secret_key {
                if secret.public() != account.public_key {
                    return Err(GenesisError::KeyMismatch { index });
                }
            }
        }
        Ok(())
    }

    /// Sum of all balances; `u128` because a large genesis can exceed `u64`.
    pub fn total_supply(&self) -> u128 {
        self.accounts.iter().map(|a| a.balance as u128).sum()
    }

    /// The address of every account, in file order.
    pub fn addresses(&self) -> Vec<Address> {
        self.accounts.iter().map(GenesisAccount::address).collect()
    }

    /// The key pair of every account, in file order; `None` unless the file carries every
    /// account's secret key (a generated genesis does).
    pub fn keypairs(&self) -> Option<Vec<KeyPair>> {
        self.accounts.iter().map(GenesisAccount::keypair).collect()
    }

    /// `(address, public key, balance)` of every account, in file order.
    pub fn balances(&self) -> impl Iterator<Item = (Address, PublicKey, u64)> + '_ {
        self.accounts
            .iter()
            .map(|a| (a.address(), a.public_key, a.balance))
    }

    /// The accounts client `index` of `clients` drives: `index, index + clients, ...`, so
    /// clients never share a sender and never race on nonces.
    pub fn client_accounts(
        &self,
        index: usize,
        clients: usize,
    ) -> impl Iterator<Item = &GenesisAccount> {
        self.accounts.iter().skip(index).step_by(clients.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_is_deterministic_and_round_trips() {
        let genesis = Genesis::generate(5, 1_000, 10);
        assert_eq!(genesis.accounts.len(), 5);
        assert_eq!(genesis.total_supply(), 5_000);
        assert_eq!(genesis.accounts[2].public_key, KeyPair::from_seed(12).name);
        let again = Genesis::generate(5, 1_000, 10);
        assert_eq!(again.accounts[4].public_key, genesis.accounts[4].public_key);
        let keys = genesis.keypairs().expect("secret keys");
        assert_eq!(keys[2].name, KeyPair::from_seed(12).name);
        assert_eq!(
            genesis.addresses()[2],
            Address::from_public_key(&keys[2].name)
        );

        let dir = std::env::temp_dir().join(format!("hotmove-genesis-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("genesis.json");
        genesis.save(&path).expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains(&genesis.accounts[0].public_key.to_hex()));
        let loaded = Genesis::load(&path).expect("load");
        assert_eq!(loaded.accounts.len(), 5);
        assert_eq!(loaded.accounts[3].address(), genesis.accounts[3].address());
        let kp = loaded.accounts[1].keypair().expect("secret");
        assert_eq!(kp.secret.public(), kp.name);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn public_only_accounts_and_bad_files() {
        let json = format!(
            r#"{{"accounts": [{{"public_key": "{}", "balance": 7}}]}}"#,
            KeyPair::from_seed(1).name.to_hex()
        );
        let genesis: Genesis = serde_json::from_str(&json).expect("parse");
        assert!(genesis.accounts[0].secret_key.is_none());
        assert!(genesis.validate().is_ok());

        let mut dup = Genesis::generate(2, 1, 0);
        dup.accounts[1] = dup.accounts[0].clone();
        assert!(matches!(
            dup.validate(),
            Err(GenesisError::Duplicate { index: 1 })
        ));
        let mut wrong = Genesis::generate(2, 1, 0);
        wrong.accounts[0].secret_key = wrong.accounts[1].secret_key.clone();
        assert!(matches!(
            wrong.validate(),
            Err(GenesisError::KeyMismatch { index: 0 })
        ));
        assert!(matches!(
            Genesis::load("/nonexistent/genesis.json"),
            Err(GenesisError::Read { .. })
        ));
    }

    #[test]
    fn clients_split_accounts() {
        let genesis = Genesis::generate(7, 1, 0);
        let mine: Vec<_> = genesis
            .client_accounts(1, 3)
            .map(|a| a.public_key)
            .collect();
        assert_eq!(
            mine,
            vec![
                genesis.accounts[1].public_key,
                genesis.accounts[4].public_key
            ]
        );
    }
}
