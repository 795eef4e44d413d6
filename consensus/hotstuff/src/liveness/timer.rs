//! The pacemaker's round timer: fires once `delay` passes without a reset.

use plumbing::clock::{self, Instant};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;

pub struct Timer {
    delay: Duration,
    sleep: Pin<Box<Sleep>>,
}

impl Timer {
    pub fn new(delay: Duration) -> Self {
        Timer {
            delay,
            sleep: Box::pin(clock::sleep(delay)),
        }
    }

    pub fn reset(&mut self) {
        clock::reset(self.sleep.as_mut(), Instant::now() + self.delay);
    }

    /// When the timer fires next.
    #[cfg(test)]
    pub fn deadline(&self) -> Instant {
        clock::deadline(&self.sleep)
    }
}

impl Future for Timer {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.sleep.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn fires_after_delay_and_reset_postpones() {
        let start = Instant::now();
        let mut timer = Timer::new(Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(60)).await;
        timer.reset();
        (&mut timer).await;
        assert!(start.elapsed() >= Duration::from_millis(160));
    }
}
