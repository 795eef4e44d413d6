//! The client's metrics: cumulative counters and the sample send times of the interval, a
//! [`Source`] of the registry that writes the METRICS line (and serves Prometheus).

use serde::Serialize;
use serde_json::json;
use stages::metrics::{Snapshot, Source};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub use stages::metrics::now_ms;

#[derive(Serialize, Clone, Debug)]
pub struct SampleSent {
    pub id: String,
    pub t_ms: u64,
}

pub struct ClientMetrics {
    /// The rate this client was asked for (tx/s).
    pub rate: u64,
    pub sent: AtomicU64,
    pub sent_bytes: AtomicU64,
    /// Bursts written later than an interval after they were due.
    pub missed_bursts: AtomicU64,
    /// Bursts made, and bursts skipped: due while the node held the write of the one before
    /// back (`pacing.rs`). Their share is how much of the time the client was held back.
    pub bursts: AtomicU64,
    pub skipped_bursts: AtomicU64,
    pub invalid_sent: AtomicU64,
    /// Times the client's node went away and it moved to another (`failover.rs`).
    pub failovers: AtomicU64,
    /// Transactions sent again after a failover (not counted in `sent`).
    pub resent: AtomicU64,
    samples: Mutex<Vec<SampleSent>>,
}

impl ClientMetrics {
    pub fn new(rate: u64) -> Self {
        ClientMetrics {
            rate,
            sent: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            missed_bursts: AtomicU64::new(0),
            bursts: AtomicU64::new(0),
            skipped_bursts: AtomicU64::new(0),
            invalid_sent: AtomicU64::new(0),
            failovers: AtomicU64::new(0),
            resent: AtomicU64::new(0),
            samples: Mutex::new(Vec::new()),
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) -> u64 {
        counter.fetch_add(n, Ordering::Relaxed) + n
    }

    pub fn push_sample(&self, sample: SampleSent) {
        if let Ok(mut samples) = self.samples.lock() {
            samples.push(sample);
        }
    }
}

impl Source for ClientMetrics {
    fn collect(&self, snapshot: &mut Snapshot) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        let mut top = snapshot.top();
        top.gauge("rate", self.rate as f64)
            .counter("sent", load(&self.sent))
            .counter("sent_bytes", load(&self.sent_bytes))
            .counter("missed_bursts", load(&self.missed_bursts))
            .counter("bursts", load(&self.bursts))
            .counter("skipped_bursts", load(&self.skipped_bursts))
            .counter("invalid_sent", load(&self.invalid_sent))
            .counter("failovers", load(&self.failovers))
            .counter("resent", load(&self.resent));
        if top.takes_interval() {
            let samples = self
                .samples
                .lock()
                .map(|mut s| std::mem::take(&mut *s))
                .unwrap_or_default();
            top.json("samples", json!(samples));
        }
    }
}
