//! The Move executor: the `Coin` module published at genesis, one VM for the life of the
//! executor (its loader caches the modules and, by hash, the transfer script), and a fresh
//! session per transaction whose change set is applied to the in-memory store.

use crate::executor::{digest_balances, Executor, FailReason, Outcome};
use crate::genesis::Genesis;
use crate::move_compile::{CompiledMove, MoveCompileError};
use crate::move_storage::InMemoryStorage;
use crate::snapshot::SnapshotError;
use crate::transaction::{Address, Payload, Transaction};
use bytes::Bytes;
use crypto::Digest;
use move_binary_format::errors::{PartialVMResult, VMError};
use move_core_types::account_address::AccountAddress;
use move_core_types::gas_algebra::InternalGas;
use move_core_types::identifier::Identifier;
use move_core_types::language_storage::{ModuleId, StructTag};
use move_core_types::value::MoveValue;
use move_core_types::vm_status::StatusCode;
use move_vm_runtime::move_vm::MoveVM;
use move_vm_runtime::native_functions::{NativeContext, NativeFunction};
use move_vm_types::gas::UnmeteredGasMeter;
use move_vm_types::loaded_data::runtime_types::Type;
use move_vm_types::natives::function::NativeResult;
use move_vm_types::values::{SignerRef, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use thiserror::Error;

/// The abort code of `move/Coin.move`.
const EINSUFFICIENT_BALANCE: u64 = 1;

#[derive(Debug, Error)]
pub enum MoveError {
    #[error(transparent)]
    Compile(#[from] MoveCompileError),
    #[error("cannot create the Move VM: {0}")]
    Vm(String),
    #[error("cannot publish the Coin module: {0}")]
    Publish(String),
    #[error("cannot mint the genesis balance of {address:?}: {message}")]
    Mint { address: Address, message: String },
    #[error("invalid Move identifier: {0}")]
    Identifier(String),
}

pub struct MoveExecutor {
    vm: MoveVM,
    storage: InMemoryStorage,
    transfer_script: Bytes,
    coin_tag: StructTag,
    entry: EntryFunction,
}

/// How a Move transfer enters the VM: the transfer script, or the entry function
/// `Coin::transfer_entry` (`--payload=entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Script,
    Entry,
}

/// `0x1::Coin::transfer_entry`, resolved once.
pub(crate) struct EntryFunction {
    pub(crate) module: ModuleId,
    pub(crate) function: Identifier,
}

impl EntryFunction {
    pub(crate) fn transfer() -> Result<Self, MoveError> {
        Ok(EntryFunction {
            module: ModuleId::new(AccountAddress::ONE, identifier("Coin")?),
            function: identifier("transfer_entry")?,
        })
    }
}

impl MoveExecutor {
    /// The compiled `transfer.move` that clients put in every Move transaction.
    pub fn transfer_script() -> Result<Bytes, MoveCompileError> {
        // Static bytes: cloning them touches no reference count, so the transactions a generator
        // thread builds and the executor thread drops share no cache line.
        Ok(Bytes::from_static(&CompiledMove::get()?.transfer_script))
    }

    pub fn from_genesis(genesis: &Genesis) -> Result<Self, MoveError> {
        Self::new(
            genesis
                .balances()
                .map(|(address, _, balance)| (address, balance)),
        )
    }

    /// Publishes `Coin` under `0x1` and mints every account's balance, all in one
    /// session. Fails on a duplicate account (the second `move_to` aborts).
    pub fn new(accounts: impl IntoIterator<Item = (Address, u64)>) -> Result<Self, MoveError> {
        let compiled = CompiledMove::get()?;
        let vm = MoveVM::new(natives()?).map_err(|e| MoveError::Vm(format!("{e:?}")))?;
        let coin_module = ModuleId::new(AccountAddress::ONE, identifier("Coin")?);
        let coin_tag = StructTag {
            address: AccountAddress::ONE,
            module: identifier("Coin")?,
            name: identifier("Coin")?,
            type_params: vec![],
        };
        let mint = identifier("mint")?;

        let mut storage = InMemoryStorage::new();
        let mut session = vm.new_session(&storage);
        session
            .publish_module(
                compiled.coin_module.clone(),
                AccountAddress::ONE,
                &mut UnmeteredGasMeter,
            )
            .map_err(|e| MoveError::Publish(describe(&e)))?;
        for (address, balance) in accounts {
            let signer = MoveValue::Signer(move_address(&address)).simple_serialize();
            let amount = MoveValue::U64(balance).simple_serialize();
            let (Some(signer), Some(amount)) = (signer, amount) else {
                return Err(MoveError::Mint {
                    address,
                    message: "cannot serialize arguments".into(),
                });
            };
            session
                .execute_function_bypass_visibility(
                    &coin_module,
                    &mint,
                    vec![],
                    vec![signer, amount],
                    &mut UnmeteredGasMeter,
                )
                .map_err(|e| MoveError::Mint {
                    address,
                    message: describe(&e),
                })?;
        }
        let (changes, _events) = session
            .finish()
            .map_err(|e| MoveError::Publish(describe(&e)))?;
        storage.apply(changes);

        Ok(MoveExecutor {
            vm,
            storage,
            transfer_script: Bytes::from_static(&compiled.transfer_script),
            coin_tag,
            entry: EntryFunction::transfer()?,
        })
    }

    /// The transfer script this executor accepts (a cheap reference-counted copy).
    pub fn script(&self) -> Bytes {
        self.transfer_script.clone()
    }

    pub fn storage(&self) -> &InMemoryStorage {
        &self.storage
    }

    fn transfer(
        &mut self,
        call: Call,
        sender: &Address,
        destination: &Address,
        amount: u64,
    ) -> Outcome {
        // The arguments in the layout the VM deserializes: a signer and an address are their
        // raw bytes, a u64 is little endian (a test pins this to `MoveValue` serialization).
        let amount = amount.to_le_bytes();
        let args: Vec<&[u8]> = vec![&sender.0, &destination.0, &amount];
        let mut session = self.vm.new_session(&self.storage);
        let result = match call {
            Call::Script => session.execute_script(
                &self.transfer_script[..],
                vec![],
                args,
                &mut UnmeteredGasMeter,
            ),
            Call::Entry => session.execute_entry_function(
                &self.entry.module,
                &self.entry.function,
                vec![],
                args,
                &mut UnmeteredGasMeter,
            ),
        };
        if let Err(error) = result {
            return Outcome::Failed(self.fail_reason(&error, sender));
        }
        match session.finish() {
            Ok((changes, _events)) => {
                self.storage.apply(changes);
                Outcome::Executed
            }
            Err(error) => Outcome::Failed(self.fail_reason(&error, sender)),
        }
    }

    fn fail_reason(&self, error: &VMError, sender: &Address) -> FailReason {
        transfer_fail_reason(error, self.balance(sender).is_some())
    }
}

/// Why the transfer script failed, from the VM's error (both VMs run the same script).
pub(crate) fn transfer_fail_reason(error: &VMError, sender_has_coin: bool) -> FailReason {
    match (error.major_status(), error.sub_status()) {
        (StatusCode::ABORTED, Some(EINSUFFICIENT_BALANCE)) => FailReason::InsufficientBalance,
        // `transfer` borrows the sender's coin first: if that one exists, the destination's
        // is the one missing.
        (StatusCode::MISSING_DATA, _) if !sender_has_coin => FailReason::UnknownSender,
        (StatusCode::MISSING_DATA, _) => FailReason::UnknownDestination,
        (StatusCode::ARITHMETIC_ERROR, _) => FailReason::Overflow,
        (StatusCode::OUT_OF_GAS, _) => FailReason::OutOfGas,
        (status, Some(code)) => FailReason::Vm(format!("{status:?}({code})")),
        (status, None) => FailReason::Vm(format!("{status:?}")),
    }
}

impl Executor for MoveExecutor {
    fn execute(&mut self, tx: &Transaction) -> Outcome {
        match &tx.payload {
            Payload::Move {
                script,
                destination,
                amount,
            } => {
                if script[..] != self.transfer_script[..] {
                    return Outcome::Failed(FailReason::ScriptNotAllowed);
                }
                self.transfer(Call::Script, &tx.sender, destination, *amount)
            }
            Payload::MoveEntry {
                destination,
                amount,
            } => self.transfer(Call::Entry, &tx.sender, destination, *amount),
            Payload::Native { .. } => Outcome::Failed(FailReason::WrongPayload),
        }
    }

    fn balance(&self, address: &Address) -> Option<u64> {
        self.storage
            .resource(&move_address(address), &self.coin_tag)
            .and_then(decode_coin)
    }

    fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        self.storage.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotError> {
        self.storage.restore(snapshot)
    }

    fn state_digest(&self) -> Digest {
        digest_balances(
            self.storage
                .resources_of(&self.coin_tag)
                .filter_map(|(address, bytes)| {
                    Some((Address(address.into_bytes()), decode_coin(bytes)?))
                })
                .collect(),
        )
    }
}

pub(crate) fn move_address(address: &Address) -> AccountAddress {
    AccountAddress::new(address.0)
}

/// A `Coin { value: u64 }` resource is its one field, BCS-encoded: 8 bytes little endian.
pub(crate) fn decode_coin(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Start-up errors are rare and fatal: give everything the VM says.
pub(crate) fn describe(error: &VMError) -> String {
    format!("{error:?}")
}

pub(crate) type NativeEntry = (AccountAddress, Identifier, Identifier, NativeFunction);

/// The native of `0x1::Coin`: `borrow_address(&signer): &address`.
pub(crate) fn natives() -> Result<Vec<NativeEntry>, MoveError> {
    let borrow_address: NativeFunction = Arc::new(native_borrow_address);
    Ok(vec![(
        AccountAddress::ONE,
        identifier("Coin")?,
        identifier("borrow_address")?,
        borrow_address,
    )])
}

pub(crate) fn identifier(name: &str) -> Result<Identifier, MoveError> {
    Identifier::new(name).map_err(|e| MoveError::Identifier(e.to_string()))
}

fn native_borrow_address(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::ADDRESS_LEN;
    use crypto::KeyPair;

    fn account(seed: u64) -> (KeyPair, Address) {
        let kp = KeyPair::from_seed(seed);
        let address = Address::from_public_key(&kp.name);
        (kp, address)
    }

    fn transfer(ex: &MoveExecutor, from: &KeyPair, to: Address, amount: u64) -> Transaction {
        Transaction::unsigned(
            from.name,
            0,
            Payload::Move {
                script: ex.script(),
                destination: to,
                amount,
            },
        )
    }

    #[test]
    fn raw_arguments_match_move_value_serialization() {
        let address = Address([3; ADDRESS_LEN]);
        let signer = MoveValue::Signer(move_address(&address)).simple_serialize();
        let target = MoveValue::Address(move_address(&address)).simple_serialize();
        let amount = MoveValue::U64(0x0102_0304_0506_0708).simple_serialize();
        assert_eq!(signer.as_deref(), Some(&address.0[..]));
        assert_eq!(target.as_deref(), Some(&address.0[..]));
        assert_eq!(
            amount,
            Some(0x0102_0304_0506_0708u64.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn genesis_mints_and_transfers_move_balances() {
        let (a, aa) = account(1);
        let (b, ba) = account(2);
        let mut ex = MoveExecutor::new([(aa, 10), (ba, u64::MAX - 5)]).expect("genesis");
        assert_eq!(ex.balance(&aa), Some(10));
        assert_eq!(ex.execute(&transfer(&ex, &a, ba, 3)), Outcome::Executed);
        assert_eq!(ex.balance(&aa), Some(7));
        assert_eq!(ex.balance(&ba), Some(u64::MAX - 2));
        assert_eq!(
            ex.execute(&transfer(&ex, &a, ba, 8)),
            Outcome::Failed(FailReason::InsufficientBalance)
        );
        assert_eq!(
            ex.execute(&transfer(&ex, &a, ba, 7)),
            Outcome::Failed(FailReason::Overflow)
        );
        assert_eq!(
            ex.execute(&transfer(&ex, &a, Address([9; ADDRESS_LEN]), 1)),
            Outcome::Failed(FailReason::UnknownDestination)
        );
        assert_eq!(
            ex.execute(&transfer(&ex, &a, Address([9; ADDRESS_LEN]), 8)),
            Outcome::Failed(FailReason::InsufficientBalance)
        );
        assert_eq!(
            ex.execute(&transfer(&ex, &account(3).0, aa, 1)),
            Outcome::Failed(FailReason::UnknownSender)
        );
        assert_eq!(ex.execute(&transfer(&ex, &a, aa, 7)), Outcome::Executed);
        assert_eq!(ex.balance(&aa), Some(7));
        let _ = b;
    }

    #[test]
    fn the_entry_function_transfers_like_the_script() {
        let (a, aa) = account(1);
        let (_, ba) = account(2);
        let mut ex = MoveExecutor::new([(aa, 10), (ba, u64::MAX - 5)]).expect("genesis");
        let entry = |amount| {
            Transaction::unsigned(
                a.name,
                0,
                Payload::MoveEntry {
                    destination: ba,
                    amount,
                },
            )
        };
        assert_eq!(ex.execute(&entry(3)), Outcome::Executed);
        assert_eq!(ex.balance(&aa), Some(7));
        assert_eq!(ex.balance(&ba), Some(u64::MAX - 2));
        assert_eq!(
            ex.execute(&entry(8)),
            Outcome::Failed(FailReason::InsufficientBalance)
        );
        assert_eq!(ex.execute(&entry(7)), Outcome::Failed(FailReason::Overflow));
    }

    #[test]
    fn only_the_transfer_script_runs() {
        let (a, aa) = account(1);
        let mut ex = MoveExecutor::new([(aa, 10)]).expect("genesis");
        let mut tx = transfer(&ex, &a, aa, 1);
        tx.payload = Payload::Move {
            script: Bytes::from_static(b"not a script"),
            destination: aa,
            amount: 1,
        };
        assert_eq!(
            ex.execute(&tx),
            Outcome::Failed(FailReason::ScriptNotAllowed)
        );
        tx.payload = Payload::Native {
            destination: aa,
            amount: 1,
        };
        assert_eq!(ex.execute(&tx), Outcome::Failed(FailReason::WrongPayload));
    }

    #[test]
    fn a_signed_move_transfer_round_trips() {
        let (a, aa) = account(1);
        let script = MoveExecutor::transfer_script().expect("script");
        let tx = Transaction::sign(
            &a,
            0,
            Payload::Move {
                script,
                destination: aa,
                amount: 5,
            },
        );
        let bytes = tx.encode();
        // 148 bytes of transfer, an 8-byte length and the compiled script (84 bytes today).
        assert!((200..=330).contains(&bytes.len()), "{}", bytes.len());
        let decoded = Transaction::decode(&bytes).expect("decode");
        assert!(decoded.verify().is_ok());
        let mut ex = MoveExecutor::new([(aa, 10)]).expect("genesis");
        assert_eq!(ex.execute(&decoded), Outcome::Executed);
        assert_eq!(ex.balance(&aa), Some(10));
    }

    #[test]
    fn duplicate_genesis_account_is_an_error() {
        let (_, aa) = account(1);
        assert!(matches!(
            MoveExecutor::new([(aa, 1), (aa, 2)]),
            Err(MoveError::Mint { .. })
        ));
    }
}
