//! How the Move executors run a block the ledger planned (`--exec`): one transaction after
//! another, or in parallel, with the same result.
//!
//! - `sequential` (`sequential.rs`): each transaction's effects applied before the next runs.
//! - `waves` (`waves.rs`): levels of transactions whose declared reads and writes
//!   (`declared.rs`) do not conflict, each level on the worker threads; a block whose
//!   transactions read or write beyond their declarations runs sequentially instead.
//! - `blockstm` (`blockstm/`): Block-STM, optimistic execution on the worker threads with a
//!   multi-version memory, validation and re-execution.
//!
//! The parallel schemes run on `workers.rs`'s threads, each with its own VM, and commit what
//! the block's transactions wrote in index order once the block has run (`effects.rs`).
//! Whatever the scheme, under `--fees=block` the adapter's fees of the block are credited to the
//! fee account after its last transaction (every transaction crediting that one account would
//! make them all conflict), which leaves the state per-transaction crediting would leave.

mod blockstm;
pub(crate) mod declared;
mod effects;
mod recording;
mod sequential;
mod waves;
mod workers;

use crate::executor::{BlockStats, BlockTx, Outcome};
use crate::move_logic::{FeeCredit, TransactionLogic};
use crate::move_storage::InMemoryStorage;
use crate::move_types::resource_tags;
use crate::move_vm::MoveError;
use move_core_types::language_storage::StructTag;
use move_vm_runtime::move_vm::MoveVM;
use std::fmt;
use std::str::FromStr;
use workers::Workers;

/// How a block's transactions run (`--exec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    #[default]
    Sequential,
    Waves,
    BlockStm,
}

impl Scheme {
    pub const ALL: [Scheme; 3] = [Scheme::Sequential, Scheme::Waves, Scheme::BlockStm];

    pub fn as_str(&self) -> &'static str {
        match self {
            Scheme::Sequential => "sequential",
            Scheme::Waves => "waves",
            Scheme::BlockStm => "blockstm",
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
#[derive(Clone, Copy, Debug)]
pub struct ExecConfig {
    pub scheme: Scheme,
    /// Worker threads of a parallel scheme (at least one; sequential execution uses none).
    pub threads: usize,
    /// When the adapter's fees reach the fee account (the bare VM has none).
    pub fees: FeeCredit,
    /// Runs last thing on every worker thread (a node records the thread's CPU).
    pub on_thread_exit: Option<fn()>,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            scheme: Scheme::Sequential,
            threads: 1,
            fees: FeeCredit::Block,
            on_thread_exit: None,
        }
    }
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
    /// The worker threads of a parallel scheme.
    workers: Option<Workers>,
    /// Block-STM's memory, kept between blocks.
    blockstm: blockstm::BlockStm,
    /// Every resource type the modules declare, numbered in the store before each block.
    tags: Vec<StructTag>,
    stats: BlockStats,
}

impl BlockRunner {
    pub(crate) fn new(config: ExecConfig) -> Result<Self, MoveError> {
        let workers = match config.scheme {
            Scheme::Sequential => None,
            Scheme::Waves | Scheme::BlockStm => {
                Some(Workers::new(config.threads, config.on_thread_exit)?)
            }
        };
        Ok(BlockRunner {
            config,
            workers,
            blockstm: blockstm::BlockStm::new(),
            tags: resource_tags()?,
            stats: BlockStats::default(),
        })
    }

    pub(crate) fn stats(&self) -> BlockStats {
        BlockStats {
            threads: self.workers.as_ref().map_or(0, Workers::threads) as u64,
            ..self.stats
        }
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
        let parallel = match (&self.workers, self.config.scheme) {
            (Some(workers), Scheme::Waves) => {
                let ran = waves::run(logic, workers, vm, storage, block, fees);
                if let Some((_, waves)) = &ran {
                    self.stats.waves += *waves as u64;
                }
                Some(ran.map(|(outputs, _)| outputs))
            }
            (Some(workers), Scheme::BlockStm) => {
                let (outputs, counts) = self.blockstm.run(logic, workers, storage, block, fees);
                self.stats.reexecutions += counts.executions.saturating_sub(block.len() as u64);
                self.stats.validation_aborts += counts.validation_aborts;
                self.stats.dependency_waits += counts.dependency_waits;
                Some(outputs)
            }
            _ => None,
        };
        let (result, deferred_fees) = match parallel {
            Some(Some(outputs)) => effects::commit(storage, block, outputs),
            Some(None) => {
                self.stats.sequential_fallbacks += 1;
                sequential::run(logic, vm, storage, block, fees)
            }
            None => sequential::run(logic, vm, storage, block, fees),
        };
        if deferred_fees > 0 {
            if let Some(changes) = logic.credit_fees(vm, &*storage, deferred_fees) {
                storage.apply(changes);
            }
        }
        result
    }
}
