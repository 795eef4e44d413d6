//! The one clock of a process, which time dilation slows.
//!
//! Scale-model testing (DieCast, NSDI 2008) runs every process of a cluster K times slower in
//! wall time: each virtual CPU gets 1/K of a real core (the harness's cgroup quotas) and every
//! clock the process reads runs K times slower (here). A virtual second then holds as much CPU
//! work as a real second of a full core, and a machine holds a cluster K times larger. A process
//! is dilated once, first thing (`node run --dilation K`, `client --dilation K`); undilated, this
//! clock is the real one.
//!
//! Everything of ours that reads time or waits goes through here: instants ([`Instant::now`]),
//! wall-clock milliseconds ([`now_ms`]), sleeps, intervals and timeouts. A duration handed to
//! these is a virtual one; the runtime is asked for K times as long. An instant is in virtual
//! coordinates, which agree with the real clock at the moment the process was dilated, and wall
//! clock milliseconds agree with real ones at an origin all processes of a run share, so that a
//! timestamp one process writes is comparable with another's.
//!
//! Why our own clock rather than `libfaketime` (which slows every clock of a process it is
//! preloaded into, tokio's timers included): each clock read through it costs about 690 ns of
//! CPU against 35 ns natively, and a `hotstuff` node spends about 0.45 µs per transaction in
//! all, so a few reads per transaction would change what is measured. Here a read costs one
//! native read and, dilated, a multiplication (`cargo bench -p plumbing --bench clock`).
//!
//! Built on tokio's instant, so a test runtime's paused clock (`tokio::time::pause`) drives it
//! as it drives tokio's timers.

use std::future::Future;
use std::ops::{Add, AddAssign, Sub};
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;
use tokio::time::Instant as RuntimeInstant;

/// The largest factor: a 1 ms quota over a period of K ms is how a thread is held to 1/K of a
/// core, and the kernel's longest CFS period is one second.
pub const MAX_FACTOR: u32 = 1_000;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ClockError {
    #[error("a dilation factor is 1 to {MAX_FACTOR}, got {0}")]
    Factor(u32),
    #[error("the clock is dilated already (×{0}): a process is dilated once, at its start")]
    AlreadyDilated(u32),
}

/// How one process's clock relates to the real one: K, and where the two agree.
#[derive(Clone, Copy, Debug)]
pub struct Dilation {
    factor: u32,
    /// The runtime instant at which virtual and real instants agree.
    real_origin: RuntimeInstant,
    /// The Unix time (ms) at which virtual and real wall clocks agree.
    unix_origin_ms: u64,
}

impl Dilation {
    /// `factor` K; instants agree with the real clock now, wall-clock milliseconds at
    /// `unix_origin_ms` (now, if none is given).
    pub fn new(factor: u32, unix_origin_ms: Option<u64>) -> Result<Self, ClockError> {
        if !(1..=MAX_FACTOR).contains(&factor) {
            return Err(ClockError::Factor(factor));
        }
        Ok(Dilation {
            factor,
            real_origin: RuntimeInstant::now(),
            unix_origin_ms: unix_origin_ms.unwrap_or_else(real_unix_ms),
        })
    }

    pub fn factor(&self) -> u32 {
        self.factor
    }

    /// How long the runtime must wait for `virtual_duration` to pass.
    pub fn stretch(&self, virtual_duration: Duration) -> Duration {
        virtual_duration.saturating_mul(self.factor)
    }

    /// The virtual instant of a real one.
    fn virtual_of(&self, real: RuntimeInstant) -> RuntimeInstant {
        match real.checked_duration_since(self.real_origin) {
            Some(after) => self.real_origin + after / self.factor,
            None => self.real_origin - (self.real_origin - real) / self.factor,
        }
    }

    /// The real instant of a virtual one (when the runtime must wake for it).
    fn real_of(&self, virtual_instant: RuntimeInstant) -> RuntimeInstant {
        match virtual_instant.checked_duration_since(self.real_origin) {
            Some(after) => self.real_origin + self.stretch(after),
            None => {
                let before = self.stretch(self.real_origin - virtual_instant);
                self.real_origin
                    .checked_sub(before)
                    .unwrap_or(self.real_origin)
            }
        }
    }

    /// The virtual wall clock (ms) of a real one.
    fn unix_ms_of(&self, real_ms: u64) -> u64 {
        let origin = self.unix_origin_ms;
        let k = u64::from(self.factor);
        if real_ms >= origin {
            origin + (real_ms - origin) / k
        } else {
            origin - (origin - real_ms) / k
        }
    }
}

static DILATION: OnceLock<Dilation> = OnceLock::new();

/// Slows this process's clock K times from now on (K = 1 leaves it real). Call once, before
/// anything reads the clock.
pub fn dilate(factor: u32, unix_origin_ms: Option<u64>) -> Result<(), ClockError> {
    let dilation = Dilation::new(factor, unix_origin_ms)?;
    if factor == 1 {
        return Ok(());
    }
    DILATION
        .set(dilation)
        .map_err(|_| ClockError::AlreadyDilated(self::factor()))
}

/// K: how many times slower than real time this process's clock runs (1: not dilated).
pub fn factor() -> u32 {
    DILATION.get().map_or(1, Dilation::factor)
}

/// How long the runtime waits for `virtual_duration` of this process's time.
pub fn stretch(virtual_duration: Duration) -> Duration {
    match DILATION.get() {
        None => virtual_duration,
        Some(dilation) => dilation.stretch(virtual_duration),
    }
}

fn real_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Milliseconds since the Unix epoch on this process's clock (0 if the real clock is set before
/// it): the timestamps batches carry and latencies are measured against, comparable across the
/// processes of one host (and of one run, dilated: they share the origin).
pub fn now_ms() -> u64 {
    let real = real_unix_ms();
    match DILATION.get() {
        None => real,
        Some(dilation) => dilation.unix_ms_of(real),
    }
}

/// A moment on this process's clock. Like `std::time::Instant`, but dilated: `elapsed` and the
/// difference of two instants are virtual durations, and it has no way to read the real clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(RuntimeInstant);

impl Instant {
    pub fn now() -> Instant {
        let real = RuntimeInstant::now();
        Instant(match DILATION.get() {
            None => real,
            Some(dilation) => dilation.virtual_of(real),
        })
    }

    /// The virtual time since this instant (zero if it is in the future).
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self - earlier`, zero if `earlier` is later (as `std::time::Instant`'s is).
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }

    /// `self - earlier`, zero if `earlier` is later.
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }

    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.0.checked_duration_since(earlier.0)
    }

    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.0.checked_add(duration).map(Instant)
    }

    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.0.checked_sub(duration).map(Instant)
    }

    /// When the runtime must wake for this instant.
    fn on_runtime(self) -> RuntimeInstant {
        match DILATION.get() {
            None => self.0,
            Some(dilation) => dilation.real_of(self.0),
        }
    }

    /// This instant of a runtime's clock (a tick of tokio's), seen on this process's clock.
    fn from_runtime(real: RuntimeInstant) -> Instant {
        Instant(match DILATION.get() {
            None => real,
            Some(dilation) => dilation.virtual_of(real),
        })
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, duration: Duration) -> Instant {
        Instant(self.0 + duration)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, duration: Duration) {
        self.0 += duration;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, duration: Duration) -> Instant {
        Instant(self.0 - duration)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating, as `std::time::Instant`'s is.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// Waits `duration` of this process's time.
pub fn sleep(duration: Duration) -> tokio::time::Sleep {
    tokio::time::sleep(stretch(duration))
}

/// Waits until `deadline` on this process's clock.
pub fn sleep_until(deadline: Instant) -> tokio::time::Sleep {
    tokio::time::sleep_until(deadline.on_runtime())
}

/// Waits until `deadline` on this process's clock within microseconds, once the process
/// enabled precise sleeps ([`precise_sleep::enable`](crate::precise_sleep::enable)); tokio's
/// millisecond timer otherwise (and under a test runtime's paused clock, which only tokio's
/// timer follows).
pub async fn sleep_until_precise(deadline: Instant) {
    if crate::precise_sleep::enabled() {
        crate::precise_sleep::sleep_until(deadline.on_runtime().into_std()).await;
    } else {
        sleep_until(deadline).await;
    }
}

/// Moves a sleep made here to a new deadline.
pub fn reset(sleep: Pin<&mut tokio::time::Sleep>, deadline: Instant) {
    sleep.reset(deadline.on_runtime());
}

/// The deadline of a sleep made here, on this process's clock.
pub fn deadline(sleep: &tokio::time::Sleep) -> Instant {
    Instant::from_runtime(sleep.deadline())
}

/// Runs `future` for at most `duration` of this process's time.
pub fn timeout<F: Future>(duration: Duration, future: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(stretch(duration), future)
}

/// Blocks this thread for `duration` of this process's time (threads outside the runtime).
pub fn sleep_blocking(duration: Duration) {
    std::thread::sleep(stretch(duration));
}

/// Ticks every `period` of this process's time, the first at once (tokio's interval, dilated).
pub fn interval(period: Duration) -> Interval {
    Interval(tokio::time::interval(stretch(period)))
}

/// A dilated `tokio::time::Interval`: its ticks are instants of this process's clock.
#[derive(Debug)]
pub struct Interval(tokio::time::Interval);

impl Interval {
    /// The next tick, at the instant it was due.
    pub async fn tick(&mut self) -> Instant {
        Instant::from_runtime(self.0.tick().await)
    }

    pub fn set_missed_tick_behavior(&mut self, behavior: tokio::time::MissedTickBehavior) {
        self.0.set_missed_tick_behavior(behavior);
    }

    /// The next tick a full period from now.
    pub fn reset(&mut self) {
        self.0.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn virtual_instants_run_k_times_slower_and_agree_at_the_origin() {
        let dilation = Dilation::new(4, Some(0)).unwrap();
        let origin = dilation.real_origin;
        assert_eq!(dilation.virtual_of(origin), origin);
        tokio::time::advance(400 * MS).await;
        let real = RuntimeInstant::now();
        assert_eq!(dilation.virtual_of(real) - origin, 100 * MS);
        // And back: the runtime wakes 4 ms of real time per virtual ms.
        assert_eq!(dilation.real_of(origin + 250 * MS) - origin, 1_000 * MS);
        assert_eq!(dilation.real_of(dilation.virtual_of(real)), real);
    }

    #[tokio::test(start_paused = true)]
    async fn an_instant_before_the_origin_is_as_far_before_it_in_virtual_time() {
        tokio::time::advance(10 * MS).await;
        let before = RuntimeInstant::now();
        tokio::time::advance(80 * MS).await;
        let dilation = Dilation::new(8, Some(0)).unwrap();
        let origin = dilation.real_origin;
        assert_eq!(origin - dilation.virtual_of(before), 10 * MS);
        assert_eq!(dilation.real_of(dilation.virtual_of(before)), before);
    }

    #[test]
    fn wall_clock_milliseconds_agree_at_the_shared_origin() {
        let dilation = Dilation::new(10, Some(1_000_000)).unwrap();
        assert_eq!(dilation.unix_ms_of(1_000_000), 1_000_000);
        assert_eq!(dilation.unix_ms_of(1_010_000), 1_001_000);
        assert_eq!(dilation.unix_ms_of(990_000), 999_000);
        // Two processes dilated at different moments with one origin read the same time.
        let later = Dilation::new(10, Some(1_000_000)).unwrap();
        assert_eq!(later.unix_ms_of(1_234_560), dilation.unix_ms_of(1_234_560));
    }

    #[test]
    fn factors_outside_one_to_the_maximum_are_refused() {
        assert_eq!(Dilation::new(0, None).unwrap_err(), ClockError::Factor(0));
        assert_eq!(
            Dilation::new(MAX_FACTOR + 1, None).unwrap_err(),
            ClockError::Factor(MAX_FACTOR + 1)
        );
        assert_eq!(Dilation::new(3, None).unwrap().stretch(7 * MS), 21 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn undilated_the_clock_is_the_runtimes() {
        // This test binary never dilates (a process is dilated once: that is tested in
        // tests/dilated_clock.rs, a binary of its own).
        assert_eq!(factor(), 1);
        let start = Instant::now();
        let real = RuntimeInstant::now();
        sleep(5 * MS).await;
        assert_eq!(start.elapsed(), 5 * MS);
        assert_eq!(RuntimeInstant::now() - real, 5 * MS);
        let mut ticks = interval(3 * MS);
        assert_eq!(ticks.tick().await, start + 5 * MS);
        assert_eq!(ticks.tick().await, start + 8 * MS);
    }
}
