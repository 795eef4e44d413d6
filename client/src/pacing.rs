//! The client's pace: a burst every `period`, on a grid fixed at the start. A burst whose time
//! comes while the one before it is still being written (the node holds the write back) is
//! skipped and counted, never sent later: catching the missed bursts up after the hold would
//! offer more than the rate asked in the seconds that follow it, so a window that begins after
//! a hold (the warm-up's, typically) would deliver more than was asked of it.

use plumbing::clock::{interval, Instant, Interval};
use std::time::Duration;
use tokio::time::MissedTickBehavior;

/// A burst that is due: when it was due, and how many bursts before it were skipped (their time
/// came and went while a write was held).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    pub deadline: Instant,
    pub skipped: u64,
}

pub struct Pacer {
    ticker: Interval,
    period: Duration,
    last: Option<Instant>,
}

impl Pacer {
    /// The first burst is due at once.
    pub fn new(period: Duration) -> Self {
        let mut ticker = interval(period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
        Pacer {
            ticker,
            period,
            last: None,
        }
    }

    /// The next burst. After a hold, the first burst comes at once (late) and the next at the
    /// next point of the grid; the points in between are the skipped ones, reported with that
    /// next burst.
    pub async fn tick(&mut self) -> Due {
        let deadline = self.ticker.tick().await;
        let skipped = self
            .last
            .map_or(0, |last| skipped_between(last, deadline, self.period));
        self.last = Some(deadline);
        Due { deadline, skipped }
    }
}

/// Points of a grid of `period` strictly between two bursts due at `last` and `next`.
fn skipped_between(last: Instant, next: Instant, period: Duration) -> u64 {
    let gap = next.saturating_duration_since(last).as_nanos();
    let period = period.as_nanos().max(1);
    // Rounded: a tick runs late by a little and the grid is not exact to the nanosecond.
    let steps = (gap + period / 2) / period;
    u64::try_from(steps.saturating_sub(1)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_millis(50);

    /// Bursts made from now until `until` of the paused clock, and the skipped ones they report.
    async fn bursts_until(pacer: &mut Pacer, until: tokio::time::Instant) -> (u64, u64) {
        let (mut bursts, mut skipped) = (0, 0);
        loop {
            let due = pacer.tick().await;
            if tokio::time::Instant::now() >= until {
                return (bursts, skipped + due.skipped);
            }
            bursts += 1;
            skipped += due.skipped;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_unhindered_client_makes_a_burst_every_period_and_skips_none() {
        let mut pacer = Pacer::new(PERIOD);
        let start = tokio::time::Instant::now();
        let (bursts, skipped) = bursts_until(&mut pacer, start + Duration::from_secs(1)).await;
        assert_eq!((bursts, skipped), (20, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_write_skips_the_bursts_it_held_back_instead_of_sending_them_late() {
        let mut pacer = Pacer::new(PERIOD);
        let start = tokio::time::Instant::now();
        assert_eq!(pacer.tick().await.skipped, 0);
        // The node holds that burst's write back for a second: no burst is made meanwhile.
        tokio::time::advance(Duration::from_secs(1)).await;
        // In the period after the hold, one burst (the late one), not the twenty missed.
        let (bursts, skipped) = bursts_until(&mut pacer, start + Duration::from_millis(1050)).await;
        assert_eq!(bursts, 1, "bursts made in the period after the hold");
        // Due at 0, 50, ..., 1050 ms: 22 points, 3 of them sent (0, the late one, 1050).
        assert_eq!(skipped, 19);
        // Then the pace is the rate's again: 1,100 to 2,050 ms.
        let (bursts, skipped) = bursts_until(&mut pacer, start + Duration::from_millis(2100)).await;
        assert_eq!((bursts, skipped), (20, 0));
    }

    #[test]
    fn the_skipped_points_are_those_strictly_between_two_bursts() {
        let zero = Instant::now();
        assert_eq!(skipped_between(zero, zero + PERIOD, PERIOD), 0);
        assert_eq!(skipped_between(zero, zero + 20 * PERIOD, PERIOD), 19);
        // A burst a little late is not a skipped one.
        let late = zero + PERIOD + Duration::from_millis(3);
        assert_eq!(skipped_between(zero, late, PERIOD), 0);
    }
}
