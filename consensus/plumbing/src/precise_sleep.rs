//! Sleeps that end within microseconds of their deadline, for the emulated links' delays.
//!
//! tokio's timer counts whole milliseconds: a sleep ends at the first tick of its wheel at or
//! after the deadline, once a worker gets round to the wheel, so a sleep of 1 ms takes 1 to 2 ms
//! and a link of 1 ms is a link of about 1.5. A round trip over two such links came out 5 ms at
//! the median undilated, where the emulation asked for 2; dilated K times the same rounding is
//! K times smaller in the processes' time, so the dilation gate compared a dilated run with an
//! undilated one that was the less faithful of the two.
//!
//! Here one thread per process holds the pending deadlines in order and waits on a condition
//! variable until the earliest. The kernel ends that wait within the thread's timer slack, which
//! the thread sets to a microsecond (the default is 50 µs), and the thread then wakes the tasks
//! whose deadlines passed. Registering a sleep takes a lock and, only when it moves the earliest
//! deadline forward, a wake-up of the thread: no system call per sleep in the common case,
//! where a link's sender sleeps on a deadline its last sleep already registered.
//!
//! A process turns it on once ([`enable`]); until then [`PreciseSleep`] is never made (the
//! callers ask [`enabled`] and use tokio's timer otherwise). Tests that pause tokio's clock keep
//! tokio's timer: this thread reads the real clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// What the timer thread asks the kernel for: how late past a deadline a wait may end (ns).
const TIMER_SLACK_NS: u64 = 1_000;

/// A registered sleep: its deadline, then a number that tells apart sleeps of one deadline.
type Key = (Instant, u64);

#[derive(Default)]
struct Pending {
    wakers: BTreeMap<Key, Waker>,
    registered: u64,
}

struct Timer {
    pending: Mutex<Pending>,
    /// Signalled when a sleep moves the earliest deadline forward.
    earlier: Condvar,
}

static TIMER: OnceLock<Arc<Timer>> = OnceLock::new();

impl Timer {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread's loop: wake what is due, then wait for the next deadline or an earlier one.
    fn run(&self) {
        set_timer_slack();
        let mut due = Vec::new();
        let mut pending = self.lock();
        loop {
            let now = Instant::now();
            while let Some(entry) = pending.wakers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            if !due.is_empty() {
                // Woken outside the lock: a woken task may register its next sleep at once.
                drop(pending);
                due.drain(..).for_each(Waker::wake);
                pending = self.lock();
                continue;
            }
            pending = match pending.wakers.keys().next() {
                Some((deadline, _)) => {
                    let wait = deadline.saturating_duration_since(now);
                    let (guard, _) = self
                        .earlier
                        .wait_timeout(pending, wait)
                        .unwrap_or_else(PoisonError::into_inner);
                    guard
                }
                None => self
                    .earlier
                    .wait(pending)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

#[cfg(target_os = "linux")]
fn set_timer_slack() {
    // SAFETY: prctl with PR_SET_TIMERSLACK reads its integer argument only and changes the
    // calling thread's slack; it touches no memory of ours.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            TIMER_SLACK_NS as libc::c_ulong,
            0,
            0,
            0,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn set_timer_slack() {}

/// Starts this process's timer thread (once; later calls do nothing). From then on callers that
/// ask [`enabled`] make [`PreciseSleep`]s.
pub fn enable() -> std::io::Result<()> {
    if TIMER.get().is_some() {
        return Ok(());
    }
    let timer = Arc::new(Timer {
        pending: Mutex::new(Pending::default()),
        earlier: Condvar::new(),
    });
    if TIMER.set(timer.clone()).is_err() {
        return Ok(()); // another thread enabled it meanwhile
    }
    std::thread::Builder::new()
        .name("precise-timer".into())
        .spawn(move || timer.run())
        .map(drop)
}

/// Whether this process's sleeps on links are precise ([`enable`] was called).
pub fn enabled() -> bool {
    TIMER.get().is_some()
}

/// A future that is ready once the real clock reaches `deadline` (a `std::time::Instant`).
/// Made only once [`enable`] was called; without the thread it would never wake.
#[derive(Debug)]
pub struct PreciseSleep {
    deadline: Instant,
    key: Option<Key>,
}

/// Sleeps until `deadline` on the real clock, within the timer thread's slack.
pub fn sleep_until(deadline: Instant) -> PreciseSleep {
    PreciseSleep {
        deadline,
        key: None,
    }
}

impl PreciseSleep {
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            this.forget();
            return Poll::Ready(());
        }
        let Some(timer) = TIMER.get() else {
            // Not enabled: nothing would wake us. Callers check `enabled` first; end at once
            // rather than hang if one did not.
            return Poll::Ready(());
        };
        let mut pending = timer.lock();
        match this.key {
            Some(key) => match pending.wakers.get_mut(&key) {
                Some(waker) => waker.clone_from(cx.waker()),
                // Taken by the thread: its deadline passed.
                None => return Poll::Ready(()),
            },
            None => {
                let key = (this.deadline, pending.registered);
                pending.registered += 1;
                let earliest = pending
                    .wakers
                    .keys()
                    .next()
                    .is_none_or(|first| key < *first);
                pending.wakers.insert(key, cx.waker().clone());
                this.key = Some(key);
                if earliest {
                    timer.earlier.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl PreciseSleep {
    /// Takes this sleep's waker out of the thread's queue, if it is still there.
    fn forget(&mut self) {
        if let (Some(key), Some(timer)) = (self.key.take(), TIMER.get()) {
            timer.lock().wakers.remove(&key);
        }
    }
}

impl Drop for PreciseSleep {
    fn drop(&mut self) {
        self.forget();
    }
}

/// How many sleeps wait in the thread's queue (for tests: a dropped sleep leaves none behind).
pub fn pending() -> usize {
    TIMER.get().map_or(0, |timer| timer.lock().wakers.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    // One test function: the queue is the process's, and libtest runs tests on several threads
    // at once, so separate tests would see each other's sleeps in `pending`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeps_end_at_or_after_their_deadlines_and_leave_nothing_behind() {
        enable().expect("timer thread");
        assert!(enabled());

        // Ends no earlier than its deadline.
        let start = Instant::now();
        sleep_until(start + 3 * MS).await;
        assert!(Instant::now() >= start + 3 * MS);

        // Many sleeps of different deadlines, registered out of order, each at or after its own.
        let start = Instant::now();
        let order = Arc::new(Mutex::new(Vec::new()));
        let tasks: Vec<_> = [7u32, 2, 5, 1, 6, 3, 4]
            .into_iter()
            .map(|ms| {
                let order = order.clone();
                tokio::spawn(async move {
                    sleep_until(start + ms * 2 * MS).await;
                    order.lock().expect("order").push((ms, Instant::now()));
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("sleep task");
        }
        let ended = order.lock().expect("order").clone();
        for (ms, at) in &ended {
            assert!(*at >= start + *ms * 2 * MS, "{ms}: ended early");
        }
        assert_eq!(pending(), 0);

        // A sleep dropped before its deadline (the losing branch of a `select!`) leaves the
        // queue, and a sleep whose deadline passed is ready without the thread.
        let far = sleep_until(Instant::now() + Duration::from_secs(3_600));
        tokio::select! {
            () = far => panic!("an hour passed"),
            () = sleep_until(Instant::now() + MS) => {}
        }
        assert_eq!(pending(), 0);
        sleep_until(Instant::now() - MS).await;
        assert_eq!(pending(), 0);
    }
}
