//! `--exec=blockstm`: Block-STM as published (Gelashvili et al., 2022). Every worker thread runs
//! the same loop: take a task from the collaborative scheduler (`scheduler.rs`), execute a
//! transaction against the multi-version memory (`mvmemory.rs`, through `view.rs`) or validate
//! one's reads, until every transaction has executed and validated with nothing left to do.
//! An execution that meets an estimate waits for the transaction that left it; a validation
//! that finds a read changed aborts the transaction, turns its writes into estimates and has it
//! executed again. Then the last incarnation of each transaction is what sequential execution
//! would have done, and its writes are committed in index order.

mod mvmemory;
mod scheduler;
mod view;

use super::effects::Output;
use super::workers::Workers;
use crate::executor::BlockTx;
use crate::move_vm::logic::{FeeCredit, TransactionLogic};
use crate::move_vm::storage::InMemoryStorage;
use move_vm_runtime::move_vm::MoveVM;
use mvmemory::{Incarnation, MvMemory, TxnIndex};
use scheduler::{Scheduler, Task};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use view::MvView;

/// Idle rounds a worker spins before it yields its core to another thread.
const SPINS_BEFORE_YIELD: u32 = 64;

/// What a run counted.
#[derive(Debug, Default)]
pub(super) struct Counts {
    /// Incarnations that ran to their end, all transactions together.
    pub(super) executions: u64,
    pub(super) validation_aborts: u64,
    pub(super) dependency_waits: u64,
}

/// One block's run.
struct Run<'a, L> {
    logic: &'a L,
    storage: &'a InMemoryStorage,
    block: &'a [BlockTx<'a>],
    fees: FeeCredit,
    scheduler: Scheduler,
    memory: &'a MvMemory,
    /// The output of each transaction's last incarnation.
    outputs: Vec<Mutex<Option<Output>>>,
    /// Set when an incarnation wrote what has no key: the block goes back to sequential.
    unkeyed: AtomicBool,
    executions: AtomicU64,
    validation_aborts: AtomicU64,
    dependency_waits: AtomicU64,
}

/// What Block-STM keeps from block to block: its multi-version memory, emptied between blocks
/// (its tables keep their allocations).
pub(super) struct BlockStm {
    memory: MvMemory,
}

impl BlockStm {
    pub(super) fn new() -> Self {
        BlockStm {
            memory: MvMemory::new(0),
        }
    }

    /// The block's outputs in its order; `None` if it must run sequentially instead.
    pub(super) fn run<L: TransactionLogic>(
        &mut self,
        logic: &L,
        workers: &Workers,
        storage: &InMemoryStorage,
        block: &[BlockTx<'_>],
        fees: FeeCredit,
    ) -> (Option<Vec<Output>>, Counts) {
        self.memory.reset(block.len());
        let result = Run {
            logic,
            storage,
            block,
            fees,
            scheduler: Scheduler::new(block.len()),
            memory: &self.memory,
            outputs: block.iter().map(|_| Mutex::new(None)).collect(),
            unkeyed: AtomicBool::new(false),
            executions: AtomicU64::new(0),
            validation_aborts: AtomicU64::new(0),
            dependency_waits: AtomicU64::new(0),
        }
        .execute_on(workers);
        // The outputs' values are then the only references to their bytes, and move into the
        // store without a copy.
        self.memory.reset(0);
        result
    }
}

impl<L: TransactionLogic> Run<'_, L> {
    /// Runs the block on every worker; its outputs in its order (`None` if an incarnation wrote
    /// what has no key) and what it counted.
    fn execute_on(self, workers: &Workers) -> (Option<Vec<Output>>, Counts) {
        workers.broadcast(|_, vm| self.work(vm));
        let counts = Counts {
            executions: self.executions.load(Ordering::Relaxed),
            validation_aborts: self.validation_aborts.load(Ordering::Relaxed),
            dependency_waits: self.dependency_waits.load(Ordering::Relaxed),
        };
        if self.unkeyed.load(Ordering::SeqCst) {
            return (None, counts);
        }
        let outputs = self
            .outputs
            .into_iter()
            .map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect();
        (outputs, counts)
    }

    /// A worker's loop (the paper's Algorithm 1).
    fn work(&self, vm: &MoveVM) {
        let mut task = None;
        let mut idle = 0u32;
        while !self.scheduler.done() {
            task = match task {
                Some(Task::Execute(txn, incarnation)) => self.try_execute(vm, txn, incarnation),
                Some(Task::Validate(txn, incarnation)) => self.validate(txn, incarnation),
                None => {
                    let next = self.scheduler.next_task();
                    if next.is_none() {
                        idle += 1;
                        if idle.is_multiple_of(SPINS_BEFORE_YIELD) {
                            std::thread::yield_now();
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                    next
                }
            };
        }
    }

    /// Executes an incarnation; records it, or has it wait for the transaction whose estimate
    /// it met.
    fn try_execute(&self, vm: &MoveVM, txn: TxnIndex, incarnation: Incarnation) -> Option<Task> {
        let tx = self.block[txn as usize].tx;
        loop {
            let view = MvView::new(self.memory, self.storage, txn);
            let effects = self.logic.run(vm, &view, tx, self.fees);
            if let Some(blocking) = view.blocked_on() {
                self.dependency_waits.fetch_add(1, Ordering::Relaxed);
                if self.scheduler.add_dependency(txn, blocking) {
                    return None;
                }
                // It finished meanwhile: run again now.
                continue;
            }
            let Some(output) = Output::of(effects, self.storage) else {
                self.unkeyed.store(true, Ordering::SeqCst);
                self.scheduler.halt();
                return None;
            };
            let wrote_new_key =
                self.memory
                    .record(txn, incarnation, view.into_reads(), &output.writes);
            *self.outputs[txn as usize]
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(output);
            self.executions.fetch_add(1, Ordering::Relaxed);
            return self
                .scheduler
                .finish_execution(txn, incarnation, wrote_new_key);
        }
    }

    /// Validates an incarnation's reads; aborts it if one changed.
    fn validate(&self, txn: TxnIndex, incarnation: Incarnation) -> Option<Task> {
        let valid = self.memory.validate_read_set(txn);
        let aborted = !valid && self.scheduler.try_validation_abort(txn, incarnation);
        if aborted {
            self.validation_aborts.fetch_add(1, Ordering::Relaxed);
            self.memory.convert_writes_to_estimates(txn);
        }
        self.scheduler.finish_validation(txn, aborted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{FailReason, Outcome};
    use crate::move_vm::declared::{Declared, DeclaredTypes};
    use crate::move_vm::logic::Effects;
    use crate::transaction::Address;
    use crate::transaction::{Payload, Transaction};
    use move_core_types::account_address::AccountAddress;
    use move_core_types::effects::{ChangeSet, Op};
    use move_core_types::identifier::Identifier;
    use move_core_types::language_storage::StructTag;
    use move_core_types::resolver::MoveResolver;
    use std::time::{Duration, Instant};

    /// Every transaction adds one to a counter. The first holds its write back until the second
    /// has read the counter, so the second reads a value the first then overwrites: only a
    /// validation that aborts and re-executes it gets the sequential result.
    struct Counter {
        tag: StructTag,
        address: AccountAddress,
        second_read: AtomicBool,
    }

    impl TransactionLogic for Counter {
        fn run<S: MoveResolver>(
            &self,
            _: &MoveVM,
            state: &S,
            tx: &Transaction,
            _: FeeCredit,
        ) -> Effects {
            let Ok(Some(bytes)) = state.get_resource(&self.address, &self.tag) else {
                return Effects::failed(FailReason::UnknownSender);
            };
            let value = u64::from_le_bytes(bytes.try_into().expect("a u64"));
            match tx.nonce {
                0 => {
                    let start = Instant::now();
                    while !self.second_read.load(Ordering::SeqCst) {
                        assert!(start.elapsed() < Duration::from_secs(30), "never read");
                        std::thread::yield_now();
                    }
                }
                _ => self.second_read.store(true, Ordering::SeqCst),
            }
            let mut changes = ChangeSet::new();
            changes
                .add_resource_op(
                    self.address,
                    self.tag.clone(),
                    Op::Modify((value + 1).to_le_bytes().to_vec()),
                )
                .expect("op");
            Effects {
                changes,
                ..Effects::unchanged(Outcome::Executed)
            }
        }

        fn declare(&self, _: &Transaction, _: &DeclaredTypes, _: FeeCredit) -> Declared {
            Declared::default()
        }

        fn credit_fees<S: MoveResolver>(&self, _: &MoveVM, _: &S, _: u64) -> Option<ChangeSet> {
            None
        }
    }

    #[test]
    fn a_stale_read_is_aborted_and_re_executed() {
        let tag = StructTag {
            address: AccountAddress::ONE,
            module: Identifier::new("Counter").expect("name"),
            name: Identifier::new("Counter").expect("name"),
            type_params: vec![],
        };
        let address = AccountAddress::new([3; AccountAddress::LENGTH]);
        let mut storage = InMemoryStorage::new();
        storage.intern_all([&tag]);
        let key = storage.key(&address, &tag).expect("numbered");
        storage.put(key, Some(bytes::Bytes::from(0u64.to_le_bytes().to_vec())));
        let logic = Counter {
            tag,
            address,
            second_read: AtomicBool::new(false),
        };
        let sender = crypto::KeyPair::from_seed(1).name;
        let txs: Vec<Transaction> = (0..3)
            .map(|nonce| {
                Transaction::unsigned(
                    sender,
                    nonce,
                    Payload::Native {
                        destination: Address::default(),
                        amount: 0,
                    },
                )
            })
            .collect();
        let block: Vec<BlockTx<'_>> = txs
            .iter()
            .map(|tx| BlockTx {
                tx,
                stop_if_rejected: false,
            })
            .collect();
        let workers = Workers::new(2, None).expect("workers");
        let (outputs, counts) =
            BlockStm::new().run(&logic, &workers, &storage, &block, FeeCredit::Block);
        let outputs = outputs.expect("every write has a key");
        // Each transaction's last incarnation saw the one before it: 1, 2, 3.
        let written: Vec<u64> = outputs
            .iter()
            .map(|output| {
                let value = output.writes[0].1.as_deref().expect("written");
                u64::from_le_bytes(value.try_into().expect("a u64"))
            })
            .collect();
        assert_eq!(written, [1, 2, 3]);
        assert!(counts.validation_aborts >= 1, "{counts:?}");
        assert!(counts.executions > 3, "{counts:?}");
    }
}
