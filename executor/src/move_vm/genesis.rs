//! The genesis session both Move executors start from, unmetered: the modules published under
//! `0x1`, every account's coin minted and, under `--workload=smallbank`, every account's bank
//! opened; the adapter adds its `Account` module and resources through the same session.

use super::compile::CompiledMove;
use super::error::{describe, MoveError};
use super::natives::identifier;
use super::storage::InMemoryStorage;
use crate::transaction::Address;
use crate::workload::Workload;
use move_core_types::account_address::AccountAddress;
use move_core_types::language_storage::ModuleId;
use move_core_types::value::MoveValue;
use move_vm_runtime::move_vm::MoveVM;
use move_vm_runtime::session::Session;
use move_vm_types::gas::UnmeteredGasMeter;

/// The share of each account's balance a SmallBank genesis moves into its checking, and the same
/// into its savings (a quarter each): the coin keeps half, for fees and deposits.
const BANK_SHARE_DIVISOR: u64 = 4;

pub(crate) struct GenesisSession<'r, 'l> {
    session: Session<'r, 'l, InMemoryStorage>,
    workload: Workload,
}

/// Runs `build` in one session over an empty store and returns the store with its effects.
pub(crate) fn genesis(
    vm: &MoveVM,
    workload: Workload,
    build: impl FnOnce(&mut GenesisSession<'_, '_>) -> Result<(), MoveError>,
) -> Result<InMemoryStorage, MoveError> {
    let mut storage = InMemoryStorage::new();
    let changes = {
        let mut genesis = GenesisSession {
            session: vm.new_session(&storage),
            workload,
        };
        build(&mut genesis)?;
        let (changes, _events) = genesis
            .session
            .finish()
            .map_err(|e| MoveError::Publish(describe(&e)))?;
        changes
    };
    storage.apply(changes);
    Ok(storage)
}

impl GenesisSession<'_, '_> {
    /// Publishes `Coin`, the adapter's `Account` and every workload's module, as one bundle
    /// whatever the VM and the workload: `Coin` names `SmallBank` and `Account` its friends, and
    /// the VM loads a module's friends with it, so none can be published (or used) without the
    /// others. The bare VM creates no `Account` resource and never calls the module.
    pub(crate) fn publish(&mut self) -> Result<(), MoveError> {
        let compiled = CompiledMove::get()?;
        let modules = [&compiled.coin_module[..], &compiled.account_module[..]]
            .into_iter()
            .chain(compiled.workload_modules.iter().map(|m| &m[..]))
            .map(<[u8]>::to_vec)
            .collect();
        self.session
            .publish_module_bundle(modules, AccountAddress::ONE, &mut UnmeteredGasMeter)
            .map_err(|e| MoveError::Publish(describe(&e)))
    }

    /// Gives `address` a coin of `balance` and, under SmallBank, opens its bank with a quarter
    /// of it in checking and a quarter in savings.
    pub(crate) fn open_account(&mut self, address: Address, balance: u64) -> Result<(), MoveError> {
        self.call(address, "Coin", "mint", &[&balance.to_le_bytes()])?;
        if self.workload == Workload::SmallBank {
            let share = (balance / BANK_SHARE_DIVISOR).to_le_bytes();
            self.call(address, "SmallBank", "open", &[&share, &share])?;
        }
        Ok(())
    }

    /// Calls `module::function(&signer of address, args...)`, bypassing its visibility (the
    /// genesis functions are private, so that no transaction can call them).
    pub(crate) fn call(
        &mut self,
        address: Address,
        module: &str,
        function: &str,
        args: &[&[u8]],
    ) -> Result<(), MoveError> {
        let error = |message: String| MoveError::Mint { address, message };
        let signer = MoveValue::Signer(AccountAddress::new(address.0))
            .simple_serialize()
            .ok_or_else(|| error("cannot serialize the signer".into()))?;
        let mut all: Vec<&[u8]> = vec![&signer];
        all.extend_from_slice(args);
        self.session
            .execute_function_bypass_visibility(
                &ModuleId::new(AccountAddress::ONE, identifier(module)?),
                &identifier(function)?,
                vec![],
                all,
                &mut UnmeteredGasMeter,
            )
            .map_err(|e| error(format!("{module}::{function}: {}", describe(&e))))?;
        Ok(())
    }
}
