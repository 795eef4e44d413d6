//! How the Move executors run a block the ledger planned (`--exec`): one transaction after
//! another, or in parallel, with the same result.
//!
//! - `sequential` (`sequential.rs`): each transaction's effects applied before the next runs.
//!
//! Whatever the scheme, the adapter's fees of the block are credited to the fee account after
//! its last transaction under `--fees=block` (every transaction crediting that one account would
//! make them all conflict), which leaves the state per-transaction crediting would leave.

mod sequential;

use crate::executor::{BlockStats, BlockTx, Outcome};
use crate::move_logic::{FeeCredit, TransactionLogic};
use crate::move_storage::InMemoryStorage;
use crate::move_types::resource_tags;
use crate::move_vm::MoveError;
use move_core_types::language_storage::StructTag;
use move_vm_runtime::move_vm::MoveVM;
use std::fmt;
use std::str::FromStr;

/// How a block's transactions run (`--exec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    #[default]
    Sequential,
}

impl Scheme {
    pub const ALL: [Scheme; 1] = [Scheme::Sequential];

    pub fn as_str(&self) -> &'static str {
        match self {
            Scheme::Sequential => "sequential",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Scheme::ALL.iter().map(Scheme::as_str).collect();
                format!("unknown --exec {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// How a Move executor runs blocks.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExecConfig {
    pub scheme: Scheme,
    /// When the adapter's fees reach the fee account (the bare VM has none).
    pub fees: FeeCredit,
}

/// What a block's run left: the outcomes of the transactions that ran (the block, or its prefix
/// up to a rejection that ends it) and the gas they used.
pub(crate) struct BlockResult {
    pub(crate) outcomes: Vec<Outcome>,
    pub(crate) gas_used: u64,
}

/// A Move executor's scheme, with what the scheme keeps between blocks.
pub(crate) struct BlockRunner {
    config: ExecConfig,
    /// Every resource type the modules declare, numbered in the store before each block.
    tags: Vec<StructTag>,
    stats: BlockStats,
}

impl BlockRunner {
    pub(crate) fn new(config: ExecConfig) -> Result<Self, MoveError> {
        Ok(BlockRunner {
            config,
            tags: resource_tags()?,
            stats: BlockStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> BlockStats {
        self.stats
    }

    /// Runs `block` on `storage` (the executor's own `vm` for what runs on the calling thread)
    /// and applies its effects, the block's fees included.
    pub(crate) fn run<L: TransactionLogic>(
        &mut self,
        logic: &L,
        vm: &MoveVM,
        storage: &mut InMemoryStorage,
        block: &[BlockTx<'_>],
    ) -> BlockResult {
        storage.intern_all(&self.tags);
        self.stats.blocks += 1;
        let fees = self.config.fees;
        let (result, deferred_fees) = match self.config.scheme {
            Scheme::Sequential => sequential::run(logic, vm, storage, block, fees),
        };
        if deferred_fees > 0 {
            if let Some(changes) = logic.credit_fees(vm, &*storage, deferred_fees) {
                storage.apply(changes);
            }
        }
        result
    }
}
