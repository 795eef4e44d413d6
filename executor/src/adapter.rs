//! The adapter (`--vm=adapter`): the same Move VM as [`MoveExecutor`](crate::MoveExecutor),
//! behind what Diem's adapter (the DiemVM) puts around it. Per transaction, in one session:
//!
//! 1. the prologue (`Account::prologue`, Move, unmetered): the sequence number is the account's
//!    next one, the public key hashes to the account's authentication key, the balance covers
//!    max gas × gas price. A failure discards the transaction: nothing changes, nothing is paid,
//!    the sequence number stays (the ledger does not consume the nonce either);
//! 2. the payload, metered by [`Meter`] (Diem's gas schedule, `gas.rs`) after the intrinsic gas
//!    of the transaction's size, up to max gas;
//! 3. the epilogue (`Account::epilogue`, Move, unmetered): sequence number + 1, fee = gas used ×
//!    gas price, paid to [`FEE_ACCOUNT`]. Run as a block with fees credited per block
//!    ([`FeeCredit::Block`], the default), the epilogue only takes the fee out of the sender's
//!    coin (`Account::epilogue_deferring_fee`) and the block's fees reach the fee account
//!    together after its last transaction (`Account::credit_fees`).
//!
//! If the payload aborts or runs out of gas (or the epilogue fails after it, say the payload
//! spent the money for the fee), the session is dropped with all its effects and the epilogue
//! runs alone in a fresh one: the fee is charged and the sequence number consumed, as Diem does.
//! The prologue checked that the balance covers the largest fee, so that epilogue cannot fail.
//!
//! The rules ([`AdapterRules`]) run against any resolver and return their effects, so that the
//! parallel schemes (`parallel/`) run them too; [`AdapterExecutor`] holds the store and the VM.

use crate::executor::{BlockStats, BlockTx, Executor, FailReason, Outcome, RejectReason};
use crate::gas::{intrinsic_gas, Meter, INTERNAL_UNITS_PER_GAS};
use crate::genesis::Genesis;
use crate::move_calls::{fail_reason, Invocation, MoveCalls, Refusal};
use crate::move_genesis::genesis;
use crate::move_logic::{Effects, FeeCredit, TransactionLogic};
use crate::move_natives::{identifier, natives};
use crate::move_state::MoveState;
use crate::move_storage::InMemoryStorage;
use crate::move_vm::MoveError;
use crate::parallel::declared::{declare_adapter, declare_payload, Declared, DeclaredTypes};
use crate::parallel::{BlockRunner, ExecConfig};
use crate::snapshot::{self, SnapshotError};
use crate::transaction::{Address, Transaction, ADDRESS_LEN};
use crate::workload::Workload;
use crypto::{Digest, PublicKey};
use move_binary_format::errors::{Location, VMError};
use move_core_types::account_address::AccountAddress;
use move_core_types::effects::ChangeSet;
use move_core_types::identifier::Identifier;
use move_core_types::language_storage::{ModuleId, StructTag};
use move_core_types::resolver::MoveResolver;
use move_core_types::vm_status::StatusCode;
use move_vm_runtime::move_vm::MoveVM;
use move_vm_runtime::session::Session;
use move_vm_types::gas::{GasMeter, UnmeteredGasMeter};

/// Where fees go: an account with a coin and no key, so no transaction can spend from it.
pub const FEE_ACCOUNT: Address = Address(fee_account_bytes());

const fn fee_account_bytes() -> [u8; ADDRESS_LEN] {
    let mut bytes = [0u8; ADDRESS_LEN];
    bytes[ADDRESS_LEN - 2] = 0x0f;
    bytes[ADDRESS_LEN - 1] = 0xee;
    bytes
}

// The abort codes of `move/Account.move`'s prologue.
const ESEQUENCE_NUMBER_TOO_OLD: u64 = 1;
const ESEQUENCE_NUMBER_TOO_NEW: u64 = 2;
const EBAD_AUTHENTICATION_KEY: u64 = 3;
const ECANT_PAY_GAS_DEPOSIT: u64 = 4;

/// What a transaction may spend on gas, and what a gas unit costs. Chain-wide here (Diem's
/// transactions carry both; this testbed's wire format does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GasParameters {
    /// Max gas units per transaction.
    pub max_gas: u64,
    /// Coins per gas unit.
    pub gas_price: u64,
}

impl GasParameters {
    /// The largest fee a transaction can be charged: what the prologue requires the balance
    /// to cover.
    pub fn max_fee(&self) -> u64 {
        self.max_gas.saturating_mul(self.gas_price)
    }
}

impl Default for GasParameters {
    /// 1,000,000 gas units (Diem's default `max_gas_amount` for a transaction; its schedule's
    /// ceiling is 4,000,000) at one coin each.
    fn default() -> Self {
        GasParameters {
            max_gas: 1_000_000,
            gas_price: 1,
        }
    }
}

/// The functions the adapter calls by name, resolved once.
struct AccountFunctions {
    module: ModuleId,
    prologue: Identifier,
    epilogue: Identifier,
    epilogue_deferring_fee: Identifier,
    credit_fees: Identifier,
    sequence_number_tag: StructTag,
}

/// The adapter's rules for one transaction, over any state (see the module documentation).
pub(crate) struct AdapterRules {
    calls: MoveCalls,
    account: AccountFunctions,
    gas: GasParameters,
    /// The meter's limit in internal units: `max_gas` of `gas`, or finer in tests.
    meter_limit: u64,
    /// Off only to measure what metering costs (`without_gas_metering`).
    metered: bool,
}

pub struct AdapterExecutor {
    vm: MoveVM,
    storage: InMemoryStorage,
    rules: AdapterRules,
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
        let account = AccountFunctions {
            module: ModuleId::new(AccountAddress::ONE, identifier("Account")?),
            prologue: identifier("prologue")?,
            epilogue: identifier("epilogue")?,
            epilogue_deferring_fee: identifier("epilogue_deferring_fee")?,
            credit_fees: identifier("credit_fees")?,
            sequence_number_tag: StructTag {
                address: AccountAddress::ONE,
                module: identifier("Account")?,
                name: identifier("Account")?,
                type_params: vec![],
            },
        };
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
            rules: AdapterRules {
                calls: MoveCalls::new()?,
                account,
                gas,
                meter_limit: gas.max_gas.saturating_mul(INTERNAL_UNITS_PER_GAS),
                metered: true,
            },
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

// `VMError` is large, and it is what every call into the VM returns; these helpers pass it on as
// the VM gave it (boxing it would add an allocation to every failed transaction for nothing).
#[allow(clippy::result_large_err)]
impl AdapterRules {
    /// The epilogue alone, in a fresh session: the failed payload's effects are gone, the fee is
    /// charged and the sequence number consumed.
    fn charge_after_failure<S: MoveResolver>(
        &self,
        vm: &MoveVM,
        state: &S,
        sender: &Address,
        fee: u64,
        fees: FeeCredit,
        (reason, gas_used): (FailReason, u64),
    ) -> Effects {
        let mut session = vm.new_session(state);
        let charged = match self.epilogue(&mut session, sender, fee, fees) {
            Ok(()) => session.finish(),
            Err(error) => {
                drop(session);
                Err(error)
            }
        };
        match charged {
            Ok((changes, _events)) => Effects {
                outcome: Outcome::Failed(reason),
                changes,
                gas_used,
                deferred_fee: deferred(fee, fees),
            },
            // Unreachable while the prologue checks the balance against the largest fee; if it
            // happened, the Move sequence number would lag the ledger's nonce and the sender's
            // next transactions would be rejected as too new, which the counters would show.
            Err(error) => Effects {
                gas_used,
                ..Effects::failed(FailReason::Vm(format!(
                    "failure epilogue {:?}",
                    error.major_status()
                )))
            },
        }
    }

    // Prologue, payload and epilogue are kept out of line so that a profile (`--profile`)
    // splits the adapter's time between them by frame name.
    #[inline(never)]
    fn prologue<S: MoveResolver>(
        &self,
        session: &mut Session<'_, '_, S>,
        tx: &Transaction,
    ) -> Result<(), VMError> {
        let nonce = tx.nonce.to_le_bytes();
        let key = authentication_key_argument(&tx.public_key);
        let max_fee = self.gas.max_fee().to_le_bytes();
        session
            .execute_function_bypass_visibility(
                &self.account.module,
                &self.account.prologue,
                vec![],
                vec![&tx.sender.0[..], &nonce, &key, &max_fee],
                &mut UnmeteredGasMeter,
            )
            .map(|_| ())
    }

    #[inline(never)]
    fn epilogue<S: MoveResolver>(
        &self,
        session: &mut Session<'_, '_, S>,
        sender: &Address,
        fee: u64,
        fees: FeeCredit,
    ) -> Result<(), VMError> {
        let fee = fee.to_le_bytes();
        let (function, args) = match fees {
            FeeCredit::PerTransaction => (
                &self.account.epilogue,
                vec![&sender.0[..], &sender.0[..], &fee, &FEE_ACCOUNT.0[..]],
            ),
            FeeCredit::Block => (
                &self.account.epilogue_deferring_fee,
                vec![&sender.0[..], &sender.0[..], &fee],
            ),
        };
        session
            .execute_function_bypass_visibility(
                &self.account.module,
                function,
                vec![],
                args,
                &mut UnmeteredGasMeter,
            )
            .map(|_| ())
    }
}

// As above: the VM's errors pass through as it gave them.
#[allow(clippy::result_large_err)]
impl TransactionLogic for AdapterRules {
    fn run<S: MoveResolver>(
        &self,
        vm: &MoveVM,
        state: &S,
        tx: &Transaction,
        fees: FeeCredit,
    ) -> Effects {
        let invocation = match self.calls.resolve(&tx.payload, &tx.sender) {
            Ok(invocation) => invocation,
            Err(Refusal::WrongPayload) => return Effects::rejected(RejectReason::WrongPayload),
            Err(Refusal::ScriptNotAllowed) => {
                return Effects::rejected(RejectReason::ScriptNotAllowed)
            }
        };
        let mut session = vm.new_session(state);
        if let Err(error) = self.prologue(&mut session, tx) {
            return Effects::rejected(reject_reason(&error));
        }
        let mut meter = Meter::with_internal_limit(self.meter_limit);
        let ran = meter
            .charge(intrinsic_gas(tx.encoded_len()))
            .map_err(|e| e.finish(Location::Undefined))
            .and_then(|()| {
                if self.metered {
                    payload(&mut session, &invocation, &mut meter)
                } else {
                    payload(&mut session, &invocation, &mut UnmeteredGasMeter)
                }
            });
        let gas_used = meter.used();
        let fee = gas_used.saturating_mul(self.gas.gas_price);
        let result = match ran {
            Ok(()) => match self.epilogue(&mut session, &tx.sender, fee, fees) {
                Ok(()) => session.finish().map_err(|error| (error, true)),
                Err(error) => {
                    drop(session);
                    Err((error, true))
                }
            },
            Err(error) => {
                drop(session);
                Err((error, false))
            }
        };
        match result {
            Ok((changes, _events)) => Effects {
                outcome: Outcome::Executed,
                changes,
                gas_used,
                deferred_fee: deferred(fee, fees),
            },
            Err((error, in_epilogue)) => {
                let reason = if in_epilogue {
                    FailReason::Vm(format!("epilogue {:?}", error.major_status()))
                } else {
                    fail_reason(&error, || true)
                };
                self.charge_after_failure(vm, state, &tx.sender, fee, fees, (reason, gas_used))
            }
        }
    }

    /// The payload's sets, and the sender's `Account` and coin (prologue, epilogue).
    fn declare(&self, tx: &Transaction, types: &DeclaredTypes, fees: FeeCredit) -> Declared {
        let mut declared = declare_payload(tx, types);
        declare_adapter(tx, types, fees, &mut declared);
        declared
    }

    fn credit_fees<S: MoveResolver>(&self, vm: &MoveVM, state: &S, fees: u64) -> Option<ChangeSet> {
        let mut session = vm.new_session(state);
        let total = fees.to_le_bytes();
        session
            .execute_function_bypass_visibility(
                &self.account.module,
                &self.account.credit_fees,
                vec![],
                vec![&FEE_ACCOUNT.0[..], &total],
                &mut UnmeteredGasMeter,
            )
            .ok()?;
        // Only an overflow of the fee account's coin could fail the credit: out of reach (more
        // than 2^64 coins of fees). The audit's supply check would show it.
        session.finish().ok().map(|(changes, _events)| changes)
    }
}

/// The fee left for the end of the block under `fees`.
fn deferred(fee: u64, fees: FeeCredit) -> u64 {
    match fees {
        FeeCredit::Block => fee,
        FeeCredit::PerTransaction => 0,
    }
}

/// The payload, out of line so that a profile (`--profile`) shows it by name beside the
/// prologue and the epilogue.
#[inline(never)]
#[allow(clippy::result_large_err)]
fn payload<S: MoveResolver>(
    session: &mut Session<'_, '_, S>,
    invocation: &Invocation<'_>,
    meter: &mut impl GasMeter,
) -> Result<(), VMError> {
    invocation.run(session, meter)
}

/// The BCS encoding of the `vector<u8>` authentication key: SHA-256 of the public key, after its
/// length (one ULEB128 byte for 32).
fn authentication_key_argument(key: &PublicKey) -> Vec<u8> {
    let digest = Digest::of(&key.0);
    let mut bytes = Vec::with_capacity(1 + digest.0.len());
    bytes.push(digest.0.len() as u8);
    bytes.extend_from_slice(&digest.0);
    bytes
}

fn reject_reason(error: &VMError) -> RejectReason {
    match (error.major_status(), error.sub_status()) {
        (StatusCode::ABORTED, Some(ESEQUENCE_NUMBER_TOO_OLD)) => RejectReason::SequenceNumberTooOld,
        (StatusCode::ABORTED, Some(ESEQUENCE_NUMBER_TOO_NEW)) => RejectReason::SequenceNumberTooNew,
        (StatusCode::ABORTED, Some(EBAD_AUTHENTICATION_KEY)) => RejectReason::BadAuthenticationKey,
        (StatusCode::ABORTED, Some(ECANT_PAY_GAS_DEPOSIT)) => RejectReason::CantPayGasDeposit,
        (StatusCode::MISSING_DATA, _) => RejectReason::NoAccount,
        _ => RejectReason::PrologueError,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{DropReason, Ledger};
    use crate::transaction::Payload;
    use crate::MoveExecutor;
    use bytes::Bytes;
    use crypto::KeyPair;

    const BALANCE: u64 = 10_000_000;

    struct Fixture {
        ex: AdapterExecutor,
        keys: Vec<KeyPair>,
        addresses: Vec<Address>,
    }

    fn fixture(balances: &[u64], gas: GasParameters) -> Fixture {
        let keys: Vec<KeyPair> = (0..balances.len() as u64)
            .map(|i| KeyPair::from_seed(100 + i))
            .collect();
        let addresses = keys
            .iter()
            .map(|k| Address::from_public_key(&k.name))
            .collect();
        let ex = AdapterExecutor::new(
            keys.iter().map(|k| k.name).zip(balances.iter().copied()),
            gas,
        )
        .expect("genesis");
        Fixture {
            ex,
            keys,
            addresses,
        }
    }

    impl Fixture {
        fn transfer(&self, from: usize, nonce: u64, to: usize, amount: u64) -> Transaction {
            Transaction::unsigned(
                self.keys[from].name,
                nonce,
                Payload::Move {
                    script: MoveExecutor::transfer_script().expect("script"),
                    destination: self.addresses[to],
                    amount,
                },
            )
        }

        fn balance(&self, i: usize) -> u64 {
            self.ex.balance(&self.addresses[i]).expect("account")
        }

        fn sequence_number(&self, i: usize) -> u64 {
            self.ex
                .sequence_number(&self.addresses[i])
                .expect("account")
        }

        /// Balances plus fees: what no transaction may change.
        fn money(&self) -> u128 {
            (0..self.addresses.len())
                .map(|i| u128::from(self.balance(i)))
                .sum::<u128>()
                + u128::from(self.ex.fees_collected())
        }
    }

    #[test]
    fn a_transfer_pays_its_gas_and_consumes_its_sequence_number() {
        let gas = GasParameters {
            max_gas: 1_000,
            gas_price: 3,
        };
        let mut f = fixture(&[BALANCE, BALANCE], gas);
        assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
        let used = f.ex.gas_used();
        assert!(used > 0 && used < gas.max_gas, "{used}");
        let fee = used * gas.gas_price;
        assert_eq!(f.balance(0), BALANCE - 5 - fee);
        assert_eq!(f.balance(1), BALANCE + 5);
        assert_eq!(f.ex.fees_collected(), fee);
        assert_eq!(f.sequence_number(0), 1);
        assert_eq!(f.sequence_number(1), 0);
        assert_eq!(f.money(), 2 * u128::from(BALANCE));
        // The same transfer costs the same gas again.
        assert_eq!(f.ex.execute(&f.transfer(0, 1, 1, 5)), Outcome::Executed);
        assert_eq!(f.ex.gas_used(), 2 * used);
    }

    #[test]
    fn out_of_gas_discards_the_payload_charges_the_fee_and_consumes_the_sequence_number() {
        let gas = GasParameters {
            max_gas: 1_000,
            gas_price: 2,
        };
        let mut f = fixture(&[BALANCE, BALANCE], gas);
        assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
        // What the transfer needs, in internal units (the meter counts those): the fee of the
        // first transfer, in gas units, bounds it from above.
        let needed = f.ex.gas_used() * INTERNAL_UNITS_PER_GAS;
        // Stop the same transfer at every instruction boundary below what it needs: every cut,
        // including the ones after the debit of the sender and before the credit, must leave
        // both balances as they were but for the fee of the gas used (all of it).
        let mut nonce = 1;
        let mut stopped = 0;
        for limit in (0..needed).step_by(3) {
            let (before_sender, before_receiver) = (f.balance(0), f.balance(1));
            let fees = f.ex.fees_collected();
            f.ex.rules.meter_limit = limit;
            let outcome = f.ex.execute(&f.transfer(0, nonce, 1, 5));
            nonce += 1;
            if outcome == Outcome::Executed {
                // The first transfer paid for whole gas units: the last few hundred internal
                // units below that bound are enough.
                assert!(
                    limit > needed - INTERNAL_UNITS_PER_GAS,
                    "{limit} of {needed}"
                );
                break;
            }
            assert_eq!(
                outcome,
                Outcome::Failed(FailReason::OutOfGas),
                "limit {limit}"
            );
            stopped += 1;
            let fee = limit.div_ceil(INTERNAL_UNITS_PER_GAS) * gas.gas_price;
            assert_eq!(f.balance(0), before_sender - fee, "limit {limit}");
            assert_eq!(f.balance(1), before_receiver, "limit {limit}");
            assert_eq!(f.ex.fees_collected(), fees + fee);
            assert_eq!(f.sequence_number(0), nonce);
        }
        assert!(stopped > 1_000, "{stopped}");
        assert_eq!(f.money(), 2 * u128::from(BALANCE));
    }

    #[test]
    fn an_abort_charges_the_fee_and_keeps_the_sequence_going() {
        let gas = GasParameters {
            max_gas: 100,
            gas_price: 1,
        };
        let mut f = fixture(&[1_000, 50], gas);
        assert_eq!(
            f.ex.execute(&f.transfer(0, 0, 1, 1_001)),
            Outcome::Failed(FailReason::InsufficientBalance)
        );
        let fee = f.ex.gas_used();
        assert!(fee > 0);
        assert_eq!(f.balance(0), 1_000 - fee);
        assert_eq!(f.balance(1), 50);
        assert_eq!(f.sequence_number(0), 1);
        // The payload may spend what the fee needs: then the epilogue fails, the payload is
        // discarded and the fee charged from the balance the prologue checked.
        let all = f.balance(0);
        let outcome = f.ex.execute(&f.transfer(0, 1, 1, all));
        assert!(
            matches!(&outcome, Outcome::Failed(FailReason::Vm(s)) if s.starts_with("epilogue")),
            "{outcome:?}"
        );
        assert_eq!(f.balance(1), 50);
        assert_eq!(f.sequence_number(0), 2);
        assert_eq!(f.money(), 1_050);
    }

    #[test]
    fn the_prologue_rejects_replays_gaps_foreign_keys_and_senders_who_cannot_pay() {
        let gas = GasParameters {
            max_gas: 1_000,
            gas_price: 10,
        };
        // Account 2 holds less than max gas × price.
        let mut f = fixture(&[BALANCE, BALANCE, gas.max_fee() - 1], gas);
        assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
        let digest = f.ex.state_digest();
        let used = f.ex.gas_used();
        let rejected = [
            (f.transfer(0, 0, 1, 5), RejectReason::SequenceNumberTooOld),
            (f.transfer(0, 7, 1, 5), RejectReason::SequenceNumberTooNew),
            (f.transfer(2, 0, 1, 5), RejectReason::CantPayGasDeposit),
        ];
        for (tx, reason) in rejected {
            assert_eq!(f.ex.execute(&tx), Outcome::Rejected(reason));
        }
        // Signed with another key for account 0's address.
        let mut foreign = f.transfer(0, 1, 1, 5);
        foreign.public_key = f.keys[1].name;
        assert_eq!(
            f.ex.execute(&foreign),
            Outcome::Rejected(RejectReason::BadAuthenticationKey)
        );
        let stranger = KeyPair::from_seed(7);
        let mut unknown = f.transfer(0, 0, 1, 5);
        unknown.public_key = stranger.name;
        unknown.sender = Address::from_public_key(&stranger.name);
        assert_eq!(
            f.ex.execute(&unknown),
            Outcome::Rejected(RejectReason::NoAccount)
        );
        // Nothing rejected changed anything: no fee, no sequence number, no gas.
        assert_eq!(f.ex.state_digest(), digest);
        assert_eq!(f.ex.gas_used(), used);
        assert_eq!(f.sequence_number(0), 1);
        assert_eq!(f.sequence_number(2), 0);
    }

    #[test]
    fn through_the_ledger_a_rejected_nonce_is_not_consumed() {
        let gas = GasParameters {
            max_gas: 1_000,
            gas_price: 1,
        };
        let f = fixture(&[BALANCE, gas.max_fee() - 1], gas);
        let keys: Vec<_> = f.keys.iter().map(|k| k.name).collect();
        let txs = [
            f.transfer(1, 0, 0, 1),
            f.transfer(1, 1, 0, 1),
            f.transfer(0, 0, 1, 100),
            f.transfer(0, 0, 1, 100),
            f.transfer(1, 0, 0, 1),
        ];
        let mut ledger = Ledger::new(f.ex, keys, 10);
        // Account 1 cannot pay for gas: nonce 0 is rejected, nonce 1 waits behind it.
        assert_eq!(ledger.apply(txs[0].clone()), Ok(vec![]));
        assert_eq!(ledger.apply(txs[1].clone()), Ok(vec![]));
        assert_eq!(ledger.next_nonce(&f.addresses[1]), Some(0));
        let stats = *ledger.stats();
        let rejected = DropReason::Rejected(RejectReason::CantPayGasDeposit);
        assert_eq!(stats.dropped.get(rejected), 1);
        assert_eq!(stats.backlog, 1);
        // Once funded, nonce 0 sent again runs, and unblocks nonce 1.
        assert_eq!(ledger.apply(txs[2].clone()).expect("apply").len(), 1);
        // A replay never reaches the prologue: the ledger drops it first.
        assert_eq!(ledger.apply(txs[3].clone()), Err(DropReason::StaleNonce));
        let done = ledger.apply(txs[4].clone()).expect("apply");
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|c| c.outcome == Outcome::Executed));
        for address in &f.addresses {
            assert_eq!(
                ledger.next_nonce(address),
                ledger.executor().sequence_number(address)
            );
        }
    }

    #[test]
    fn an_entry_function_call_runs_under_the_same_prologue_gas_and_epilogue() {
        let gas = GasParameters::default();
        let mut f = fixture(&[BALANCE, BALANCE], gas);
        let mut tx = f.transfer(0, 0, 1, 5);
        tx.payload = Payload::MoveEntry {
            destination: f.addresses[1],
            amount: 5,
        };
        assert_eq!(f.ex.execute(&tx), Outcome::Executed);
        let fee = f.ex.gas_used();
        assert!(fee > 1, "the payload is metered: {fee}");
        assert_eq!(f.balance(0), BALANCE - 5 - fee);
        assert_eq!(f.balance(1), BALANCE + 5);
        assert_eq!(f.sequence_number(0), 1);
        assert_eq!(
            f.ex.execute(&tx),
            Outcome::Rejected(RejectReason::SequenceNumberTooOld)
        );
    }

    #[test]
    fn without_metering_only_the_intrinsic_gas_is_charged() {
        let gas = GasParameters::default();
        let mut f = fixture(&[BALANCE, BALANCE], gas);
        f.ex = f.ex.without_gas_metering();
        assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
        // 600 internal units: one started gas unit.
        assert_eq!(f.ex.gas_used(), 1);
        assert_eq!(f.balance(0), BALANCE - 5 - 1);
    }

    #[test]
    fn other_payloads_are_rejected_without_a_fee() {
        let mut f = fixture(&[BALANCE, BALANCE], GasParameters::default());
        let mut tx = f.transfer(0, 0, 1, 1);
        tx.payload = Payload::Move {
            script: Bytes::from_static(b"not a script"),
            destination: f.addresses[1],
            amount: 1,
        };
        assert_eq!(
            f.ex.execute(&tx),
            Outcome::Rejected(RejectReason::ScriptNotAllowed)
        );
        tx.payload = Payload::Native {
            destination: f.addresses[1],
            amount: 1,
        };
        assert_eq!(
            f.ex.execute(&tx),
            Outcome::Rejected(RejectReason::WrongPayload)
        );
        assert_eq!(f.ex.fees_collected(), 0);
        assert_eq!(f.sequence_number(0), 0);
    }
}
