//! The worker threads of a parallel scheme: the thread that calls (the executor stage's) and a
//! pool of named threads (`executor-N`, so a node counts their CPU as the executor stage's),
//! each with a Move VM of its own. One VM per thread, not one shared: the VM's loader takes a
//! write lock on its caches whenever it loads a script, which every script transaction does, so
//! threads sharing one would queue on that lock.

use crate::move_vm::error::MoveError;
use crate::move_vm::natives::natives;
use move_vm_runtime::move_vm::MoveVM;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long dropping the pool waits for its threads to end (their exit records their CPU).
const EXIT_WAIT: Duration = Duration::from_secs(5);

pub(super) struct Workers {
    /// The workers beside the calling thread (none for one worker). Dropped first when the
    /// workers are: its threads then end.
    pool: Option<rayon::ThreadPool>,
    /// `vms[0]` is the calling thread's, `vms[i]` pool thread i - 1's; each lock is only ever
    /// taken by its thread.
    vms: Vec<Mutex<MoveVM>>,
    /// Pool threads not yet ended.
    running: Arc<(Mutex<usize>, Condvar)>,
}

impl Workers {
    /// `threads` workers, the caller included; `on_exit` runs last thing on each pool thread (a
    /// node records the thread's CPU).
    pub(super) fn new(threads: usize, on_exit: Option<fn()>) -> Result<Self, MoveError> {
        let threads = threads.max(1);
        let vms = (0..threads)
            .map(|_| {
                MoveVM::new(natives()?)
                    .map(Mutex::new)
                    .map_err(|e| MoveError::Vm(format!("{e:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let running = Arc::new((Mutex::new(threads - 1), Condvar::new()));
        let pool = if threads == 1 {
            None
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads - 1)
                .thread_name(|i| format!("executor-{i}"))
                .exit_handler({
                    let running = running.clone();
                    move |_| {
                        if let Some(on_exit) = on_exit {
                            on_exit();
                        }
                        let (count, ended) = &*running;
                        *lock(count) -= 1;
                        ended.notify_all();
                    }
                })
                .build()
                .map_err(|e| MoveError::Pool(e.to_string()))?;
            Some(pool)
        };
        Ok(Workers { pool, vms, running })
    }

    pub(super) fn threads(&self) -> usize {
        self.vms.len()
    }

    /// Runs `work(worker, vm)` on every worker at once, the calling thread being worker 0, each
    /// with its own VM; returns once all have returned.
    pub(super) fn broadcast(&self, work: impl Fn(usize, &MoveVM) + Sync) {
        let run = |worker: usize| {
            if let Some(vm) = self.vms.get(worker) {
                work(worker, &lock(vm));
            }
        };
        match &self.pool {
            None => run(0),
            Some(pool) => pool.in_place_scope(|scope| {
                scope.spawn_broadcast(|_, context| run(context.index() + 1));
                run(0);
            }),
        }
    }
}

impl Drop for Workers {
    /// Ends the pool's threads and waits for them, so what they record as they end (their CPU)
    /// is recorded before whoever dropped the workers goes on.
    fn drop(&mut self) {
        drop(self.pool.take());
        let (count, ended) = &*self.running;
        let _ = ended.wait_timeout_while(lock(count), EXIT_WAIT, |running| *running > 0);
    }
}

/// A lock whose holder panicked is still consistent here (a VM, a count): take it anyway.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static ENDED: AtomicUsize = AtomicUsize::new(0);

    #[test]
    fn every_worker_runs_once_with_its_own_vm_and_the_pool_ends_when_dropped() {
        let workers = Workers::new(
            3,
            Some(|| {
                ENDED.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .expect("workers");
        assert_eq!(workers.threads(), 3);
        let caller = std::thread::current().id();
        let seen = Mutex::new(Vec::new());
        workers.broadcast(|worker, vm| {
            let thread = std::thread::current();
            let name = thread.name().map(str::to_string);
            let on_caller = thread.id() == caller;
            lock(&seen).push((worker, on_caller, name, vm as *const MoveVM as usize));
        });
        let mut seen = seen.into_inner().expect("lock");
        seen.sort();
        assert_eq!(seen.len(), 3);
        assert_eq!((seen[0].0, seen[0].1), (0, true), "worker 0 is the caller");
        for (i, (worker, on_caller, name, _)) in seen.iter().enumerate().skip(1) {
            assert_eq!((*worker, *on_caller), (i, false));
            assert_eq!(
                name.as_deref(),
                Some(format!("executor-{}", i - 1).as_str())
            );
        }
        let vms: std::collections::HashSet<usize> = seen.iter().map(|s| s.3).collect();
        assert_eq!(vms.len(), 3, "a VM per worker");
        drop(workers);
        assert_eq!(
            ENDED.load(Ordering::SeqCst),
            2,
            "every pool thread ran its exit hook"
        );
    }

    #[test]
    fn one_worker_is_the_caller_alone() {
        let workers = Workers::new(1, None).expect("workers");
        let caller = std::thread::current().id();
        let ran = AtomicUsize::new(0);
        workers.broadcast(|worker, _| {
            assert_eq!((worker, std::thread::current().id()), (0, caller));
            ran.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
