//! The Move function each workload [`Call`] runs (an entry function in `executor/move/`, and the
//! script that calls it), and its arguments in the layout the VM reads.

use super::compile::{CompiledMove, MoveCompileError};
use crate::transaction::{Call, Procedure};
use bytes::Bytes;

/// The Move function a [`Call`] runs: an entry function, and the script that calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Function {
    DoNothing,
    CpuHeavy,
    KvStore,
    Amalgamate,
    Balance,
    DepositChecking,
    SendPayment,
    TransactSavings,
    WriteCheck,
}

impl Function {
    pub(crate) const ALL: [Function; 9] = [
        Function::DoNothing,
        Function::CpuHeavy,
        Function::KvStore,
        Function::Amalgamate,
        Function::Balance,
        Function::DepositChecking,
        Function::SendPayment,
        Function::TransactSavings,
        Function::WriteCheck,
    ];

    /// `(module, entry function, script function)`: the names in `executor/move/`.
    pub(crate) fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Function::DoNothing => ("DoNothing", "do_nothing", "do_nothing"),
            Function::CpuHeavy => ("CpuHeavy", "sort", "cpu_heavy"),
            Function::KvStore => ("KvStore", "write_read", "kv_store"),
            Function::Amalgamate => ("SmallBank", "amalgamate", "amalgamate"),
            Function::Balance => ("SmallBank", "balance", "get_balance"),
            Function::DepositChecking => ("SmallBank", "deposit_checking", "deposit_checking"),
            Function::SendPayment => ("SmallBank", "send_payment", "send_payment"),
            Function::TransactSavings => ("SmallBank", "transact_savings", "transact_savings"),
            Function::WriteCheck => ("SmallBank", "write_check", "write_check"),
        }
    }

    pub(crate) fn script(self) -> Result<Bytes, MoveCompileError> {
        let (_, _, name) = self.names();
        CompiledMove::get()?
            .workload_scripts
            .get(name)
            .map(|bytes| Bytes::from_static(bytes))
            .ok_or_else(|| MoveCompileError::UnexpectedUnits(format!("no script {name}")))
    }

    /// Index into tables of [`Function::ALL`] order.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl Call {
    pub(crate) fn function(&self) -> Function {
        match self {
            Call::DoNothing => Function::DoNothing,
            Call::CpuHeavy { .. } => Function::CpuHeavy,
            Call::KvStore { .. } => Function::KvStore,
            Call::SmallBank(procedure) => match procedure {
                Procedure::Amalgamate { .. } => Function::Amalgamate,
                Procedure::Balance => Function::Balance,
                Procedure::DepositChecking { .. } => Function::DepositChecking,
                Procedure::SendPayment { .. } => Function::SendPayment,
                Procedure::TransactSavings { .. } => Function::TransactSavings,
                Procedure::WriteCheck { .. } => Function::WriteCheck,
            },
        }
    }

    /// The compiled script that makes this call (`--payload=script`).
    pub fn script(&self) -> Result<Bytes, MoveCompileError> {
        self.function().script()
    }

    /// The arguments after the signer, in the layout the VM deserializes (BCS: an address is its
    /// bytes, a u64 little endian), written into `args`.
    pub(crate) fn write_args(&self, args: &mut Args) {
        match self {
            Call::DoNothing | Call::SmallBank(Procedure::Balance) => {}
            Call::CpuHeavy { length } => args.push(&length.to_le_bytes()),
            Call::KvStore {
                first_key,
                keys,
                value_size,
                version,
            } => {
                for value in [first_key, keys, value_size, version] {
                    args.push(&value.to_le_bytes());
                }
            }
            Call::SmallBank(Procedure::Amalgamate { to }) => args.push(&to.0),
            Call::SmallBank(Procedure::SendPayment { to, amount }) => {
                args.push(&to.0);
                args.push(&amount.to_le_bytes());
            }
            Call::SmallBank(
                Procedure::DepositChecking { amount }
                | Procedure::TransactSavings { amount }
                | Procedure::WriteCheck { amount },
            ) => args.push(&amount.to_le_bytes()),
        }
    }
}

/// A call's arguments, BCS-encoded one after the other in a buffer on the stack: the VM takes
/// them as separate byte strings, and one allocation per argument per transaction would show in
/// the small calls.
pub(crate) struct Args {
    bytes: [u8; Args::CAPACITY],
    ends: [usize; Args::MAX],
    count: usize,
}

impl Args {
    /// The largest argument list: the signer and four u64 (kvstore).
    const CAPACITY: usize = 64;
    const MAX: usize = 6;

    pub(crate) fn new() -> Self {
        Args {
            bytes: [0; Args::CAPACITY],
            ends: [0; Args::MAX],
            count: 0,
        }
    }

    /// Appends one argument. The calls above never exceed the capacity; a test checks the
    /// largest.
    pub(crate) fn push(&mut self, arg: &[u8]) {
        let start = self.count.checked_sub(1).map_or(0, |i| self.ends[i]);
        let end = start + arg.len();
        self.bytes[start..end].copy_from_slice(arg);
        self.ends[self.count] = end;
        self.count += 1;
    }

    pub(crate) fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends[..self.count]
            .iter()
            .map(|&end| {
                let slice = &self.bytes[start..end];
                start = end;
                slice
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_argument_list_fits() {
        let mut args = Args::new();
        args.push(&[7; crate::transaction::ADDRESS_LEN]);
        Call::KvStore {
            first_key: 1,
            keys: 2,
            value_size: 3,
            version: 4,
        }
        .write_args(&mut args);
        let slices = args.slices();
        assert_eq!(slices.len(), 5);
        assert_eq!(slices[0], &[7; crate::transaction::ADDRESS_LEN]);
        assert_eq!(slices[4], &4u64.to_le_bytes());
    }
}
