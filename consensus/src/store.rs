//! In-memory key-value store shared by the mempool (batches) and the core (blocks).
//!
//! Besides plain reads and writes it offers `notify_read`: a future that resolves once a key is
//! written, which is how the core waits for a missing batch or ancestor without polling.

use bytes::Bytes;
use crypto::Digest;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

#[derive(Default)]
struct Inner {
    values: HashMap<Digest, Bytes>,
    waiters: HashMap<Digest, Vec<oneshot::Sender<Bytes>>>,
}

/// Cloning a `Store` clones a handle to the same map. Critical sections are a hash-map operation,
/// so a mutex is cheaper here than an actor round trip per access.
#[derive(Clone, Default)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
}

impl Store {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated (each operation is a
        // single insert/remove), so a poisoned lock is still safe to use.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn write(&self, key: Digest, value: Bytes) {
        let mut inner = self.lock();
        if let Some(waiters) = inner.waiters.remove(&key) {
            for waiter in waiters {
                let _ = waiter.send(value.clone());
            }
        }
        inner.values.insert(key, value);
    }

    pub fn read(&self, key: &Digest) -> Option<Bytes> {
        self.lock().values.get(key).cloned()
    }

    pub fn contains(&self, key: &Digest) -> bool {
        self.lock().values.contains_key(key)
    }

    /// Resolves with the value as soon as `key` is present (immediately if it already is).
    /// Returns `None` only if the store stopped tracking the key (see `cancel_waiters`).
    pub async fn notify_read(&self, key: Digest) -> Option<Bytes> {
        let receiver = {
            let mut inner = self.lock();
            if let Some(value) = inner.values.get(&key) {
                return Some(value.clone());
            }
            let (tx, rx) = oneshot::channel();
            inner.waiters.entry(key).or_default().push(tx);
            rx
        };
        receiver.await.ok()
    }

    pub fn remove(&self, keys: &[Digest]) {
        let mut inner = self.lock();
        for key in keys {
            inner.values.remove(key);
        }
    }

    /// Drops waiters whose futures were dropped, so abandoned waits do not accumulate.
    pub fn prune_waiters(&self) {
        let mut inner = self.lock();
        inner.waiters.retain(|_, waiters| {
            waiters.retain(|w| !w.is_closed());
            !waiters.is_empty()
        });
    }

    pub fn len(&self) -> usize {
        self.lock().values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn notify_read_resolves_on_write() {
        let store = Store::new();
        let key = Digest::of(b"k");
        let waiter = tokio::spawn({
            let store = store.clone();
            async move { store.notify_read(key).await }
        });
        // Wait until the waiter is registered, so the test covers the pending path.
        tokio::time::timeout(Duration::from_secs(5), async {
            while store.lock().waiters.is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("waiter registered");
        store.write(key, Bytes::from_static(b"v"));
        let value = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("resolved")
            .expect("task");
        assert_eq!(value, Some(Bytes::from_static(b"v")));
        assert_eq!(store.notify_read(key).await, Some(Bytes::from_static(b"v")));
    }

    #[test]
    fn remove_and_prune() {
        let store = Store::new();
        let key = Digest::of(b"k");
        store.write(key, Bytes::from_static(b"v"));
        assert!(store.contains(&key));
        store.remove(&[key]);
        assert!(store.read(&key).is_none());
        assert!(store.is_empty());
    }
}
