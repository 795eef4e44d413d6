//! The natives the Move modules declare (`native fun`), registered with every Move VM the
//! executors create: `Coin::borrow_address`, and `KvStore`'s slot addresses and slot signers.

use super::error::MoveError;
use crypto::Digest;
use move_binary_format::errors::PartialVMResult;
use move_core_types::account_address::AccountAddress;
use move_core_types::gas_algebra::InternalGas;
use move_core_types::identifier::Identifier;
use move_vm_runtime::native_functions::{NativeContext, NativeFunction};
use move_vm_types::loaded_data::runtime_types::Type;
use move_vm_types::natives::function::NativeResult;
use move_vm_types::values::{SignerRef, Value};
use std::collections::VecDeque;
use std::sync::Arc;

pub(crate) type NativeEntry = (AccountAddress, Identifier, Identifier, NativeFunction);

/// What the natives charge, in internal gas units, from Diem's native table (the commit `gas.rs`
/// cites): a slot address is a SHA-256 over 40 bytes, charged as Diem's `SHA2_256` (21 + 1 per
/// byte), and a slot signer as Diem's `CREATE_SIGNER` (24 + 1) on top of its address. `Coin::borrow_address` stays
/// free, as it was before the workloads (Diem charged 353 + 1 for `Signer::borrow_address`), so
/// the transfer's gas stays comparable with the measurements made then.
const SLOT_ADDRESS_COST: u64 = (21 + 1) * SLOT_PREIMAGE_LEN as u64;
const SLOT_SIGNER_COST: u64 = 24 + 1;

/// Domain tag of slot addresses, so no slot can be an account's address (accounts are the
/// SHA-256 of a public key, with no tag).
const SLOT_DOMAIN: &[u8] = b"HotMove/kv-slot\0";
const SLOT_PREIMAGE_LEN: usize = 16 + AccountAddress::LENGTH + 8;

pub(crate) fn natives() -> Result<Vec<NativeEntry>, MoveError> {
    let entry = |module: &str, name: &str, f: NativeFunction| -> Result<NativeEntry, MoveError> {
        Ok((
            AccountAddress::ONE,
            identifier(module)?,
            identifier(name)?,
            f,
        ))
    };
    Ok(vec![
        entry("Coin", "borrow_address", Arc::new(borrow_address))?,
        entry("KvStore", "slot_address", Arc::new(native_slot_address))?,
        entry("KvStore", "slot_signer", Arc::new(native_slot_signer))?,
    ])
}

pub(crate) fn identifier(name: &str) -> Result<Identifier, MoveError> {
    Identifier::new(name).map_err(|e| MoveError::Identifier(e.to_string()))
}

/// Where `owner`'s key `key` lives: the first 16 bytes of SHA-256(domain || owner || key).
pub(crate) fn slot_address(owner: &AccountAddress, key: u64) -> AccountAddress {
    let key = key.to_le_bytes();
    let digest = Digest::of_parts([SLOT_DOMAIN, owner.as_slice(), &key[..]]);
    let mut address = [0u8; AccountAddress::LENGTH];
    address.copy_from_slice(&digest.0[..AccountAddress::LENGTH]);
    AccountAddress::new(address)
}

/// `Coin::borrow_address(&signer): &address`.
fn borrow_address(
    _context: &mut NativeContext,
    _type_args: Vec<Type>,
    mut args: VecDeque<Value>,
) -> PartialVMResult<NativeResult> {
    let signer = move_vm_types::pop_arg!(args, SignerRef);
    Ok(NativeResult::ok(
        InternalGas::new(0),
        vec![signer.borrow_signer()?].into(),
    ))
}

/// `KvStore::slot_address(owner: address, key: u64): address`.
fn native_slot_address(
    _context: &mut NativeContext,
    _type_args: Vec<Type>,
    mut args: VecDeque<Value>,
) -> PartialVMResult<NativeResult> {
    let key = move_vm_types::pop_arg!(args, u64);
    let owner = move_vm_types::pop_arg!(args, AccountAddress);
    Ok(NativeResult::ok(
        InternalGas::new(SLOT_ADDRESS_COST),
        vec![Value::address(slot_address(&owner, key))].into(),
    ))
}

/// `KvStore::slot_signer(owner: &signer, key: u64): signer`. It takes the owner's signer, not its
/// address, so that only a transaction of the owner can create the owner's slots.
fn native_slot_signer(
    _context: &mut NativeContext,
    _type_args: Vec<Type>,
    mut args: VecDeque<Value>,
) -> PartialVMResult<NativeResult> {
    let key = move_vm_types::pop_arg!(args, u64);
    let signer = move_vm_types::pop_arg!(args, SignerRef);
    // The signer's address, read through the reference `borrow_signer` gives.
    let owner: AccountAddress = signer
        .borrow_signer()?
        .value_as::<move_vm_types::values::Reference>()?
        .read_ref()?
        .value_as()?;
    Ok(NativeResult::ok(
        InternalGas::new(SLOT_ADDRESS_COST + SLOT_SIGNER_COST),
        vec![Value::signer(slot_address(&owner, key))].into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_addresses_differ_by_owner_and_key() {
        let a = AccountAddress::new([1; AccountAddress::LENGTH]);
        let b = AccountAddress::new([2; AccountAddress::LENGTH]);
        assert_eq!(slot_address(&a, 3), slot_address(&a, 3));
        assert_ne!(slot_address(&a, 3), slot_address(&a, 4));
        assert_ne!(slot_address(&a, 3), slot_address(&b, 3));
        assert_eq!(SLOT_PREIMAGE_LEN, SLOT_DOMAIN.len() + 16 + 8);
    }
}
