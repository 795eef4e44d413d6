//! What a registry reads: a [`Source`] adds its metrics to a snapshot.

use super::snapshot::Snapshot;
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
