//! The process-wide clock once dilated (a test binary of its own: a process is dilated once).

use plumbing::clock::{self, ClockError, Instant};
use std::time::Duration;
use tokio::time::Instant as RuntimeInstant;

const K: u32 = 4;

/// One test, because the dilation is the process's: every check runs on the one clock.
#[tokio::test(start_paused = true)]
async fn a_dilated_process_waits_k_times_longer_for_everything() {
    let origin_ms = clock::now_ms();
    clock::dilate(K, Some(origin_ms)).expect("dilated once");
    assert_eq!(clock::factor(), K);
    assert_eq!(clock::dilate(2, None), Err(ClockError::AlreadyDilated(K)));

    // A 1 s timer lasts K s of the runtime's (here paused, so exact) clock.
    let (start, real_start) = (Instant::now(), RuntimeInstant::now());
    clock::sleep(Duration::from_secs(1)).await;
    assert_eq!(RuntimeInstant::now() - real_start, Duration::from_secs(4));
    assert_eq!(start.elapsed(), Duration::from_secs(1));

    // sleep_until, a reset sleep and its deadline, on the process's clock.
    let deadline = Instant::now() + Duration::from_millis(250);
    clock::sleep_until(deadline).await;
    assert_eq!(Instant::now(), deadline);
    let sleep = clock::sleep(Duration::from_secs(3600));
    tokio::pin!(sleep);
    let soon = Instant::now() + Duration::from_millis(10);
    clock::reset(sleep.as_mut(), soon);
    assert_eq!(clock::deadline(&sleep), soon);
    let before = RuntimeInstant::now();
    sleep.await;
    assert_eq!(RuntimeInstant::now() - before, Duration::from_millis(40));

    // Intervals tick on the process's clock; timeouts give up after K times as long.
    let mut ticks = clock::interval(Duration::from_millis(100));
    let first = ticks.tick().await;
    assert_eq!(ticks.tick().await - first, Duration::from_millis(100));
    let before = RuntimeInstant::now();
    let gave_up = clock::timeout(Duration::from_millis(20), std::future::pending::<()>()).await;
    assert!(gave_up.is_err());
    assert_eq!(RuntimeInstant::now() - before, Duration::from_millis(80));

    // A thread outside the runtime blocks K times as long (real time: a lower bound only).
    let real = std::time::Instant::now();
    clock::sleep_blocking(Duration::from_millis(25));
    assert!(real.elapsed() >= Duration::from_millis(100));

    // Wall-clock milliseconds advance K times slower than the real ones, from the origin.
    let real_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64;
    let read = clock::now_ms();
    assert!(read >= origin_ms);
    assert!(read - origin_ms <= (real_ms - origin_ms) / u64::from(K) + 1);
}
