//! The bare Move executor (`--vm=bare`): the modules published at genesis, one VM for the life of
//! the executor (its loader caches the modules and, by hash, the scripts), and a fresh session per
//! transaction, unmetered, whose change set is applied to the in-memory store. The rules of one
//! transaction ([`BareRules`]) run against any resolver, so the parallel schemes run them too.

use crate::executor::{BlockStats, BlockTx, Executor, FailReason, Outcome};
use crate::genesis::Genesis;
use crate::move_vm::calls::{fail_reason, MoveCalls, Refusal};
use crate::move_vm::compile::{CompiledMove, MoveCompileError};
use crate::move_vm::declared::{declare_payload, Declared, DeclaredTypes};
use crate::move_vm::error::MoveError;
use crate::move_vm::genesis::genesis;
use crate::move_vm::logic::{Effects, FeeCredit, TransactionLogic};
use crate::move_vm::natives::natives;
use crate::move_vm::state::MoveState;
use crate::move_vm::storage::InMemoryStorage;
use crate::parallel::{BlockRunner, ExecConfig};
use crate::snapshot::SnapshotError;
use crate::transaction::{Address, Transaction};
use crate::workload::Workload;
use bytes::Bytes;
use crypto::Digest;
use move_binary_format::errors::VMError;
use move_core_types::account_address::AccountAddress;
use move_core_types::effects::ChangeSet;
use move_core_types::language_storage::StructTag;
use move_core_types::resolver::MoveResolver;
use move_vm_runtime::move_vm::MoveVM;
use move_vm_types::gas::UnmeteredGasMeter;

/// The bare VM's rules for one transaction: the call in a session, unmetered, no fees.
pub(crate) struct BareRules {
    calls: MoveCalls,
    coin: StructTag,
}

pub struct MoveExecutor {
    vm: MoveVM,
    storage: InMemoryStorage,
    rules: BareRules,
    state: MoveState,
    blocks: BlockRunner,
}

impl MoveExecutor {
    /// The compiled `transfer.move` that clients put in every Move transfer.
    pub fn transfer_script() -> Result<Bytes, MoveCompileError> {
        // Static bytes: cloning them touches no reference count, so the transactions a generator
        // thread builds and the executor thread drops share no cache line.
        Ok(Bytes::from_static(&CompiledMove::get()?.transfer_script))
    }

    /// The executor of the transfer workload.
    pub fn from_genesis(genesis: &Genesis) -> Result<Self, MoveError> {
        Self::from_genesis_for(genesis, Workload::Transfer)
    }

    pub fn from_genesis_for(genesis: &Genesis, workload: Workload) -> Result<Self, MoveError> {
        Self::with_workload(
            genesis
                .balances()
                .map(|(address, _, balance)| (address, balance)),
            workload,
        )
    }

    /// [`Self::with_workload`] for the transfer.
    pub fn new(accounts: impl IntoIterator<Item = (Address, u64)>) -> Result<Self, MoveError> {
        Self::with_workload(accounts, Workload::Transfer)
    }

    /// Publishes the modules under `0x1` and gives every account its coin (and the workload's
    /// genesis state), all in one session. Fails on a duplicate account (the second `move_to`
    /// aborts).
    pub fn with_workload(
        accounts: impl IntoIterator<Item = (Address, u64)>,
        workload: Workload,
    ) -> Result<Self, MoveError> {
        let vm = MoveVM::new(natives()?).map_err(|e| MoveError::Vm(format!("{e:?}")))?;
        let storage = genesis(&vm, workload, |genesis| {
            genesis.publish()?;
            for (address, balance) in accounts {
                genesis.open_account(address, balance)?;
            }
            Ok(())
        })?;
        let state = MoveState::new()?;
        Ok(MoveExecutor {
            vm,
            storage,
            rules: BareRules {
                calls: MoveCalls::new()?,
                coin: state.coin_tag().clone(),
            },
            state,
            blocks: BlockRunner::new(ExecConfig::default())?,
        })
    }

    /// How blocks run ([`ExecConfig`]: the scheme and its threads; the bare VM has no fees).
    pub fn with_execution(mut self, config: ExecConfig) -> Result<Self, MoveError> {
        self.blocks = BlockRunner::new(config)?;
        Ok(self)
    }

    /// The transfer script this executor accepts.
    pub fn script(&self) -> Bytes {
        Bytes::from_static(self.rules.calls.transfer_script())
    }

    pub fn storage(&self) -> &InMemoryStorage {
        &self.storage
    }

    /// `(checking, savings)` of `address`'s SmallBank account (`--workload=smallbank`).
    pub fn bank_account(&self, address: &Address) -> Option<(u64, u64)> {
        self.state.bank_account(&self.storage, address)
    }
}

impl BareRules {
    fn fail_reason<S: MoveResolver>(
        &self,
        error: &VMError,
        state: &S,
        sender: &Address,
    ) -> FailReason {
        fail_reason(error, || {
            state
                .get_resource(&AccountAddress::new(sender.0), &self.coin)
                .is_ok_and(|coin| coin.is_some())
        })
    }
}

impl TransactionLogic for BareRules {
    fn run<S: MoveResolver>(
        &self,
        vm: &MoveVM,
        state: &S,
        tx: &Transaction,
        _: FeeCredit,
    ) -> Effects {
        let invocation = match self.calls.resolve(&tx.payload, &tx.sender) {
            Ok(invocation) => invocation,
            Err(Refusal::WrongPayload) => return Effects::failed(FailReason::WrongPayload),
            Err(Refusal::ScriptNotAllowed) => return Effects::failed(FailReason::ScriptNotAllowed),
        };
        if invocation
            .call
            .is_some_and(|call| !call.within_unmetered_bounds())
        {
            return Effects::failed(FailReason::Unbounded);
        }
        let mut session = vm.new_session(state);
        if let Err(error) = invocation.run(&mut session, &mut UnmeteredGasMeter) {
            drop(session);
            return Effects::failed(self.fail_reason(&error, state, &tx.sender));
        }
        match session.finish() {
            Ok((changes, _events)) => Effects {
                changes,
                ..Effects::unchanged(Outcome::Executed)
            },
            Err(error) => Effects::failed(self.fail_reason(&error, state, &tx.sender)),
        }
    }

    fn declare(&self, tx: &Transaction, types: &DeclaredTypes, _: FeeCredit) -> Declared {
        declare_payload(tx, types)
    }

    /// The bare VM charges nothing.
    fn credit_fees<S: MoveResolver>(&self, _: &MoveVM, _: &S, _: u64) -> Option<ChangeSet> {
        None
    }
}

impl Executor for MoveExecutor {
    fn execute(&mut self, tx: &Transaction) -> Outcome {
        let effects = self
            .rules
            .run(&self.vm, &self.storage, tx, FeeCredit::PerTransaction);
        self.storage.apply(effects.changes);
        effects.outcome
    }

    fn runs_blocks(&self) -> bool {
        true
    }

    fn execute_block(&mut self, block: &[BlockTx<'_>]) -> Vec<Outcome> {
        self.blocks
            .run(&self.rules, &self.vm, &mut self.storage, block)
            .outcomes
    }

    fn block_stats(&self) -> BlockStats {
        self.blocks.stats()
    }

    fn balance(&self, address: &Address) -> Option<u64> {
        self.state.balance(&self.storage, address)
    }

    fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        self.storage.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotError> {
        self.storage.restore(snapshot)
    }

    fn state_digest(&self) -> Digest {
        self.state.digest(&self.storage)
    }

    fn bank_holdings(&self) -> u128 {
        self.state.bank_holdings(&self.storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transaction::{Payload, ADDRESS_LEN};
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
        use move_core_types::account_address::AccountAddress;
        use move_core_types::value::MoveValue;
        let address = Address([3; ADDRESS_LEN]);
        let signer = MoveValue::Signer(AccountAddress::new(address.0)).simple_serialize();
        let target = MoveValue::Address(AccountAddress::new(address.0)).simple_serialize();
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
