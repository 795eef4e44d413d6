//! The adapter's rules for one transaction over any state: prologue, metered payload and
//! epilogue in one session, the epilogue alone after a failure, the block's fees credited at its
//! end, and what a transaction declares it touches (the module documentation tells the rules).

use crate::executor::{FailReason, Outcome, RejectReason};
use crate::move_vm::calls::{fail_reason, Invocation, MoveCalls, Refusal};
use crate::move_vm::declared::{declare_payload, Declared, DeclaredTypes};
use crate::move_vm::error::MoveError;
use crate::move_vm::gas::{intrinsic_gas, Meter, INTERNAL_UNITS_PER_GAS};
use crate::move_vm::logic::{Effects, FeeCredit, TransactionLogic};
use crate::move_vm::natives::identifier;
use crate::transaction::{Address, Transaction, ADDRESS_LEN};
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
pub(super) struct AccountFunctions {
    module: ModuleId,
    prologue: Identifier,
    epilogue: Identifier,
    epilogue_deferring_fee: Identifier,
    credit_fees: Identifier,
    pub(super) sequence_number_tag: StructTag,
}

/// The adapter's rules for one transaction, over any state (see the module documentation).
pub(super) struct AdapterRules {
    calls: MoveCalls,
    pub(super) account: AccountFunctions,
    pub(super) gas: GasParameters,
    /// The meter's limit in internal units: `max_gas` of `gas`, or finer in tests.
    pub(super) meter_limit: u64,
    /// Off only to measure what metering costs (`without_gas_metering`).
    pub(super) metered: bool,
}

impl AccountFunctions {
    pub(super) fn new() -> Result<Self, MoveError> {
        Ok(AccountFunctions {
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
        })
    }
}

impl AdapterRules {
    /// The rules under `gas`, metered, calling `account`'s functions.
    pub(super) fn new(account: AccountFunctions, gas: GasParameters) -> Result<Self, MoveError> {
        Ok(AdapterRules {
            calls: MoveCalls::new()?,
            account,
            gas,
            meter_limit: gas.max_gas.saturating_mul(INTERNAL_UNITS_PER_GAS),
            metered: true,
        })
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
pub(super) fn authentication_key_argument(key: &PublicKey) -> Vec<u8> {
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

/// What the adapter adds around the payload: prologue and epilogue on the sender's `Account`
/// and coin, and the fee account's coin when each transaction credits it.
fn declare_adapter(
    tx: &Transaction,
    types: &DeclaredTypes,
    fees: FeeCredit,
    declared: &mut Declared,
) {
    declared
        .writes
        .extend([types.account(&tx.sender), types.coin(&tx.sender)]);
    if fees == FeeCredit::PerTransaction {
        declared.writes.push(types.coin(&FEE_ACCOUNT));
    }
}
