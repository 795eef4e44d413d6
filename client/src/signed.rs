//! Transactions of the `hotcrypto` and `hotmove` modes: real transactions of this client's
//! genesis accounts, signed before the run starts so signing never limits the offered rate.
//!
//! Transaction k is sent by account k mod A with that account's next nonce: a native transfer
//! (hotcrypto), or the workload's call (hotmove). Whom a transfer or a SmallBank payment pays is
//! `--dest` (`executor::Dest`): the client's next account (`ring`), or any genesis account
//! drawn from a generator seeded by the client's index (`uniform`, `hot:K`). An invalid
//! transaction is a copy of the next valid one with a corrupted signature: it takes no nonce, so
//! dropping it never leaves a gap that stalls the sender.

use crate::load::{NextTx, TxSource};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use crypto::{KeyPair, Signature};
use executor::{Address, Dest, Genesis, Load, Payees, Payload, Transaction};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::collections::VecDeque;

pub struct SignedSource {
    txs: VecDeque<(Bytes, Option<String>, bool)>,
}

pub struct SignedConfig<'a> {
    pub genesis: &'a Genesis,
    pub client_index: usize,
    pub clients: usize,
    pub count: usize,
    pub invalid_share: f64,
    /// Move transactions (hotmove): the workload and how its calls enter the VM.
    pub move_load: Option<Load>,
    /// Whom transfers and SmallBank's payments pay.
    pub dest: Dest,
}

impl SignedSource {
    pub fn new(config: SignedConfig<'_>) -> Result<Self> {
        let accounts: Vec<KeyPair> = config
            .genesis
            .client_accounts(config.client_index, config.clients)
            .map(|a| {
                a.keypair()
                    .context("the genesis file has no secret key for this client's accounts")
            })
            .collect::<Result<_>>()?;
        if accounts.len() < 2 {
            bail!(
                "client {} of {} gets {} genesis accounts; it needs at least 2",
                config.client_index,
                config.clients,
                accounts.len()
            );
        }
        config
            .dest
            .check(config.genesis.accounts.len())
            .map_err(anyhow::Error::msg)?;
        // Every genesis account can be paid; this client's account j is genesis account
        // `client_index + j * clients`.
        let everyone: Vec<Address> = config
            .genesis
            .accounts
            .iter()
            .map(|a| a.address())
            .collect();
        let global = |j: usize| config.client_index + j * config.clients;
        let payees = Payees::new(config.dest, config.client_index as u64, everyone.len());
        let n = accounts.len();
        let txs: Vec<Transaction> = (0..config.count)
            .into_par_iter()
            .map(|k| {
                let sender = &accounts[k % n];
                let from = global(k % n);
                let destination = everyone[payees.payee(k as u64, from, global((k + 1) % n))];
                let nonce = (k / n) as u64;
                let payload = match &config.move_load {
                    Some(load) => load.payload(&everyone[from], destination, nonce),
                    None => Payload::Native {
                        destination,
                        amount: 1,
                    },
                };
                Transaction::sign(sender, nonce, payload)
            })
            .collect();

        // Invalid copies are placed deterministically (seeded by the client index).
        let mut rng = StdRng::seed_from_u64(config.client_index as u64);
        let mut queue = VecDeque::with_capacity(txs.len());
        for tx in txs {
            if config.invalid_share > 0.0 && rng.gen_bool(config.invalid_share) {
                let mut forged = tx.clone();
                let mut signature = forged.signature.to_bytes();
                signature[rng.gen_range(0..64)] ^= 1 << rng.gen_range(0..8);
                forged.signature = Signature::from_bytes(&signature);
                queue.push_back((Bytes::from(forged.encode()), None, true));
            }
            let sample = tx.is_sample().then(|| tx.sample_id());
            queue.push_back((Bytes::from(tx.encode()), sample, false));
        }
        Ok(SignedSource { txs: queue })
    }

    pub fn len(&self) -> usize {
        self.txs.len()
    }
}

impl TxSource for SignedSource {
    fn next(&mut self, _sample: bool) -> Option<NextTx> {
        let (bytes, sample_id, invalid) = self.txs.pop_front()?;
        Some(NextTx {
            bytes,
            sample_id,
            invalid,
        })
    }

    /// Nonces: a copy of an executed transaction is stale and dropped.
    fn replay_safe(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(sender, payee)` of every transaction client 1 of 2 sends.
    fn payees(genesis: &Genesis, dest: Dest) -> Vec<(Address, Address)> {
        let mut source = SignedSource::new(SignedConfig {
            genesis,
            client_index: 1,
            clients: 2,
            count: 60,
            invalid_share: 0.0,
            move_load: None,
            dest,
        })
        .expect("source");
        std::iter::from_fn(|| source.next(false))
            .map(|next| {
                let tx = Transaction::decode(&next.bytes).expect("decodes");
                match tx.payload {
                    Payload::Native { destination, .. } => (tx.sender, destination),
                    other => panic!("{other:?}"),
                }
            })
            .collect()
    }

    #[test]
    fn payees_follow_dest() {
        let genesis = Genesis::generate(10, 1_000, 0);
        let address = |i: usize| genesis.accounts[i].address();
        // Client 1 of 2 drives accounts 1, 3, 5, 7, 9; the ring is theirs.
        let own = [1, 3, 5, 7, 9];
        for (k, pair) in payees(&genesis, Dest::Ring).into_iter().enumerate() {
            assert_eq!(pair, (address(own[k % 5]), address(own[(k + 1) % 5])));
        }
        let hot = payees(&genesis, Dest::Hot(2));
        assert!(hot
            .iter()
            .all(|(_, payee)| [address(0), address(1)].contains(payee)));
        assert!(hot.iter().any(|(_, payee)| *payee == address(0)));
        let uniform = payees(&genesis, Dest::Uniform);
        assert!(uniform.iter().all(|(sender, payee)| sender != payee));
        // Accounts of the other client are paid too.
        assert!(uniform
            .iter()
            .any(|(_, payee)| (0..10).step_by(2).any(|i| *payee == address(i))));
        assert!(SignedSource::new(SignedConfig {
            genesis: &genesis,
            client_index: 0,
            clients: 2,
            count: 1,
            invalid_share: 0.0,
            move_load: None,
            dest: Dest::Hot(11),
        })
        .is_err());
    }
}
