//! A Move executor's scheme kept between blocks: its worker threads, Block-STM's memory, the
//! resource types numbered before each block, and the counters; and running one block under it.

use super::blockstm;
use super::config::{ExecConfig, Scheme};
use super::conflicts::Conflicts;
use super::effects::{self, BlockResult};
use super::sequential;
use super::waves;
use super::workers::Workers;
use crate::executor::{BlockStats, BlockTx};
use crate::move_vm::error::MoveError;
use crate::move_vm::logic::TransactionLogic;
use crate::move_vm::storage::InMemoryStorage;
use crate::move_vm::types::resource_tags;
use move_core_types::language_storage::StructTag;
use move_vm_runtime::move_vm::MoveVM;

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
        // What the block declares, where it is needed: waves run its levels, and a block too
        // contended to gain from workers runs sequentially under either scheme (`conflicts.rs`).
        let gate = self.config.contention_gate;
        let conflicts = match (&self.workers, self.config.scheme) {
            (Some(_), Scheme::Waves) => Conflicts::of(logic, storage, block, fees),
            (Some(_), Scheme::BlockStm) if gate => Conflicts::of(logic, storage, block, fees),
            _ => None,
        };
        let contended = gate && conflicts.as_ref().is_some_and(Conflicts::too_contended);
        if contended {
            self.stats.contended_blocks += 1;
        }
        let parallel = match (&self.workers, self.config.scheme) {
            _ if contended => None,
            (Some(workers), Scheme::Waves) => Some(conflicts.as_ref().and_then(|conflicts| {
                let outputs = waves::run(logic, workers, vm, storage, block, fees, conflicts)?;
                self.stats.waves += conflicts.levels.len() as u64;
                Some(outputs)
            })),
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
