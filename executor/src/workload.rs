//! The workloads (`--workload`): what a run's Move transactions call, after Blockbench's suite
//! (DoNothing, CPUHeavy, KVStore/IOHeavy, SmallBank) beside the transfer, and how a load
//! generator picks each transaction's call. The Move side is in `executor/move/`; the client and
//! the standalone `movevm` generator both build their transactions with [`Load`], so the two
//! modes send the same calls.

use crate::move_compile::{CompiledMove, MoveCompileError};
use crate::transaction::{Address, Payload};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Workload {
    /// `Coin::transfer` of 1 to the next account (the payloads `Move`/`MoveEntry`).
    #[default]
    Transfer,
    /// `DoNothing::do_nothing`.
    DoNothing,
    /// `CpuHeavy::sort` of `--workload-arg` numbers.
    CpuHeavy,
    /// `KvStore::write_read` of `--workload-arg` keys of [`KV_VALUE_SIZE`] bytes.
    KvStore,
    /// One of SmallBank's six procedures, uniformly at random (Blockbench's default mix).
    SmallBank,
}

/// Bytes per value of the kvstore workload (Blockbench's KVStore writes short values; YCSB's
/// fields are 100 bytes, this keeps a 4-key transaction's values under a cache line each).
pub const KV_VALUE_SIZE: u64 = 32;
/// Keys per account the kvstore workload cycles through: a transaction with nonce n writes keys
/// `n × K mod KV_KEYSPACE` on, so the store stops growing once every account went round it.
/// Small on purpose: the executor stage digests the whole state twice a second, and at 10,000
/// accounts a larger keyspace would make the digest, not the transactions, the stage's work.
pub const KV_KEYSPACE: u64 = 64;
/// The largest SmallBank amount; each transaction moves 1 to this many coins.
const SMALLBANK_MAX_AMOUNT: u64 = 10;

impl Workload {
    pub const ALL: [Workload; 5] = [
        Workload::Transfer,
        Workload::DoNothing,
        Workload::CpuHeavy,
        Workload::KvStore,
        Workload::SmallBank,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Workload::Transfer => "transfer",
            Workload::DoNothing => "donothing",
            Workload::CpuHeavy => "cpuheavy",
            Workload::KvStore => "kvstore",
            Workload::SmallBank => "smallbank",
        }
    }

    /// What `--workload-arg` means when not given: 128 numbers to sort (cpuheavy), 4 keys
    /// (kvstore); the other workloads take none.
    pub fn default_arg(&self) -> u64 {
        match self {
            Workload::CpuHeavy => 128,
            Workload::KvStore => 4,
            Workload::Transfer | Workload::DoNothing | Workload::SmallBank => 0,
        }
    }

    /// Whether `--workload-arg` means anything for this workload.
    pub fn takes_arg(&self) -> bool {
        matches!(self, Workload::CpuHeavy | Workload::KvStore)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Workload::ALL
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Workload::ALL.iter().map(Workload::as_str).collect();
                format!(
                    "unknown workload {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A workload's call and its arguments; the signer, always the sender, is implicit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Call {
    DoNothing,
    CpuHeavy {
        length: u64,
    },
    KvStore {
        first_key: u64,
        keys: u64,
        value_size: u64,
        version: u64,
    },
    SmallBank(Procedure),
}

/// SmallBank's six procedures; the signer is the account that pays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Procedure {
    Amalgamate { to: Address },
    Balance,
    DepositChecking { amount: u64 },
    SendPayment { to: Address, amount: u64 },
    TransactSavings { amount: u64 },
    WriteCheck { amount: u64 },
}

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

/// The largest calls the bare VM runs: it meters nothing, so without a bound one transaction
/// could hold the executor for as long as its sender likes (the adapter's gas bounds them).
pub const MAX_UNMETERED_SORT: u64 = 10_000;
pub const MAX_UNMETERED_KEYS: u64 = 64;
pub const MAX_UNMETERED_VALUE_SIZE: u64 = 1_024;

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

    /// Whether the bare VM runs this call (see [`MAX_UNMETERED_SORT`]).
    pub fn within_unmetered_bounds(&self) -> bool {
        match self {
            Call::CpuHeavy { length } => *length <= MAX_UNMETERED_SORT,
            Call::KvStore {
                keys, value_size, ..
            } => *keys <= MAX_UNMETERED_KEYS && *value_size <= MAX_UNMETERED_VALUE_SIZE,
            Call::DoNothing | Call::SmallBank(_) => true,
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

/// How a Move call enters the VM (`--payload`): a script carried in the transaction, or an entry
/// function call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CallStyle {
    #[default]
    Script,
    Entry,
}

/// What a load generator sends: the transaction of a sender for a nonce, under one workload.
#[derive(Clone, Debug)]
pub struct Load {
    workload: Workload,
    arg: u64,
    style: CallStyle,
    transfer_script: Bytes,
    /// Every function's script, in [`Function::ALL`] order.
    scripts: Vec<Bytes>,
}

impl Load {
    /// `arg` is `--workload-arg` (`None`: the workload's default).
    pub fn new(
        workload: Workload,
        arg: Option<u64>,
        style: CallStyle,
    ) -> Result<Self, MoveCompileError> {
        Ok(Load {
            workload,
            arg: arg.unwrap_or_else(|| workload.default_arg()),
            style,
            transfer_script: Bytes::from_static(&CompiledMove::get()?.transfer_script),
            scripts: Function::ALL
                .iter()
                .map(|f| f.script())
                .collect::<Result<_, _>>()?,
        })
    }

    pub fn workload(&self) -> Workload {
        self.workload
    }

    pub fn arg(&self) -> u64 {
        self.arg
    }

    /// The payload `sender` sends with `nonce`; `next` is another account of the same load
    /// (the transfer's destination, SmallBank's other account). Deterministic, so every process
    /// generating the same load sends the same transactions.
    pub fn payload(&self, sender: &Address, next: Address, nonce: u64) -> Payload {
        let call = match self.workload {
            Workload::Transfer => {
                return match self.style {
                    CallStyle::Script => Payload::Move {
                        script: self.transfer_script.clone(),
                        destination: next,
                        amount: 1,
                    },
                    CallStyle::Entry => Payload::MoveEntry {
                        destination: next,
                        amount: 1,
                    },
                }
            }
            Workload::DoNothing => Call::DoNothing,
            Workload::CpuHeavy => Call::CpuHeavy { length: self.arg },
            Workload::KvStore => Call::KvStore {
                first_key: nonce.wrapping_mul(self.arg) % KV_KEYSPACE,
                keys: self.arg,
                value_size: KV_VALUE_SIZE,
                version: nonce,
            },
            Workload::SmallBank => Call::SmallBank(smallbank_procedure(sender, next, nonce)),
        };
        match self.style {
            CallStyle::Script => Payload::WorkloadScript {
                script: self.scripts[call.function().index()].clone(),
                call,
            },
            CallStyle::Entry => Payload::WorkloadEntry { call },
        }
    }
}

/// One of the six procedures, uniformly at random (seeded by the sender and the nonce), with an
/// amount of 1 to [`SMALLBANK_MAX_AMOUNT`].
fn smallbank_procedure(sender: &Address, to: Address, nonce: u64) -> Procedure {
    let mut seed = [0u8; 8];
    seed.copy_from_slice(&sender.0[..8]);
    let random = splitmix64(u64::from_le_bytes(seed) ^ nonce);
    let amount = 1 + (random >> 8) % SMALLBANK_MAX_AMOUNT;
    match random % 6 {
        0 => Procedure::Amalgamate { to },
        1 => Procedure::Balance,
        2 => Procedure::DepositChecking { amount },
        3 => Procedure::SendPayment { to, amount },
        4 => Procedure::TransactSavings { amount },
        _ => Procedure::WriteCheck { amount },
    }
}

/// SplitMix64's output function: a fast, well-mixed hash of a counter.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_names_round_trip() {
        for workload in Workload::ALL {
            assert_eq!(workload.as_str().parse::<Workload>(), Ok(workload));
        }
        assert!("transfers".parse::<Workload>().is_err());
    }

    #[test]
    fn the_largest_argument_list_fits() {
        let mut args = Args::new();
        args.push(&[7; crate::ADDRESS_LEN]);
        Call::KvStore {
            first_key: 1,
            keys: 2,
            value_size: 3,
            version: 4,
        }
        .write_args(&mut args);
        let slices = args.slices();
        assert_eq!(slices.len(), 5);
        assert_eq!(slices[0], &[7; crate::ADDRESS_LEN]);
        assert_eq!(slices[4], &4u64.to_le_bytes());
    }

    #[test]
    fn smallbank_draws_every_procedure_about_equally() {
        let load = Load::new(Workload::SmallBank, None, CallStyle::Entry).expect("load");
        let sender = Address([3; crate::ADDRESS_LEN]);
        let next = Address([4; crate::ADDRESS_LEN]);
        let mut counts = [0usize; 9];
        for nonce in 0..6_000 {
            let Payload::WorkloadEntry { call } = load.payload(&sender, next, nonce) else {
                panic!("an entry call");
            };
            counts[call.function().index()] += 1;
        }
        // The six SmallBank functions, 1,000 each give or take sampling noise.
        for count in &counts[Function::Amalgamate.index()..] {
            assert!((850..1_150).contains(count), "{counts:?}");
        }
        assert_eq!(counts[..Function::Amalgamate.index()], [0, 0, 0]);
    }

    #[test]
    fn every_function_has_its_script_and_loads_carry_them() {
        let load = Load::new(Workload::KvStore, Some(3), CallStyle::Script).expect("load");
        let sender = Address([3; crate::ADDRESS_LEN]);
        match load.payload(&sender, sender, 5) {
            Payload::WorkloadScript { script, call } => {
                assert_eq!(
                    call,
                    Call::KvStore {
                        first_key: 15,
                        keys: 3,
                        value_size: KV_VALUE_SIZE,
                        version: 5
                    }
                );
                assert_eq!(script, call.script().expect("script"));
            }
            other => panic!("{other:?}"),
        }
        let compiled = CompiledMove::get().expect("compile");
        for function in Function::ALL {
            let (_, _, script) = function.names();
            assert!(compiled.workload_scripts.contains_key(script), "{script}");
        }
    }
}
