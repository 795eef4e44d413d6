//! Which latency samples each batch holds, noted while the batch is in cache.
//!
//! A node that does not execute (`hotstuff` mode) reports the `commit` hop of every sample in the
//! batches it commits. Finding them at commit means a walk over every transaction of a batch
//! that left the cache long before (it was received a few rounds earlier): a cache miss per
//! transaction, a tenth of such a node's CPU at a few hundred thousand transactions a second.
//! The batch maker already walks each batch it seals for its samples, and a peer's batch is
//! walked as it is parsed; noting the samples then, by digest, leaves the commit a lookup.
//!
//! A batch the index does not know (stored before a restart, or the index was cleared) is walked
//! at commit as before: the index only saves work, it never decides what is reported.

use crypto::Digest;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Far above the batches a node holds uncommitted (each member's quota times the committee),
/// so a batch is noted until it commits; one noted but never committed (collected after a
/// view change) stays until the index fills and is cleared, which costs only walks.
const DEFAULT_LIMIT: usize = 1 << 16;

/// Sample ids by batch digest, shared between where batches arrive and where they commit.
#[derive(Clone)]
pub struct SampleIndex {
    batches: Arc<Mutex<HashMap<Digest, Vec<String>>>>,
    limit: usize,
}

impl Default for SampleIndex {
    fn default() -> Self {
        Self::with_limit(DEFAULT_LIMIT)
    }
}

impl SampleIndex {
    pub fn with_limit(limit: usize) -> Self {
        SampleIndex {
            batches: Arc::default(),
            limit: limit.max(1),
        }
    }

    /// Notes the samples of the batch `digest` (none is worth noting too: the commit then skips
    /// the walk).
    pub fn note(&self, digest: Digest, samples: Vec<String>) {
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        if batches.len() >= self.limit && !batches.contains_key(&digest) {
            batches.clear();
        }
        batches.insert(digest, samples);
    }

    /// The samples of the batch `digest`, forgotten here (a batch commits once); `None` if it
    /// was never noted.
    pub fn take(&self, digest: &Digest) -> Option<Vec<String>> {
        self.batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(digest)
    }

    pub fn len(&self) -> usize {
        self.batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(i: u8) -> Digest {
        Digest([i; 32])
    }

    #[test]
    fn a_noted_batch_is_taken_once() {
        let index = SampleIndex::default();
        index.note(digest(1), vec!["7".into()]);
        index.note(digest(2), Vec::new());
        assert_eq!(index.take(&digest(1)), Some(vec!["7".to_string()]));
        assert_eq!(index.take(&digest(1)), None);
        assert_eq!(index.take(&digest(2)), Some(Vec::new()));
        assert_eq!(index.take(&digest(3)), None);
    }

    #[test]
    fn a_full_index_starts_over_instead_of_growing() {
        let index = SampleIndex::with_limit(3);
        for i in 0..3 {
            index.note(digest(i), Vec::new());
        }
        assert_eq!(index.len(), 3);
        // Noting one already there does not clear.
        index.note(digest(2), vec!["1".into()]);
        assert_eq!(index.len(), 3);
        index.note(digest(3), Vec::new());
        assert_eq!(index.len(), 1);
        assert_eq!(index.take(&digest(0)), None);
        assert_eq!(index.take(&digest(3)), Some(Vec::new()));
    }
}
