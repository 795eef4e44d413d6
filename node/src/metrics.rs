//! The node's METRICS lines: one JSON object per interval on stdout, and a final one at shutdown.
//!
//! Counters are cumulative so a lost line loses nothing; the harness differences them.

use consensus::{ConsensusHandle, ConsensusMetrics};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

pub use consensus::mempool::batch::now_ms;

/// A sample transaction reaching a milestone (committed, executed) on this node.
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

    pub fn drain(&self) -> Vec<SampleEvent> {
        self.0
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

/// Something that adds its own section to the node's METRICS line (a pipeline stage, a channel).
pub trait Reporter: Send + Sync {
    fn report(&self, line: &mut Map<String, Value>);
}

pub struct NodeMetrics {
    pub name: String,
    pub mode: String,
    pub consensus: ConsensusHandle,
    pub samples: Arc<SampleLog>,
    pub reporters: Vec<Box<dyn Reporter>>,
}

impl NodeMetrics {
    fn consensus(&self) -> &ConsensusMetrics {
        &self.consensus.metrics
    }

    pub fn line(&self, final_line: bool) -> String {
        let snapshot = self.consensus().snapshot();
        let mempool = &self.consensus.mempool;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let mut line = Map::new();
        line.insert("role".into(), json!("node"));
        line.insert("name".into(), json!(self.name));
        line.insert("mode".into(), json!(self.mode));
        line.insert("time_ms".into(), json!(now_ms()));
        line.insert("final".into(), json!(final_line));
        line.insert(
            "consensus".into(),
            json!({
                "round": snapshot.round,
                "committed_blocks": snapshot.committed_blocks,
                "committed_batches": snapshot.committed_batches,
                "committed_txs": snapshot.committed_txs,
                "committed_bytes": snapshot.committed_bytes,
                "timeouts": snapshot.timeouts,
                "sealed_batches": load(&mempool.sealed_batches),
                "sealed_txs": load(&mempool.sealed_txs),
                "sealed_bytes": load(&mempool.sealed_bytes),
                "received_batches": load(&mempool.received_batches),
                "rejected_frames": load(&mempool.rejected_frames),
            }),
        );
        line.insert(
            "batch_latencies_ms".into(),
            json!(self.consensus().drain_batch_latencies()),
        );
        line.insert("samples".into(), json!(self.samples.drain()));
        for reporter in &self.reporters {
            reporter.report(&mut line);
        }
        format!("METRICS {}", Value::Object(line))
    }

    /// Prints one line to stdout, newline included, in one `write`: fab sends stderr (the
    /// logs) to the same file, and a log line written between the JSON and its newline made the
    /// METRICS line unreadable.
    pub fn emit(&self, final_line: bool) {
        let mut line = self.line(final_line);
        line.push('\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}
