//! Per-stage counters for the METRICS line: how much a stage did, how long it was busy, and
//! what it rejected. Together with the metered channels between stages they name the bottleneck.

use crate::metrics::Reporter;
use consensus::metered::ChannelMetrics;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
pub struct StageMetrics {
    /// Transactions that left the stage's input (processed, whatever the outcome).
    pub items: AtomicU64,
    pub batches: AtomicU64,
    busy_ns: AtomicU64,
    pub invalid: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
    pub executed: AtomicU64,
    pub backlog: AtomicU64,
    // Batch sizes since the last report, for the interval's mean.
    interval_items: AtomicU64,
    interval_batches: AtomicU64,
    /// Stage-specific fields (the executor's state digest and drop reasons).
    extra: Mutex<Map<String, Value>>,
}

impl StageMetrics {
    pub fn record_batch(&self, items: u64, busy: Duration) {
        self.items.fetch_add(items, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.busy_ns
            .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
        self.interval_items.fetch_add(items, Ordering::Relaxed);
        self.interval_batches.fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_extra(&self, key: &str, value: Value) {
        if let Ok(mut extra) = self.extra.lock() {
            extra.insert(key.to_string(), value);
        }
    }

    fn snapshot(&self) -> Value {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let items = self.interval_items.swap(0, Ordering::Relaxed);
        let batches = self.interval_batches.swap(0, Ordering::Relaxed);
        let mut object = json!({
            "items": load(&self.items),
            "batches": load(&self.batches),
            "busy_ms": load(&self.busy_ns) as f64 / 1e6,
            "invalid": load(&self.invalid),
            "failed": load(&self.failed),
            "dropped": load(&self.dropped),
            "executed": load(&self.executed),
            "backlog": load(&self.backlog),
            "batch_size_mean": if batches == 0 { 0.0 } else { items as f64 / batches as f64 },
        });
        if let (Some(object), Ok(extra)) = (object.as_object_mut(), self.extra.lock()) {
            object.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        object
    }
}

fn section<'a>(line: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = line
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

pub struct StageReporter {
    pub name: &'static str,
    pub metrics: Arc<StageMetrics>,
}

impl Reporter for StageReporter {
    fn report(&self, line: &mut Map<String, Value>) {
        section(line, "stages").insert(self.name.into(), self.metrics.snapshot());
    }
}

pub struct ChannelReporter {
    pub name: &'static str,
    pub metrics: Arc<ChannelMetrics>,
}

impl Reporter for ChannelReporter {
    fn report(&self, line: &mut Map<String, Value>) {
        let snapshot = serde_json::to_value(self.metrics.snapshot()).unwrap_or(Value::Null);
        section(line, "channels").insert(self.name.into(), snapshot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reporters_share_the_sections() {
        let stage = Arc::new(StageMetrics::default());
        stage.record_batch(10, Duration::from_millis(3));
        stage.record_batch(20, Duration::from_millis(1));
        stage.set_extra("state_digest", json!("ab"));
        let (_tx, _rx, channel) = consensus::metered::channel::<u8>(4);
        let mut line = Map::new();
        StageReporter {
            name: "executor",
            metrics: stage.clone(),
        }
        .report(&mut line);
        StageReporter {
            name: "verifier",
            metrics: stage,
        }
        .report(&mut line);
        ChannelReporter {
            name: "a->b",
            metrics: channel,
        }
        .report(&mut line);
        let executor = &line["stages"]["executor"];
        assert_eq!(executor["items"], 30);
        assert_eq!(executor["batch_size_mean"], 15.0);
        assert_eq!(executor["busy_ms"], 4.0);
        assert_eq!(executor["state_digest"], "ab");
        // The interval mean was consumed by the first report.
        assert_eq!(line["stages"]["verifier"]["batch_size_mean"], 0.0);
        assert_eq!(line["channels"]["a->b"]["capacity"], 4);
    }
}
