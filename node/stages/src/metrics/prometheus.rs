//! `GET /metrics` in the Prometheus (OpenMetrics) text format, rendered at each scrape from the
//! same [`Registry`] the `METRICS` line reads: names are `hotmove_<section>_<field>`, stages and
//! channels are labels (`hotmove_stage_items_total{stage="executor"}`).
//!
//! prometheus-client does the text format; tiny_http serves it from one thread of its own, so
//! a scrape never waits on (or delays) the node's runtime or its stages.

use super::registry::Registry;
use super::snapshot::{Entry, Group, Value};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::net::SocketAddr;
use std::sync::Arc;
use thiserror::Error;
use tracing::{info, warn};

pub const PREFIX: &str = "hotmove";
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Error)]
pub enum EndpointError {
    #[error("cannot serve Prometheus metrics on {address}: {reason}")]
    Bind { address: SocketAddr, reason: String },
    #[error("cannot start the Prometheus thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// Serves `GET /metrics` on `address` from a thread of its own; returns the bound address
/// (port 0 picks a free one).
pub fn serve(address: SocketAddr, registry: Arc<Registry>) -> Result<SocketAddr, EndpointError> {
    let server = tiny_http::Server::http(address).map_err(|e| EndpointError::Bind {
        address,
        reason: e.to_string(),
    })?;
    let bound = server.server_addr().to_ip().unwrap_or(address);
    std::thread::Builder::new()
        .name("prometheus".into())
        .spawn(move || {
            for request in server.incoming_requests() {
                let response = if request.url() == "/metrics" {
                    let mut body = String::new();
                    match render(&registry, &mut body) {
                        Ok(()) => with_type(tiny_http::Response::from_string(body)),
                        Err(_) => tiny_http::Response::from_string("encoding failed\n")
                            .with_status_code(500),
                    }
                } else {
                    tiny_http::Response::from_string("not found: try /metrics\n")
                        .with_status_code(404)
                };
                if let Err(e) = request.respond(response) {
                    warn!("prometheus: cannot answer a scrape: {e}");
                }
            }
        })?;
    info!("Prometheus metrics on http://{bound}/metrics");
    Ok(bound)
}

fn with_type(
    response: tiny_http::Response<std::io::Cursor<Vec<u8>>>,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    match tiny_http::Header::from_bytes("Content-Type", CONTENT_TYPE) {
        Ok(header) => response.with_header(header),
        Err(()) => response,
    }
}

/// The text exposition of every counter and gauge the registry holds now.
pub fn render(registry: &Arc<Registry>, out: &mut String) -> std::fmt::Result {
    let mut exposition = prometheus_client::registry::Registry::default();
    exposition.register_collector(Box::new(ScrapeCollector(registry.clone())));
    prometheus_client::encoding::text::encode(out, &exposition)
}

/// Reads the registry at each scrape (a collector, not instruments of its own: the counters
/// already live in the stages and channels).
struct ScrapeCollector(Arc<Registry>);

impl std::fmt::Debug for ScrapeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScrapeCollector")
    }
}

/// One metric family: its name, its type, and each labelled value.
struct Family {
    name: String,
    help: String,
    counter: bool,
    values: Vec<(Vec<(String, String)>, f64)>,
}

impl Collector for ScrapeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let snapshot = self.0.snapshot(false);
        for family in families(snapshot.entries()) {
            let kind = if family.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut metric = encoder.encode_descriptor(&family.name, &family.help, None, kind)?;
            match family.values.as_slice() {
                // One value without labels: no `{}` after the name.
                [(labels, value)] if labels.is_empty() => {
                    encode_value(metric, family.counter, *value)?
                }
                values => {
                    for (labels, value) in values {
                        encode_value(metric.encode_family(labels)?, family.counter, *value)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn encode_value(encoder: MetricEncoder, counter: bool, value: f64) -> std::fmt::Result {
    // Counts print as integers (`12`, not `12.0`); times and means as decimals.
    let whole = value.fract() == 0.0 && value.abs() < 9.0e15;
    match (counter, whole) {
        (true, true) if value >= 0.0 => ConstCounter::new(value as u64).encode(encoder),
        (true, _) => ConstCounter::new(value).encode(encoder),
        (false, true) => ConstGauge::new(value as i64).encode(encoder),
        (false, false) => ConstGauge::new(value).encode(encoder),
    }
}

/// Groups the numeric entries into families; text at the top becomes the labels of
/// `hotmove_info`, other text and JSON-only values are left to the `METRICS` line.
fn families(entries: &[Entry]) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    let mut info_labels = Vec::new();
    for entry in entries {
        let (name, path, labels) = match &entry.group {
            Group::Top => (
                format!("{PREFIX}_{}", entry.field),
                entry.field.clone(),
                Vec::new(),
            ),
            Group::Section(section) => (
                format!("{PREFIX}_{section}_{}", entry.field),
                format!("{section}.{}", entry.field),
                Vec::new(),
            ),
            Group::Member {
                section,
                label,
                name,
            } => (
                format!("{PREFIX}_{label}_{}", entry.field),
                format!("{section}.<{label}>.{}", entry.field),
                vec![(label.to_string(), name.clone())],
            ),
        };
        let (counter, values) = match &entry.value {
            Value::Counter(v) => (true, vec![(labels, *v)]),
            Value::Gauge(v) => (false, vec![(labels, *v)]),
            Value::Counts { label, counts } => (
                true,
                counts
                    .iter()
                    .map(|(key, v)| {
                        let mut labels = labels.clone();
                        labels.push((label.to_string(), key.clone()));
                        (labels, *v)
                    })
                    .collect(),
            ),
            Value::Text(text) if entry.group == Group::Top => {
                info_labels.push((entry.field.clone(), text.clone()));
                continue;
            }
            Value::Text(_) | Value::Json(_) => continue,
        };
        match families.iter_mut().find(|f| f.name == name) {
            Some(family) => family.values.extend(values),
            None => families.push(Family {
                name,
                help: format!("{path} of the METRICS line"),
                counter,
                values,
            }),
        }
    }
    if !info_labels.is_empty() {
        families.push(Family {
            name: format!("{PREFIX}_info"),
            help: "what this process is (role, name, mode)".into(),
            counter: false,
            values: vec![(info_labels, 1.0)],
        });
    }
    families
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::snapshot::Snapshot;
    use crate::metrics::source::Source;

    struct Fixed;

    impl Source for Fixed {
        fn collect(&self, snapshot: &mut Snapshot) {
            snapshot
                .section("consensus")
                .counter("committed_txs", 12.0)
                .gauge("round", 3.0);
            for stage in ["verifier", "executor"] {
                snapshot
                    .member("stages", "stage", stage)
                    .counter("items", 5.0)
                    .counts("dropped_by_reason", "reason", vec![("stale".into(), 1.0)])
                    .text("state_digest", "ab");
            }
            if snapshot.takes_interval() {
                snapshot
                    .member("stages", "stage", "executor")
                    .gauge("batch_size_mean", 2.0);
            }
        }
    }

    #[test]
    fn renders_counters_gauges_and_labels() {
        let registry = Arc::new(Registry::new("node", "n0", "hotmove").with(Fixed));
        let mut text = String::new();
        render(&registry, &mut text).expect("render");
        for expected in [
            "# TYPE hotmove_consensus_committed_txs counter",
            "hotmove_consensus_committed_txs_total 12\n",
            "# TYPE hotmove_consensus_round gauge",
            "hotmove_stage_items_total{stage=\"verifier\"} 5",
            "hotmove_stage_items_total{stage=\"executor\"} 5",
            "hotmove_stage_dropped_by_reason_total{stage=\"executor\",reason=\"stale\"} 1",
            "hotmove_info{role=\"node\",name=\"n0\",mode=\"hotmove\"} 1",
            "# EOF",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        // One TYPE line per family, however many stages carry it.
        assert_eq!(
            text.matches("# TYPE hotmove_stage_items counter").count(),
            1
        );
        // Interval values and text belong to the METRICS line only.
        assert!(!text.contains("batch_size_mean"), "{text}");
        assert!(!text.contains("state_digest"), "{text}");
    }
}
