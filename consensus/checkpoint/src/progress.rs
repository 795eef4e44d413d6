//! How far the application is behind consensus: bytes of committed batches handed out and not
//! yet applied by the application's last stage.
//!
//! Consensus orders faster than a node executes in every mode that executes. Without a bound,
//! a committee offered more than it can execute keeps committing: the committed batches queue
//! in front of the stages (bounded channels), then the committer blocks on them, then the core
//! on the committer, and a core that waits votes for nothing and times out. So a leader whose own
//! application is more than `max_unexecuted_bytes` behind proposes no batches (as Aptos's
//! pipeline back-pressure shrinks blocks): the chain goes on with empty blocks, which commit
//! what was certified before, batches wait in the mempools, and their bound holds the clients
//! back (`mempool/backlog.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct PipelineProgress {
    delivered: AtomicU64,
    applied: AtomicU64,
}

impl PipelineProgress {
    /// The committer handed out a committed batch of `bytes`.
    pub fn delivered(&self, bytes: u64) {
        self.delivered.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The application's last stage is done with a committed batch of `bytes` (applied it, or
    /// skipped it as part of a restored checkpoint).
    pub fn applied(&self, bytes: u64) {
        self.applied.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes handed out and not yet applied.
    pub fn behind(&self) -> u64 {
        let applied = self.applied.load(Ordering::Relaxed);
        self.delivered
            .load(Ordering::Relaxed)
            .saturating_sub(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_is_what_was_handed_out_and_not_applied() {
        let progress = PipelineProgress::default();
        progress.delivered(500);
        progress.delivered(300);
        progress.applied(500);
        assert_eq!(progress.behind(), 300);
        progress.applied(300);
        assert_eq!(progress.behind(), 0);
    }
}
