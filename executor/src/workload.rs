//! The workloads (`--workload`): what a run's Move transactions call, after Blockbench's suite
//! (DoNothing, CPUHeavy, KVStore/IOHeavy, SmallBank) beside the transfer. The Move side is in
//! `executor/move/` and `move_vm/functions.rs` (which function each call runs, with which
//! arguments); how a load generator picks each transaction's call is `load.rs`'s.

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
}
