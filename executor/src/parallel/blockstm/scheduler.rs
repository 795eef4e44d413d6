//! Block-STM's collaborative scheduler (Gelashvili et al., "Block-STM: Scaling Blockchain
//! Execution by Turning Ordering Curse to a Performance Blessing", 2022, Algorithms 4 and 5):
//! worker threads take execution and validation tasks from two shared indices, lowest
//! transaction first, so that what is likely to commit runs first.
//!
//! - `execution_idx` is the next transaction to execute, `validation_idx` the next to validate;
//!   a worker validates when validation is behind execution, else executes. Aborts and
//!   executions that wrote new keys pull the indices back (`decrease_*`), counted in
//!   `decrease_cnt`, so that `check_done` can tell "both past the block with no task running"
//!   from a moment in which a worker was about to pull an index back.
//! - A transaction's status moves `ReadyToExecute(i) → Executing(i) → Executed(i)`, and on an
//!   abort (a failed validation, or an execution that met an estimate) through `Aborting(i)` to
//!   `ReadyToExecute(i + 1)`: incarnation i + 1 is its next execution.
//! - An execution that meets a lower transaction's estimate adds itself to that transaction's
//!   dependencies and stops; it is made ready again when the lower one finishes executing.
//!
//! `num_active_tasks` counts the tasks workers hold: taken when a version is handed out, given
//! back when a task ends without a follow-up (a task returned from `finish_*` keeps its count).

use super::mvmemory::{Incarnation, TxnIndex};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Task {
    Execute(TxnIndex, Incarnation),
    Validate(TxnIndex, Incarnation),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    ReadyToExecute,
    Executing,
    Executed,
    Aborting,
}

#[derive(Debug)]
struct TxnStatus {
    incarnation: Incarnation,
    status: Status,
}

pub(super) struct Scheduler {
    size: usize,
    execution_idx: CachePadded<AtomicUsize>,
    validation_idx: CachePadded<AtomicUsize>,
    decrease_cnt: CachePadded<AtomicUsize>,
    num_active_tasks: CachePadded<AtomicUsize>,
    done_marker: CachePadded<AtomicBool>,
    status: Vec<Mutex<TxnStatus>>,
    /// The transactions waiting for each one to finish executing.
    dependencies: Vec<Mutex<Vec<TxnIndex>>>,
}

impl Scheduler {
    pub(super) fn new(size: usize) -> Self {
        Scheduler {
            size,
            execution_idx: CachePadded::new(AtomicUsize::new(0)),
            validation_idx: CachePadded::new(AtomicUsize::new(0)),
            decrease_cnt: CachePadded::new(AtomicUsize::new(0)),
            num_active_tasks: CachePadded::new(AtomicUsize::new(0)),
            done_marker: CachePadded::new(AtomicBool::new(size == 0)),
            status: (0..size)
                .map(|_| {
                    Mutex::new(TxnStatus {
                        incarnation: 0,
                        status: Status::ReadyToExecute,
                    })
                })
                .collect(),
            dependencies: (0..size).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    pub(super) fn done(&self) -> bool {
        self.done_marker.load(Ordering::SeqCst)
    }

    /// Stops every worker at its next look (the block is handed back to sequential execution).
    pub(super) fn halt(&self) {
        self.done_marker.store(true, Ordering::SeqCst);
    }

    fn decrease_execution_idx(&self, target: usize) {
        self.execution_idx.fetch_min(target, Ordering::SeqCst);
        self.decrease_cnt.fetch_add(1, Ordering::SeqCst);
    }

    fn decrease_validation_idx(&self, target: usize) {
        self.validation_idx.fetch_min(target, Ordering::SeqCst);
        self.decrease_cnt.fetch_add(1, Ordering::SeqCst);
    }

    fn check_done(&self) {
        let observed = self.decrease_cnt.load(Ordering::SeqCst);
        let execution = self.execution_idx.load(Ordering::SeqCst);
        let validation = self.validation_idx.load(Ordering::SeqCst);
        if execution.min(validation) >= self.size
            && self.num_active_tasks.load(Ordering::SeqCst) == 0
            && observed == self.decrease_cnt.load(Ordering::SeqCst)
        {
            self.done_marker.store(true, Ordering::SeqCst);
        }
    }

    /// `ReadyToExecute(i) → Executing(i)`: the version to execute, if it was ready.
    fn try_incarnate(&self, txn: usize) -> Option<Task> {
        let mut status = lock(self.status.get(txn)?);
        if status.status != Status::ReadyToExecute {
            return None;
        }
        status.status = Status::Executing;
        Some(Task::Execute(txn as TxnIndex, status.incarnation))
    }

    fn next_version_to_execute(&self) -> Option<Task> {
        if self.execution_idx.load(Ordering::SeqCst) >= self.size {
            self.check_done();
            return None;
        }
        self.num_active_tasks.fetch_add(1, Ordering::SeqCst);
        let txn = self.execution_idx.fetch_add(1, Ordering::SeqCst);
        let task = self.try_incarnate(txn);
        if task.is_none() {
            self.num_active_tasks.fetch_sub(1, Ordering::SeqCst);
        }
        task
    }

    fn next_version_to_validate(&self) -> Option<Task> {
        if self.validation_idx.load(Ordering::SeqCst) >= self.size {
            self.check_done();
            return None;
        }
        self.num_active_tasks.fetch_add(1, Ordering::SeqCst);
        let txn = self.validation_idx.fetch_add(1, Ordering::SeqCst);
        if let Some(status) = self.status.get(txn) {
            let status = lock(status);
            if status.status == Status::Executed {
                return Some(Task::Validate(txn as TxnIndex, status.incarnation));
            }
        }
        self.num_active_tasks.fetch_sub(1, Ordering::SeqCst);
        None
    }

    /// A task, validation first when validation is behind execution; `None` when there is none
    /// for now (or the block is done).
    pub(super) fn next_task(&self) -> Option<Task> {
        if self.validation_idx.load(Ordering::SeqCst) < self.execution_idx.load(Ordering::SeqCst) {
            self.next_version_to_validate()
        } else {
            self.next_version_to_execute()
        }
    }

    /// The executing `txn` met an estimate of `blocking`: it waits for `blocking` to finish
    /// executing (its task ends here). `false` if `blocking` already has, and `txn` should
    /// simply run again.
    pub(super) fn add_dependency(&self, txn: TxnIndex, blocking: TxnIndex) -> bool {
        let Some(dependents) = self.dependencies.get(blocking as usize) else {
            return false;
        };
        let mut dependents = lock(dependents);
        if lock(&self.status[blocking as usize]).status == Status::Executed {
            return false;
        }
        lock(&self.status[txn as usize]).status = Status::Aborting;
        dependents.push(txn);
        drop(dependents);
        self.num_active_tasks.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// `Aborting(i) → ReadyToExecute(i + 1)`.
    fn set_ready_status(&self, txn: TxnIndex) {
        let mut status = lock(&self.status[txn as usize]);
        status.incarnation += 1;
        status.status = Status::ReadyToExecute;
    }

    fn resume_dependencies(&self, dependents: Vec<TxnIndex>) {
        let lowest = dependents.iter().copied().min();
        for txn in dependents {
            self.set_ready_status(txn);
        }
        if let Some(lowest) = lowest {
            self.decrease_execution_idx(lowest as usize);
        }
    }

    /// `txn`'s incarnation ran to its end; `wrote_new_key`: it wrote a key its previous
    /// incarnation did not, so every transaction above it must be validated again. Returns the
    /// validation of this incarnation when validation already went past it.
    pub(super) fn finish_execution(
        &self,
        txn: TxnIndex,
        incarnation: Incarnation,
        wrote_new_key: bool,
    ) -> Option<Task> {
        lock(&self.status[txn as usize]).status = Status::Executed;
        let dependents = std::mem::take(&mut *lock(&self.dependencies[txn as usize]));
        self.resume_dependencies(dependents);
        if self.validation_idx.load(Ordering::SeqCst) > txn as usize {
            if wrote_new_key {
                self.decrease_validation_idx(txn as usize);
            } else {
                return Some(Task::Validate(txn, incarnation));
            }
        }
        self.num_active_tasks.fetch_sub(1, Ordering::SeqCst);
        None
    }

    /// `Executed(i) → Aborting(i)`, by the one validation that found `txn`'s reads changed.
    pub(super) fn try_validation_abort(&self, txn: TxnIndex, incarnation: Incarnation) -> bool {
        let mut status = lock(&self.status[txn as usize]);
        if status.incarnation == incarnation && status.status == Status::Executed {
            status.status = Status::Aborting;
            true
        } else {
            false
        }
    }

    /// A validation ended; after an abort, every transaction above must be validated again and
    /// `txn` re-executed, by this worker if the execution index is already past it.
    pub(super) fn finish_validation(&self, txn: TxnIndex, aborted: bool) -> Option<Task> {
        if aborted {
            self.set_ready_status(txn);
            self.decrease_validation_idx(txn as usize + 1);
            if self.execution_idx.load(Ordering::SeqCst) > txn as usize {
                if let Some(task) = self.try_incarnate(txn as usize) {
                    return Some(task);
                }
            }
        }
        self.num_active_tasks.fetch_sub(1, Ordering::SeqCst);
        None
    }
}

/// A lock whose holder panicked still holds a consistent status: take it anyway.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drains the scheduler on one thread, executing and validating as told, with `conflict`
    /// deciding which validations fail; returns the tasks in order.
    fn drain(scheduler: &Scheduler, mut fails: impl FnMut(Task) -> bool) -> Vec<Task> {
        let mut tasks = Vec::new();
        let mut task = None;
        let mut idle = 0;
        while !scheduler.done() {
            task = match task.or_else(|| scheduler.next_task()) {
                Some(current @ Task::Execute(txn, incarnation)) => {
                    tasks.push(current);
                    scheduler.finish_execution(txn, incarnation, incarnation == 0)
                }
                Some(current @ Task::Validate(txn, incarnation)) => {
                    tasks.push(current);
                    let aborted =
                        fails(current) && scheduler.try_validation_abort(txn, incarnation);
                    scheduler.finish_validation(txn, aborted)
                }
                None => {
                    idle += 1;
                    assert!(idle < 1_000, "stuck after {tasks:?}");
                    None
                }
            };
        }
        tasks
    }

    #[test]
    fn without_conflicts_each_transaction_executes_and_validates_once() {
        let scheduler = Scheduler::new(3);
        let tasks = drain(&scheduler, |_| false);
        for txn in 0..3 {
            assert_eq!(
                tasks
                    .iter()
                    .filter(|t| **t == Task::Execute(txn, 0))
                    .count(),
                1
            );
            assert!(tasks.contains(&Task::Validate(txn, 0)), "{tasks:?}");
        }
        assert!(tasks.iter().all(|t| !matches!(t, Task::Execute(_, 1))));
    }

    #[test]
    fn a_failed_validation_re_executes_and_revalidates_what_follows() {
        let scheduler = Scheduler::new(3);
        let mut failed = false;
        let tasks = drain(&scheduler, |task| {
            let fail = task == Task::Validate(1, 0) && !failed;
            failed |= fail;
            fail
        });
        let position = |t: Task| tasks.iter().position(|x| *x == t).expect("task ran");
        assert!(position(Task::Execute(1, 1)) > position(Task::Validate(1, 0)));
        // Transaction 2 is validated again after the re-execution of 1.
        let last_of_2 = tasks
            .iter()
            .rposition(|t| matches!(t, Task::Validate(2, _)))
            .expect("2 validated");
        assert!(last_of_2 > position(Task::Execute(1, 1)), "{tasks:?}");
        assert!(scheduler.done());
    }

    #[test]
    fn a_dependency_waits_for_the_blocking_execution_then_runs_again() {
        let scheduler = Scheduler::new(2);
        assert_eq!(scheduler.next_task(), Some(Task::Execute(0, 0)));
        // Validation is behind execution, but 0 is still executing: nothing to validate yet.
        assert_eq!(scheduler.next_task(), None);
        assert_eq!(scheduler.next_task(), Some(Task::Execute(1, 0)));
        // 1 meets an estimate of 0, still executing: it waits.
        assert!(scheduler.add_dependency(1, 0));
        // 0 finishes: 1 is ready again as its next incarnation, and the execution index went
        // back to it.
        assert_eq!(scheduler.finish_execution(0, 0, true), None);
        assert_eq!(scheduler.next_task(), Some(Task::Validate(0, 0)));
        assert_eq!(scheduler.finish_validation(0, false), None);
        assert_eq!(scheduler.next_task(), Some(Task::Execute(1, 1)));
        // A dependency on a transaction that already executed is refused: run again at once.
        assert!(!scheduler.add_dependency(1, 0));
        assert_eq!(scheduler.finish_execution(1, 1, true), None);
        assert_eq!(scheduler.next_task(), Some(Task::Validate(1, 1)));
        assert_eq!(scheduler.finish_validation(1, false), None);
        assert!(!scheduler.done());
        assert_eq!(scheduler.next_task(), None);
        assert!(scheduler.done());
    }

    #[test]
    fn an_empty_block_is_done_at_once() {
        assert!(Scheduler::new(0).done());
    }
}
