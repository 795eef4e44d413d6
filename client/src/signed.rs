//! Transactions of the `hotcrypto` and `hotmove` modes: real transactions of this client's
//! genesis accounts, signed before the run starts so signing never limits the offered rate.
//!
//! Transaction k is sent by account k mod A with that account's next nonce: a native transfer to
//! the next account (hotcrypto), or the workload's call (hotmove; a transfer goes to the next
//! account, and so do SmallBank's payments). An invalid transaction is a copy of the next valid
//! one with a corrupted signature: it takes no nonce, so dropping it never leaves a gap that
//! stalls the sender.

use crate::load::{NextTx, TxSource};
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use crypto::{KeyPair, Signature};
use executor::{Address, Genesis, Load, Payload, Transaction};
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
        let destinations: Vec<Address> = accounts
            .iter()
            .map(|k| Address::from_public_key(&k.name))
            .collect();
        let n = accounts.len();
        let txs: Vec<Transaction> = (0..config.count)
            .into_par_iter()
            .map(|k| {
                let sender = &accounts[k % n];
                let destination = destinations[(k + 1) % n];
                let nonce = (k / n) as u64;
                let payload = match &config.move_load {
                    Some(load) => load.payload(&destinations[k % n], destination, nonce),
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
