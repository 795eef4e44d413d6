//! The sources every pipeline has: the metered channels between stages, the queues where peers'
//! messages wait, and the sample transactions seen this interval. (A replica's consensus and
//! mempool counters are the `node` binary's source: the stages know no consensus.)

use super::snapshot::Scope;
use super::snapshot::Snapshot;
use super::source::Source;
use plumbing::metered::{ChannelMetrics, NamedChannel};
use serde::Serialize;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// A metered channel between two stages, named `producer->consumer`.
pub struct ChannelSource {
    pub name: String,
    pub metrics: Arc<ChannelMetrics>,
}

impl Source for ChannelSource {
    fn collect(&self, snapshot: &mut Snapshot) {
        let scope = snapshot.member("channels", "channel", self.name.clone());
        channel_fields(scope, &self.metrics);
    }
}

/// A queue where messages from peers wait for consensus or the mempool, bounded in bytes as well
/// as in messages (`core_input`, `batch_requests`). Its own section, so the harness's reading of
/// the pipeline's stage channels is left as it was.
pub struct QueueSource(pub NamedChannel);

impl Source for QueueSource {
    fn collect(&self, snapshot: &mut Snapshot) {
        let scope = snapshot.member("queues", "queue", self.0.name);
        channel_fields(scope, &self.0.metrics);
    }
}

/// A channel's counters; for one with a byte budget, the budget and the bytes queued (their sum
/// over the sends, as `len_sum`, and the interval's mean and maximum) too.
fn channel_fields(mut scope: Scope<'_>, metrics: &ChannelMetrics) {
    let totals = metrics.snapshot();
    let budgeted = totals.budget_bytes > 0;
    scope
        .gauge("capacity", totals.capacity as f64)
        .counter("sent", totals.sent as f64)
        .counter("full", totals.full as f64)
        .counter("blocked_ms", totals.blocked_ms)
        .counter("len_sum", totals.len_sum as f64)
        .counter("len_samples", totals.len_samples as f64);
    if budgeted {
        scope
            .gauge("budget_bytes", totals.budget_bytes as f64)
            .counter("bytes_sum", totals.bytes_sum as f64);
    }
    if scope.takes_interval() {
        let interval = metrics.take_interval();
        scope
            .json("mean_len", json!(interval.mean_len))
            .json("max_len", json!(interval.max_len));
        if budgeted {
            scope
                .json("mean_bytes", json!(interval.mean_bytes))
                .json("max_bytes", json!(interval.max_bytes));
        }
    }
}

/// A sample transaction reaching a hop on this node: `receive`, `seal`, `quorum` (mempool of the
/// node it was sent to), `commit`, `verify`, `execute`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct SampleEvent {
    pub id: String,
    pub event: &'static str,
    pub t_ms: u64,
}

/// Sample events gathered between two METRICS lines.
#[derive(Default)]
pub struct SampleLog(Mutex<Vec<SampleEvent>>);

impl SampleLog {
    pub fn push(&self, event: SampleEvent) {
        if let Ok(mut events) = self.0.lock() {
            events.push(event);
        }
    }

    pub(crate) fn drain(&self) -> Vec<SampleEvent> {
        self.0
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

impl Source for SampleLog {
    fn collect(&self, snapshot: &mut Snapshot) {
        if snapshot.takes_interval() {
            snapshot.top().json("samples", json!(self.drain()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{render_prometheus, Registry};
    use plumbing::budgeted;
    use serde_json::Value as Json;

    /// A queue bounded in bytes reports its budget and the bytes its sends saw queued, in its
    /// own section (stage channels, without a budget, report no byte fields).
    #[tokio::test]
    async fn a_queue_reports_its_bytes() {
        let (tx, _rx, metrics) = budgeted::channel::<u8>(10, 1_000);
        tx.send(1, 300).await.expect("send");
        tx.send(2, 200).await.expect("send");
        let (_stage_tx, _stage_rx, stage) = plumbing::metered::channel::<u8>(10);
        let registry = Arc::new(
            Registry::new("node", "n", "hotstuff")
                .with(QueueSource(NamedChannel::new("core_input", metrics)))
                .with(ChannelSource {
                    name: "consensus->sink".into(),
                    metrics: stage,
                }),
        );
        let mut text = String::new();
        render_prometheus(&registry, &mut text).expect("render");
        assert!(
            text.contains(r#"hotmove_queue_budget_bytes{queue="core_input"} 1000"#),
            "{text}"
        );
        assert!(
            text.contains(r#"hotmove_queue_bytes_sum_total{queue="core_input"} 300"#),
            "{text}"
        );
        assert!(!text.contains("hotmove_channel_budget_bytes"), "{text}");
        let line = registry.line(false);
        let json: Json =
            serde_json::from_str(line.strip_prefix("METRICS ").expect("prefix")).expect("json");
        let queue = &json["queues"]["core_input"];
        assert_eq!(queue["sent"], 2);
        assert_eq!(queue["max_bytes"], 300);
        assert_eq!(queue["mean_bytes"], 150.0);
        assert!(json["channels"]["consensus->sink"]["max_bytes"].is_null());
    }
}
