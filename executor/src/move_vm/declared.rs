//! What a transaction declares it reads and writes before it runs (`--exec=waves`): worked out
//! from its payload alone, per workload procedure, and checked against what it actually read
//! and wrote once it ran.
//!
//! - transfer: the sender's and the payee's coins;
//! - SmallBank: per procedure, the bank accounts (and the sender's coin) it moves money between;
//! - kvstore: the sender's slots the call names (at most [`MAX_UNMETERED_KEYS`]: beyond, the
//!   declaration is short, the check fails and the block runs sequentially);
//! - donothing, cpuheavy: nothing;
//! - every Move transaction reads the sender's coin (the bare VM looks at it to tell a missing
//!   sender from a missing payee), and the adapter adds the sender's `Account` and coin
//!   (prologue and epilogue), and the fee account's coin when fees are credited per transaction.

use super::natives::slot_address;
use super::state::struct_tag;
use super::storage::{InMemoryStorage, ResourceType, StateKey};
use crate::transaction::{Address, Call, Payload, Procedure, Transaction, MAX_UNMETERED_KEYS};
use move_core_types::account_address::AccountAddress;

/// A transaction's declared sets. A key in both is written (and may be read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Declared {
    pub(crate) reads: Vec<StateKey>,
    pub(crate) writes: Vec<StateKey>,
}

impl Declared {
    pub(crate) fn may_read(&self, key: &StateKey) -> bool {
        self.reads.contains(key) || self.writes.contains(key)
    }

    pub(crate) fn may_write(&self, key: &StateKey) -> bool {
        self.writes.contains(key)
    }
}

/// The numbers of the resource types declarations name, in one store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeclaredTypes {
    coin: ResourceType,
    account: ResourceType,
    bank: ResourceType,
    slot: ResourceType,
}

impl DeclaredTypes {
    /// `None` if the store has not numbered one of them (the parallel schemes number every
    /// type the modules declare before a block).
    pub(crate) fn of(storage: &InMemoryStorage) -> Option<Self> {
        let number = |module: &str, name: &str| {
            let tag = struct_tag(module, name).ok()?;
            Some(storage.key(&AccountAddress::ONE, &tag)?.ty)
        };
        Some(DeclaredTypes {
            coin: number("Coin", "Coin")?,
            account: number("Account", "Account")?,
            bank: number("SmallBank", "Account")?,
            slot: number("KvStore", "Slot")?,
        })
    }

    fn key(&self, address: &Address, ty: ResourceType) -> StateKey {
        StateKey {
            address: AccountAddress::new(address.0),
            ty,
        }
    }

    pub(crate) fn coin(&self, address: &Address) -> StateKey {
        self.key(address, self.coin)
    }

    pub(crate) fn account(&self, address: &Address) -> StateKey {
        self.key(address, self.account)
    }

    fn bank(&self, address: &Address) -> StateKey {
        self.key(address, self.bank)
    }

    fn slot(&self, owner: &Address, key: u64) -> StateKey {
        StateKey {
            address: slot_address(&AccountAddress::new(owner.0), key),
            ty: self.slot,
        }
    }
}

/// What the payload of `tx` reads and writes, whichever VM runs it.
pub(crate) fn declare_payload(tx: &Transaction, types: &DeclaredTypes) -> Declared {
    let sender = &tx.sender;
    let mut declared = Declared {
        reads: vec![types.coin(sender)],
        writes: Vec::new(),
    };
    let writes = &mut declared.writes;
    match &tx.payload {
        Payload::Move { destination, .. } | Payload::MoveEntry { destination, .. } => {
            writes.extend([types.coin(sender), types.coin(destination)]);
        }
        Payload::WorkloadScript { call, .. } | Payload::WorkloadEntry { call } => match call {
            Call::DoNothing | Call::CpuHeavy { .. } => {}
            Call::KvStore {
                first_key, keys, ..
            } => writes.extend(
                (0..(*keys).min(MAX_UNMETERED_KEYS))
                    .map_while(|i| first_key.checked_add(i))
                    .map(|key| types.slot(sender, key)),
            ),
            Call::SmallBank(procedure) => match procedure {
                Procedure::Amalgamate { to } | Procedure::SendPayment { to, .. } => {
                    writes.extend([types.bank(sender), types.bank(to)]);
                }
                Procedure::Balance => declared.reads.push(types.bank(sender)),
                Procedure::DepositChecking { .. }
                | Procedure::TransactSavings { .. }
                | Procedure::WriteCheck { .. } => {
                    writes.extend([types.bank(sender), types.coin(sender)]);
                }
            },
        },
        Payload::Native { .. } => {}
    }
    declared
}
