//! What both Move executors read out of their store: balances, the money SmallBank holds, and the
//! state digest replicas compare.

use super::error::MoveError;
use super::natives::identifier;
use super::storage::InMemoryStorage;
use crate::executor::digest_balances;
use crate::transaction::Address;
use crypto::Digest;
use move_core_types::account_address::AccountAddress;
use move_core_types::language_storage::StructTag;

/// The resource types the executors read, resolved once.
pub(crate) struct MoveState {
    coin: StructTag,
    bank: StructTag,
    slot: StructTag,
}

impl MoveState {
    pub(crate) fn new() -> Result<Self, MoveError> {
        Ok(MoveState {
            coin: struct_tag("Coin", "Coin")?,
            bank: struct_tag("SmallBank", "Account")?,
            slot: struct_tag("KvStore", "Slot")?,
        })
    }

    /// `Coin::Coin`.
    pub(crate) fn coin_tag(&self) -> &StructTag {
        &self.coin
    }

    pub(crate) fn balance(&self, storage: &InMemoryStorage, address: &Address) -> Option<u64> {
        storage
            .resource(&AccountAddress::new(address.0), &self.coin)
            .and_then(decode_u64)
    }

    /// `(checking, savings)` of `address`'s SmallBank account, if it has one.
    pub(crate) fn bank_account(
        &self,
        storage: &InMemoryStorage,
        address: &Address,
    ) -> Option<(u64, u64)> {
        decode_bank(storage.resource(&AccountAddress::new(address.0), &self.bank)?)
    }

    /// The money in SmallBank accounts, checking and savings together: it left the coins, and
    /// counts in the supply.
    pub(crate) fn bank_holdings(&self, storage: &InMemoryStorage) -> u128 {
        storage
            .resources_of(&self.bank)
            .filter_map(|(_, bytes)| decode_bank(bytes))
            .map(|(checking, savings)| u128::from(checking) + u128::from(savings))
            .sum()
    }

    /// The digest of every coin balance ([`digest_balances`], so a transfer-only state digests as
    /// the native executor's does), followed, when there are any, by the workloads' resources
    /// (SmallBank accounts, then key-value slots), each as address and bytes in address order.
    /// The adapter's `Account` resources are not in it: they mirror the ledger's nonces.
    pub(crate) fn digest(&self, storage: &InMemoryStorage) -> Digest {
        let coins = digest_balances(
            storage
                .resources_of(&self.coin)
                .filter_map(|(address, bytes)| {
                    Some((Address(address.into_bytes()), decode_u64(bytes)?))
                })
                .collect(),
        );
        let mut workload: Vec<(u8, &AccountAddress, &[u8])> = storage
            .resources_of(&self.bank)
            .map(|(address, bytes)| (0, address, bytes))
            .chain(
                storage
                    .resources_of(&self.slot)
                    .map(|(address, bytes)| (1, address, bytes)),
            )
            .collect();
        if workload.is_empty() {
            return coins;
        }
        workload.sort_unstable();
        // Each value with its length, so that no two states can run into the same bytes.
        let lengths: Vec<[u8; 8]> = workload
            .iter()
            .map(|(_, _, bytes)| (bytes.len() as u64).to_le_bytes())
            .collect();
        Digest::of_parts(
            std::iter::once(&coins.0[..]).chain(workload.iter().zip(&lengths).flat_map(
                |((_, address, bytes), length)| [address.as_slice(), &length[..], *bytes],
            )),
        )
    }
}

/// `0x1::module::name`.
pub(crate) fn struct_tag(module: &str, name: &str) -> Result<StructTag, MoveError> {
    Ok(StructTag {
        address: AccountAddress::ONE,
        module: identifier(module)?,
        name: identifier(name)?,
        type_params: vec![],
    })
}

/// `Account { checking: u64, savings: u64 }` in BCS: the two fields one after the other.
fn decode_bank(bytes: &[u8]) -> Option<(u64, u64)> {
    Some((decode_u64(bytes.get(..8)?)?, decode_u64(bytes.get(8..)?)?))
}

/// A u64 in BCS: 8 bytes little endian (a `Coin { value }` is just that).
pub(crate) fn decode_u64(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}
