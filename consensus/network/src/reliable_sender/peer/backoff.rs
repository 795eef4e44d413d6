//! The wait between connection attempts to a peer.

use rand::Rng;
use std::time::Duration;

/// Exponential backoff with jitter, so peers restarting together do not reconnect in lockstep.
pub(super) struct Backoff {
    next: Duration,
    initial: Duration,
    max: Duration,
}

impl Backoff {
    pub(super) fn new((initial, max): (Duration, Duration)) -> Self {
        Self {
            next: initial,
            initial,
            max,
        }
    }

    pub(super) fn reset(&mut self) {
        self.next = self.initial;
    }

    pub(super) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (base * 2).min(self.max);
        // Uniform in [base / 2, base * 3 / 2), capped.
        let jitter = rand::thread_rng().gen_range(0.5..1.5);
        base.mul_f64(jitter).min(self.max)
    }
}
