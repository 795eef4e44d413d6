//! [`AdapterExecutor`]: the adapter's store, VM and rules, from genesis on; one transaction at
//! a time or a block through the configured scheme (`parallel/`), and the gas it used.

use super::rules::{
    authentication_key_argument, AccountFunctions, AdapterRules, GasParameters, FEE_ACCOUNT,
};
use crate::executor::{BlockStats, BlockTx, Executor, Outcome};
use crate::genesis::Genesis;
use crate::move_vm::error::MoveError;
use crate::move_vm::genesis::genesis;
use crate::move_vm::logic::{FeeCredit, TransactionLogic};
use crate::move_vm::natives::natives;
use crate::move_vm::state::MoveState;
use crate::move_vm::storage::InMemoryStorage;
use crate::parallel::{BlockRunner, ExecConfig};
use crate::snapshot::{self, SnapshotError};
use crate::transaction::{Address, Transaction};
use crate::workload::Workload;
use crypto::{Digest, PublicKey};
use move_core_types::account_address::AccountAddress;
use move_vm_runtime::move_vm::MoveVM;

pub struct AdapterExecutor {
    vm: MoveVM,
    storage: InMemoryStorage,
    pub(super) rules: AdapterRules,
    state: MoveState,
    gas_used: u64,
    blocks: BlockRunner,
}

impl AdapterExecutor {
    /// The adapter of the transfer workload.
    pub fn from_genesis(genesis: &Genesis, gas: GasParameters) -> Result<Self, MoveError> {
        Self::from_genesis_for(genesis, gas, Workload::Transfer)
    }

    pub fn from_genesis_for(
        genesis: &Genesis,
        gas: GasParameters,
        workload: Workload,
    ) -> Result<Self, MoveError> {
        Self::with_workload(
            genesis.balances().map(|(_, key, balance)| (key, balance)),
            gas,
            workload,
        )
    }

    /// [`Self::with_workload`] for the transfer.
    pub fn new(
        accounts: impl IntoIterator<Item = (PublicKey, u64)>,
        gas: GasParameters,
    ) -> Result<Self, MoveError> {
        Self::with_workload(accounts, gas, Workload::Transfer)
    }

    /// Publishes `Coin`, `Account` and the workloads' modules under `0x1`; gives every account
    /// its coin (and the workload's genesis state) and its `Account` (sequence number 0, the
    /// SHA-256 of its key), and the fee account an empty coin.
    pub fn with_workload(
        accounts: impl IntoIterator<Item = (PublicKey, u64)>,
        gas: GasParameters,
        workload: Workload,
    ) -> Result<Self, MoveError> {
        let vm = MoveVM::new(natives()?).map_err(|e| MoveError::Vm(format!("{e:?}")))?;
        let account = AccountFunctions::new()?;
        let storage = genesis(&vm, workload, |genesis| {
            genesis.publish()?;
            // The fee account: a coin and no key, so nothing can spend from it.
            genesis.call(FEE_ACCOUNT, "Coin", "mint", &[&0u64.to_le_bytes()])?;
            for (key, balance) in accounts {
                let address = Address::from_public_key(&key);
                genesis.open_account(address, balance)?;
                let authentication_key = authentication_key_argument(&key);
                genesis.call(address, "Account", "create", &[&authentication_key])?;
            }
            Ok(())
        })?;

        Ok(AdapterExecutor {
            vm,
            storage,
            rules: AdapterRules::new(account, gas)?,
            state: MoveState::new()?,
            gas_used: 0,
            blocks: BlockRunner::new(ExecConfig::default())?,
        })
    }

    /// How blocks run ([`ExecConfig`]: the scheme, its threads, when fees are credited).
    pub fn with_execution(mut self, config: ExecConfig) -> Result<Self, MoveError> {
        self.blocks = BlockRunner::new(config)?;
        Ok(self)
    }

    /// The adapter with the payload's instructions not metered (only the intrinsic gas is
    /// charged): everything else the same, so that a benchmark of the two tells what metering
    /// costs. Not for runs: nothing then bounds a transaction's execution.
    pub fn without_gas_metering(mut self) -> Self {
        self.rules.metered = false;
        self
    }

    pub fn gas_parameters(&self) -> GasParameters {
        self.rules.gas
    }

    /// `(checking, savings)` of `address`'s SmallBank account (`--workload=smallbank`).
    pub fn bank_account(&self, address: &Address) -> Option<(u64, u64)> {
        self.state.bank_account(&self.storage, address)
    }

    pub fn storage(&self) -> &InMemoryStorage {
        &self.storage
    }

    /// The Move sequence number of `address`, if it has an account.
    pub fn sequence_number(&self, address: &Address) -> Option<u64> {
        let bytes = self.storage.resource(
            &AccountAddress::new(address.0),
            &self.rules.account.sequence_number_tag,
        )?;
        // `Account { sequence_number: u64, authentication_key: vector<u8> }`: the u64 first.
        Some(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?))
    }
}

impl Executor for AdapterExecutor {
    /// One transaction, its fee credited at once (a block of one).
    fn execute(&mut self, tx: &Transaction) -> Outcome {
        let effects = self
            .rules
            .run(&self.vm, &self.storage, tx, FeeCredit::PerTransaction);
        self.storage.apply(effects.changes);
        self.gas_used = self.gas_used.saturating_add(effects.gas_used);
        effects.outcome
    }

    fn runs_blocks(&self) -> bool {
        true
    }

    fn execute_block(&mut self, block: &[BlockTx<'_>]) -> Vec<Outcome> {
        let result = self
            .blocks
            .run(&self.rules, &self.vm, &mut self.storage, block);
        self.gas_used = self.gas_used.saturating_add(result.gas_used);
        result.outcomes
    }

    fn block_stats(&self) -> BlockStats {
        self.blocks.stats()
    }

    fn balance(&self, address: &Address) -> Option<u64> {
        self.state.balance(&self.storage, address)
    }

    fn state_digest(&self) -> Digest {
        self.state.digest(&self.storage)
    }

    fn bank_holdings(&self) -> u128 {
        self.state.bank_holdings(&self.storage)
    }

    fn fees_collected(&self) -> u64 {
        self.balance(&FEE_ACCOUNT).unwrap_or(0)
    }

    fn gas_used(&self) -> u64 {
        self.gas_used
    }

    /// The Move storage (accounts, coins, the fee account) and the gas counter.
    fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        snapshot::encode(&(self.storage.snapshot()?, self.gas_used))
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        let (storage, gas_used): (Vec<u8>, u64) = snapshot::decode(bytes)?;
        self.storage.restore(&storage)?;
        self.gas_used = gas_used;
        Ok(())
    }
}
