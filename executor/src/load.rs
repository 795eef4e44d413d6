//! What a load generator sends under a workload: each transaction's call, picked
//! deterministically from the sender and the nonce. The client and the standalone `movevm`
//! generator both build their transactions with [`Load`], so the two modes send the same calls.

use crate::move_vm::compile::{CompiledMove, MoveCompileError};
use crate::move_vm::functions::Function;
use crate::transaction::{Address, Call, Payload, Procedure};
use crate::workload::{Workload, KV_KEYSPACE, KV_VALUE_SIZE};
use bytes::Bytes;

/// The largest SmallBank amount; each transaction moves 1 to this many coins.
const SMALLBANK_MAX_AMOUNT: u64 = 10;

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
    fn smallbank_draws_every_procedure_about_equally() {
        let load = Load::new(Workload::SmallBank, None, CallStyle::Entry).expect("load");
        let sender = Address([3; crate::transaction::ADDRESS_LEN]);
        let next = Address([4; crate::transaction::ADDRESS_LEN]);
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
        let sender = Address([3; crate::transaction::ADDRESS_LEN]);
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
