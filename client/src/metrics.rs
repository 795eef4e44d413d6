//! The client's METRICS lines (cumulative counters, sample send times of the interval).

use serde::Serialize;
use serde_json::json;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[derive(Serialize, Clone, Debug)]
pub struct SampleSent {
    pub id: String,
    pub t_ms: u64,
}

#[derive(Default)]
pub struct ClientMetrics {
    pub sent: u64,
    pub sent_bytes: u64,
    pub missed_bursts: u64,
    pub invalid_sent: u64,
    pub samples: Vec<SampleSent>,
}

impl ClientMetrics {
    pub fn emit(&mut self, name: &str, mode: &str, rate: u64, final_line: bool) {
        let line = json!({
            "role": "client",
            "name": name,
            "mode": mode,
            "time_ms": now_ms(),
            "final": final_line,
            "rate": rate,
            "sent": self.sent,
            "sent_bytes": self.sent_bytes,
            "missed_bursts": self.missed_bursts,
            "invalid_sent": self.invalid_sent,
            "samples": std::mem::take(&mut self.samples),
        });
        print_metrics_line(&line);
    }
}

/// Prints `METRICS {record}` and its newline in one `write`: fab sends stderr (the logs) to the
/// same file, and a log line written in the middle made the METRICS line unreadable. (Formatted
/// straight to stdout, a long line went out in 1 KiB pieces.)
pub fn print_metrics_line(record: &impl std::fmt::Display) {
    let line = format!("METRICS {record}\n");
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}
