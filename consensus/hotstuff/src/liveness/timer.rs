//! The pacemaker's round timer: fires once `delay` passes without a reset.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{sleep, Instant, Sleep};

pub struct Timer {
    delay: Duration,
    sleep: Pin<Box<Sleep>>,
}

impl Timer {
    pub fn new(delay: Duration) -> Self {
        Timer {
            delay,
            sleep: Box::pin(sleep(delay)),
        }
    }

    pub fn reset(&mut self) {
        self.sleep.as_mut().reset(Instant::now() + self.delay);
    }

    /// When the timer fires next.
    #[cfg(test)]
    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
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
