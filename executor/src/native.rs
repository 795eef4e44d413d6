//! The native executor: balances in a hash map, a transfer is a debit and a credit. It mirrors
//! the checks of `move/Coin.move` in the same order so both executors agree on every outcome.

use crate::executor::{digest_balances, Executor, FailReason, Outcome};
use crate::genesis::Genesis;
use crate::snapshot::{self, SnapshotError};
use crate::transaction::{Address, Payload, Transaction};
use crypto::Digest;
use rustc_hash::FxHashMap;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NativeError {
    #[error("genesis lists account {0:?} twice")]
    DuplicateAccount(Address),
}

#[derive(Clone, Debug, Default)]
pub struct NativeExecutor {
    balances: FxHashMap<Address, u64>,
}

impl NativeExecutor {
    pub fn new(accounts: impl IntoIterator<Item = (Address, u64)>) -> Result<Self, NativeError> {
        let mut balances = FxHashMap::default();
        for (address, balance) in accounts {
            if balances.insert(address, balance).is_some() {
                return Err(NativeError::DuplicateAccount(address));
            }
        }
        Ok(NativeExecutor { balances })
    }

    pub fn from_genesis(genesis: &Genesis) -> Result<Self, NativeError> {
        Self::new(
            genesis
                .balances()
                .map(|(address, _, balance)| (address, balance)),
        )
    }

    pub fn accounts(&self) -> usize {
        self.balances.len()
    }

    fn transfer(&mut self, from: Address, to: Address, amount: u64) -> Outcome {
        let Some(&from_balance) = self.balances.get(&from) else {
            return Outcome::Failed(FailReason::UnknownSender);
        };
        if from_balance < amount {
            return Outcome::Failed(FailReason::InsufficientBalance);
        }
        let Some(&to_balance) = self.balances.get(&to) else {
            return Outcome::Failed(FailReason::UnknownDestination);
        };
        // Debit first, then credit what is there after the debit, as Move does: a transfer to
        // oneself then leaves the balance unchanged.
        let to_balance = if from == to {
            from_balance - amount
        } else {
            to_balance
        };
        let Some(credited) = to_balance.checked_add(amount) else {
            return Outcome::Failed(FailReason::Overflow);
        };
        self.balances.insert(from, from_balance - amount);
        self.balances.insert(to, credited);
        Outcome::Executed
    }
}

impl Executor for NativeExecutor {
    fn execute(&mut self, tx: &Transaction) -> Outcome {
        match &tx.payload {
            Payload::Native {
                destination,
                amount,
            } => self.transfer(tx.sender, *destination, *amount),
            Payload::Move { .. }
            | Payload::MoveEntry { .. }
            | Payload::WorkloadScript { .. }
            | Payload::WorkloadEntry { .. } => Outcome::Failed(FailReason::WrongPayload),
        }
    }

    fn balance(&self, address: &Address) -> Option<u64> {
        self.balances.get(address).copied()
    }

    /// Every balance, in address order.
    fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut balances: Vec<(Address, u64)> =
            self.balances.iter().map(|(a, b)| (*a, *b)).collect();
        balances.sort_unstable_by_key(|(address, _)| *address);
        snapshot::encode(&balances)
    }

    /// Accounts are fixed at genesis: a snapshot must name exactly this node's.
    fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        let balances: Vec<(Address, u64)> = snapshot::decode(bytes)?;
        if balances.len() != self.balances.len() {
            return Err(SnapshotError::Mismatch(format!(
                "{} accounts, genesis has {}",
                balances.len(),
                self.balances.len()
            )));
        }
        if let Some((unknown, _)) = balances
            .iter()
            .find(|(address, _)| !self.balances.contains_key(address))
        {
            return Err(SnapshotError::UnknownAccount(*unknown));
        }
        self.balances = balances.into_iter().collect();
        Ok(())
    }

    fn state_digest(&self) -> Digest {
        digest_balances(self.balances.iter().map(|(a, b)| (*a, *b)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::ADDRESS_LEN;
    use crypto::KeyPair;

    fn tx(from: &KeyPair, to: Address, amount: u64) -> Transaction {
        Transaction::unsigned(
            from.name,
            0,
            Payload::Native {
                destination: to,
                amount,
            },
        )
    }

    #[test]
    fn transfers_debit_credit_and_fail_cleanly() {
        let a = KeyPair::from_seed(1);
        let b = KeyPair::from_seed(2);
        let (aa, ba) = (
            Address::from_public_key(&a.name),
            Address::from_public_key(&b.name),
        );
        let mut ex = NativeExecutor::new([(aa, 10), (ba, u64::MAX - 5)]).expect("genesis");
        assert_eq!(ex.execute(&tx(&a, ba, 3)), Outcome::Executed);
        assert_eq!(ex.balance(&aa), Some(7));
        assert_eq!(ex.balance(&ba), Some(u64::MAX - 2));
        assert_eq!(
            ex.execute(&tx(&a, ba, 8)),
            Outcome::Failed(FailReason::InsufficientBalance)
        );
        assert_eq!(
            ex.execute(&tx(&a, ba, 7)),
            Outcome::Failed(FailReason::Overflow)
        );
        let nobody = Address([9; ADDRESS_LEN]);
        assert_eq!(
            ex.execute(&tx(&a, nobody, 1)),
            Outcome::Failed(FailReason::UnknownDestination)
        );
        // The balance is checked before the destination, as `Coin::transfer` does.
        assert_eq!(
            ex.execute(&tx(&a, nobody, 8)),
            Outcome::Failed(FailReason::InsufficientBalance)
        );
        assert_eq!(
            ex.execute(&tx(&KeyPair::from_seed(3), aa, 1)),
            Outcome::Failed(FailReason::UnknownSender)
        );
        assert_eq!(ex.execute(&tx(&a, aa, 7)), Outcome::Executed);
        assert_eq!(ex.balance(&aa), Some(7));
        assert_eq!(ex.balance(&ba), Some(u64::MAX - 2));
    }

    #[test]
    fn duplicate_genesis_account_is_an_error() {
        let a = Address([1; ADDRESS_LEN]);
        assert_eq!(
            NativeExecutor::new([(a, 1), (a, 2)]).err(),
            Some(NativeError::DuplicateAccount(a))
        );
    }
}
