//! The metrics of a process (node, client or standalone `movevm`): one [`Registry`] of
//! [`Source`]s, read by two writers: the `METRICS {json}` line on stdout every interval (what
//! the harness parses) and, when asked for, a Prometheus endpoint (what a dashboard scrapes).
//!
//! Counters are cumulative so a lost line loses nothing; the harness differences them. Values
//! that describe one interval (mean queue length, mean batch size, sample events) are taken only
//! by the line, so a scrape never steals them from it.

pub mod cpu;
mod prometheus;
mod snapshot;
mod sources;

pub use self::prometheus::{render as render_prometheus, serve as serve_prometheus, EndpointError};
pub use cpu::ProcessSource;
pub use snapshot::{Entry, Group, Scope, Snapshot, Value};
pub use sources::{ChannelSource, QueueSource, SampleEvent, SampleLog};

pub use plumbing::now_ms;
use serde_json::{json, Value as Json};
use std::io::Write;
use std::sync::Arc;

/// Something that adds its metrics to a snapshot: a stage, a channel, consensus, a client.
pub trait Source: Send + Sync {
    fn collect(&self, snapshot: &mut Snapshot);
}

impl<T: Source + ?Sized> Source for Arc<T> {
    fn collect(&self, snapshot: &mut Snapshot) {
        (**self).collect(snapshot)
    }
}

/// Every source of one process, and what the process is.
pub struct Registry {
    role: String,
    name: String,
    mode: String,
    sources: Vec<Box<dyn Source>>,
}

impl Registry {
    pub fn new(role: &str, name: &str, mode: &str) -> Self {
        Registry {
            role: role.into(),
            name: name.into(),
            mode: mode.into(),
            sources: Vec::new(),
        }
    }

    pub fn add(&mut self, source: impl Source + 'static) {
        self.sources.push(Box::new(source));
    }

    pub fn with(mut self, source: impl Source + 'static) -> Self {
        self.add(source);
        self
    }

    /// Reads every source; `interval` as in [`Snapshot::new`].
    pub fn snapshot(&self, interval: bool) -> Snapshot {
        let mut snapshot = Snapshot::new(interval);
        snapshot
            .top()
            .text("role", self.role.clone())
            .text("name", self.name.clone())
            .text("mode", self.mode.clone());
        for source in &self.sources {
            source.collect(&mut snapshot);
        }
        snapshot
    }

    /// `METRICS {json}`: the interval's snapshot, stamped with the time and whether it is the
    /// process's last line.
    pub fn line(&self, final_line: bool) -> String {
        let mut snapshot = self.snapshot(true);
        snapshot
            .top()
            .json("time_ms", json!(now_ms()))
            .json("final", json!(final_line));
        format!("METRICS {}", Json::Object(snapshot.to_json()))
    }

    /// Prints one line to stdout, newline included, in one `write`: the harness sends stderr
    /// (the logs) to the same file, and a log line written between the JSON and its newline made
    /// the METRICS line unreadable.
    pub fn emit(&self, final_line: bool) {
        let mut line = self.line(final_line);
        line.push('\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Interval(std::sync::atomic::AtomicU64);

    impl Source for Interval {
        fn collect(&self, snapshot: &mut Snapshot) {
            let mut scope = snapshot.section("probe");
            scope.counter("total", 1.0);
            if scope.takes_interval() {
                let taken = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                scope.json("taken", json!(taken));
            }
        }
    }

    #[test]
    fn a_scrape_leaves_interval_values_to_the_line() {
        let registry =
            Arc::new(Registry::new("node", "n", "hotstuff").with(Interval(Default::default())));
        let mut text = String::new();
        render_prometheus(&registry, &mut text).expect("render");
        render_prometheus(&registry, &mut text).expect("render");
        let line = registry.line(true);
        let json: Json =
            serde_json::from_str(line.strip_prefix("METRICS ").expect("prefix")).expect("json");
        // Two scrapes took nothing: the line's interval value is the first one.
        assert_eq!(json["probe"]["taken"], 0);
        assert_eq!(json["probe"]["total"], 1);
        assert_eq!(json["role"], "node");
        assert_eq!(json["final"], true);
        assert!(json["time_ms"].as_u64().is_some());
    }
}
