//! What a Move transaction asks the VM to run, shared by both executors: the payload resolved to
//! a script or an entry function with its arguments ([`Invocation`]), run in a session under a
//! gas meter, and the reason a run failed, from the VM's error.

use super::compile::CompiledMove;
use super::error::MoveError;
use super::functions::{Args, Function};
use super::natives::identifier;
use crate::executor::FailReason;
use crate::transaction::{Address, Call, Payload};
use move_binary_format::errors::{Location, VMError};
use move_core_types::account_address::AccountAddress;
use move_core_types::identifier::Identifier;
use move_core_types::language_storage::ModuleId;
use move_core_types::resolver::MoveResolver;
use move_core_types::vm_status::StatusCode;
use move_vm_runtime::session::Session;
use move_vm_types::gas::GasMeter;

/// Why a payload is not run at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A native transfer.
    WrongPayload,
    /// A script that is not the one its call (or the transfer) compiles to: running arbitrary
    /// scripts is not what this testbed measures, and the bare VM could not bound them.
    ScriptNotAllowed,
}

/// An entry function, resolved once.
struct EntryFunction {
    module: ModuleId,
    function: Identifier,
}

impl EntryFunction {
    fn new(module: &str, function: &str) -> Result<Self, MoveError> {
        Ok(EntryFunction {
            module: ModuleId::new(AccountAddress::ONE, identifier(module)?),
            function: identifier(function)?,
        })
    }
}

/// Every script and entry function a transaction may call.
pub(crate) struct MoveCalls {
    transfer_script: &'static [u8],
    transfer_entry: EntryFunction,
    /// In [`Function::ALL`] order, as the next.
    scripts: Vec<&'static [u8]>,
    entries: Vec<EntryFunction>,
}

/// How the call enters the VM.
enum Target<'a> {
    Script(&'a [u8]),
    Entry(&'a EntryFunction),
}

/// A call ready to run: its target and its arguments, the sender's signer first.
pub(crate) struct Invocation<'a> {
    target: Target<'a>,
    args: Args,
    /// The workload call, `None` for the transfer.
    pub(crate) call: Option<&'a Call>,
}

impl MoveCalls {
    pub(crate) fn new() -> Result<Self, MoveError> {
        let compiled = CompiledMove::get()?;
        let mut scripts = Vec::with_capacity(Function::ALL.len());
        let mut entries = Vec::with_capacity(Function::ALL.len());
        for function in Function::ALL {
            let (module, entry, script) = function.names();
            entries.push(EntryFunction::new(module, entry)?);
            let bytes = compiled.workload_scripts.get(script).ok_or_else(|| {
                MoveError::Publish(format!("the workload script {script} is missing"))
            })?;
            scripts.push(&bytes[..]);
        }
        Ok(MoveCalls {
            transfer_script: &compiled.transfer_script,
            transfer_entry: EntryFunction::new("Coin", "transfer_entry")?,
            scripts,
            entries,
        })
    }

    /// The transfer script (what `Payload::Move` must carry).
    pub(crate) fn transfer_script(&self) -> &'static [u8] {
        self.transfer_script
    }

    /// What `payload` runs for `sender`.
    pub(crate) fn resolve<'a>(
        &'a self,
        payload: &'a Payload,
        sender: &Address,
    ) -> Result<Invocation<'a>, Refusal> {
        let mut args = Args::new();
        args.push(&sender.0);
        let (target, call) = match payload {
            Payload::Move {
                script,
                destination,
                amount,
            } => {
                if script[..] != *self.transfer_script {
                    return Err(Refusal::ScriptNotAllowed);
                }
                args.push(&destination.0);
                args.push(&amount.to_le_bytes());
                (Target::Script(self.transfer_script), None)
            }
            Payload::MoveEntry {
                destination,
                amount,
            } => {
                args.push(&destination.0);
                args.push(&amount.to_le_bytes());
                (Target::Entry(&self.transfer_entry), None)
            }
            Payload::WorkloadScript { script, call } => {
                let expected = self.scripts[call.function().index()];
                if script[..] != *expected {
                    return Err(Refusal::ScriptNotAllowed);
                }
                call.write_args(&mut args);
                (Target::Script(expected), Some(call))
            }
            Payload::WorkloadEntry { call } => {
                call.write_args(&mut args);
                let entry = &self.entries[call.function().index()];
                (Target::Entry(entry), Some(call))
            }
            Payload::Native { .. } => return Err(Refusal::WrongPayload),
        };
        Ok(Invocation { target, args, call })
    }
}

impl Invocation<'_> {
    /// Runs the call in `session`, charging `meter`.
    // `VMError` is large, and it is what the VM returns; boxing it would add an allocation to
    // every failed transaction for nothing.
    #[allow(clippy::result_large_err)]
    pub(crate) fn run<S: MoveResolver>(
        &self,
        session: &mut Session<'_, '_, S>,
        meter: &mut impl GasMeter,
    ) -> Result<(), VMError> {
        let args = self.args.slices();
        match &self.target {
            Target::Script(script) => session.execute_script(*script, vec![], args, meter),
            Target::Entry(entry) => {
                session.execute_entry_function(&entry.module, &entry.function, vec![], args, meter)
            }
        }
        .map(|_| ())
    }
}

// The abort codes of `executor/move/`, all 1, told apart by the module that aborted.
const ABORT: u64 = 1;

/// Why a call failed, from the VM's error. `sender_has_coin` tells, for a transfer, which of the
/// two accounts was missing; it is asked only then (it reads the state, and a parallel scheme
/// tracks every read).
pub(crate) fn fail_reason(error: &VMError, sender_has_coin: impl Fn() -> bool) -> FailReason {
    let module = match error.location() {
        Location::Module(id) => Some(id.name().as_str()),
        _ => None,
    };
    match (error.major_status(), error.sub_status(), module) {
        (StatusCode::ABORTED, Some(ABORT), Some("Coin")) => FailReason::InsufficientBalance,
        (StatusCode::ABORTED, Some(ABORT), Some("SmallBank")) => FailReason::InsufficientFunds,
        (StatusCode::ABORTED, Some(ABORT), Some("CpuHeavy" | "KvStore")) => {
            FailReason::InvariantViolated
        }
        // `transfer` borrows the sender's coin first: if that one exists, the destination's
        // is the one missing.
        (StatusCode::MISSING_DATA, _, _) if !sender_has_coin() => FailReason::UnknownSender,
        (StatusCode::MISSING_DATA, _, _) => FailReason::UnknownDestination,
        (StatusCode::ARITHMETIC_ERROR, _, _) => FailReason::Overflow,
        (StatusCode::OUT_OF_GAS, _, _) => FailReason::OutOfGas,
        (status, Some(code), _) => FailReason::Vm(format!("{status:?}({code})")),
        (status, None, _) => FailReason::Vm(format!("{status:?}")),
    }
}
