//! The metrics of a process (node, client or standalone `movevm`): one [`Registry`] of
//! [`Source`]s, read by two writers: the `METRICS {json}` line on stdout every interval (what
//! the harness parses) and, when asked for, a Prometheus endpoint (what a dashboard scrapes).
//!
//! Counters are cumulative so a lost line loses nothing; the harness differences them. Values
//! that describe one interval (mean queue length, mean batch size, sample events) are taken only
//! by the line, so a scrape never steals them from it.

pub mod cpu;
mod prometheus;
mod registry;
mod snapshot;
mod source;
mod sources;

pub use self::prometheus::{render as render_prometheus, serve as serve_prometheus, EndpointError};
pub use cpu::ProcessSource;
pub use registry::Registry;
pub use snapshot::{Entry, Group, Scope, Snapshot, Value};
pub use source::Source;
pub use sources::{ChannelSource, QueueSource, SampleEvent, SampleLog};

pub use plumbing::now_ms;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value as Json};
    use std::sync::Arc;

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
