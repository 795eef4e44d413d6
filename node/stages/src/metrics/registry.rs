//! Every source of one process ([`Registry`]), read into a snapshot, and the `METRICS {json}`
//! line it prints.

use super::snapshot::Snapshot;
use super::source::Source;
use plumbing::now_ms;
use serde_json::{json, Value as Json};
use std::io::Write;

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
