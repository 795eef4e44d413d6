//! The node's key-value store, split into typed namespaces (column families).
//!
//! Blocks and batches are both keyed by a 32-byte digest, so in one key space a block digest
//! would look like a batch to anyone who only asks "is this key present?". That let a Byzantine
//! leader name a stored block as a payload batch (issue 12, item 1). Each kind of value now
//! lives in its own [`Column`], and code is handed a [`Table`] typed by its column: the mempool
//! and the payload check hold a `Table<Batches>`, the core's block code a `Table<Blocks>`, and
//! the compiler keeps them apart.
//!
//! Storage goes through the [`Backend`] trait, with two implementations behind the same
//! `Store`/`Table` API: [`MemoryBackend`] (the default) and the durable
//! [`DiskBackend`](crate::disk::DiskBackend), each column in a file shaped for it (`Store::open`). Every
//! operation that touches the backend returns a `Result`, because a disk can fail even though
//! memory cannot.
//!
//! Besides plain reads and writes a table offers `notify_read`: a future that resolves once a key
//! is written, which is how the core waits for a missing batch or ancestor without polling. The
//! waiters live here, above the backend, so every backend gets them for free.

use bytes::Bytes;
use crypto::Digest;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;
use tokio::sync::oneshot;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("storage backend failed on {column:?}: {message}")]
    Backend { column: Column, message: String },
    #[error("the store stopped tracking the key")]
    Closed,
    #[error("cannot open the store at {path}: {message}")]
    Open { path: String, message: String },
}

impl StoreError {
    /// `column`'s backend failed (an I/O error, a record that does not decode, ...).
    pub fn backend(column: Column, message: impl std::fmt::Display) -> Self {
        StoreError::Backend {
            column,
            message: message.to_string(),
        }
    }

    /// The store, or one of its files, at `path` cannot be opened.
    pub fn open(path: &std::path::Path, message: impl std::fmt::Display) -> Self {
        StoreError::Open {
            path: path.display().to_string(),
            message: message.to_string(),
        }
    }
}

/// The namespaces of the store. Keys of different columns never collide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// Blocks by block digest, in their wire encoding.
    Blocks,
    /// Mempool batches by batch digest, in their wire layout.
    Batches,
    /// The safety state (last voted round, highest QC, last committed block), which a node
    /// restarted on a durable store must read back before it votes again. It holds one entry:
    /// on the durable store a write replaces it, whatever its key.
    Safety,
    /// Anything else a durable store needs (a schema version, the last executed height, ...).
    Meta,
}

impl Column {
    pub const ALL: [Column; 4] = [
        Column::Blocks,
        Column::Batches,
        Column::Safety,
        Column::Meta,
    ];

    /// Stable names, for a backend that names its column families.
    pub fn name(self) -> &'static str {
        match self {
            Column::Blocks => "blocks",
            Column::Batches => "batches",
            Column::Safety => "safety",
            Column::Meta => "meta",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Where the bytes live. Keys are raw bytes so a disk store takes them as they are; each call
/// names its column. Implementations must be safe to call from many tasks at once.
pub trait Backend: Send + Sync + 'static {
    fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError>;
    fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError>;
    fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError>;
    fn contains(&self, column: Column, key: &[u8]) -> Result<bool, StoreError> {
        self.get(column, key).map(|v| v.is_some())
    }
    /// Every entry of `column` (what a node restarted on a durable store reads back).
    fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError>;
    /// Number of keys in `column` (approximate is fine: it feeds metrics and tests).
    fn len(&self, column: Column) -> usize;
}

/// A panic while holding one of these locks cannot leave a map half-updated (every critical
/// section is a single map operation), so a poisoned lock is still safe to use.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One hash map per column. Critical sections are a hash-map operation, so a mutex is cheaper
/// here than an actor round trip per access; values are `Bytes`, so a read is a reference count.
#[derive(Default)]
pub struct MemoryBackend {
    columns: [Mutex<HashMap<Box<[u8]>, Bytes>>; 4],
}

impl Backend for MemoryBackend {
    fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        Ok(lock(&self.columns[column.index()]).get(key).cloned())
    }

    fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        lock(&self.columns[column.index()]).insert(key.into(), value);
        Ok(())
    }

    fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError> {
        let mut map = lock(&self.columns[column.index()]);
        for key in keys {
            map.remove(*key);
        }
        Ok(())
    }

    fn contains(&self, column: Column, key: &[u8]) -> Result<bool, StoreError> {
        Ok(lock(&self.columns[column.index()]).contains_key(key))
    }

    fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError> {
        Ok(lock(&self.columns[column.index()])
            .iter()
            .map(|(k, v)| (Bytes::copy_from_slice(k), v.clone()))
            .collect())
    }

    fn len(&self, column: Column) -> usize {
        lock(&self.columns[column.index()]).len()
    }
}

type Waiters = HashMap<Digest, Vec<oneshot::Sender<Bytes>>>;

struct Inner {
    backend: Box<dyn Backend>,
    /// Per column. A write holds its column's waiter lock across the backend write, and
    /// `notify_read` holds it across its read and its registration, so a write can never slip
    /// between the two and leave a waiter waiting for a key that is already there.
    waiters: [Mutex<Waiters>; 4],
}

/// Cloning a `Store` clones a handle to the same columns.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

impl Store {
    /// An in-memory store (the default: a disk write per batch is a visible cost here).
    pub fn new() -> Self {
        Self::with_backend(MemoryBackend::default())
    }

    /// A durable store in the file at `path` (created if absent), as `node run --store` uses.
    pub fn open(path: &std::path::Path) -> Result<Self, StoreError> {
        Ok(Self::with_backend(crate::disk::DiskBackend::open(path)?))
    }

    pub fn with_backend(backend: impl Backend) -> Self {
        Store {
            inner: Arc::new(Inner {
                backend: Box::new(backend),
                waiters: Default::default(),
            }),
        }
    }

    pub fn blocks(&self) -> Table<Blocks> {
        self.table()
    }

    pub fn batches(&self) -> Table<Batches> {
        self.table()
    }

    pub fn safety(&self) -> Table<Safety> {
        self.table()
    }

    pub fn meta(&self) -> Table<Meta> {
        self.table()
    }

    fn table<C: ColumnKind>(&self) -> Table<C> {
        Table {
            inner: self.inner.clone(),
            kind: PhantomData,
        }
    }
}

/// The batch namespace, as the mempool and the payload check see it.
pub type BatchStore = Table<Batches>;
/// The block namespace, as the core sees it.
pub type BlockStore = Table<Blocks>;

/// Marks a [`Table`] with its column at the type level.
pub trait ColumnKind: Send + Sync + 'static {
    const COLUMN: Column;
}

pub struct Blocks;
pub struct Batches;
pub struct Safety;
pub struct Meta;

impl ColumnKind for Blocks {
    const COLUMN: Column = Column::Blocks;
}
impl ColumnKind for Batches {
    const COLUMN: Column = Column::Batches;
}
impl ColumnKind for Safety {
    const COLUMN: Column = Column::Safety;
}
impl ColumnKind for Meta {
    const COLUMN: Column = Column::Meta;
}

/// One column of a [`Store`], keyed by digest.
pub struct Table<C> {
    inner: Arc<Inner>,
    kind: PhantomData<fn() -> C>,
}

impl<C> Clone for Table<C> {
    fn clone(&self) -> Self {
        Table {
            inner: self.inner.clone(),
            kind: PhantomData,
        }
    }
}

impl<C: ColumnKind> Table<C> {
    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        lock(&self.inner.waiters[C::COLUMN.index()])
    }

    fn backend(&self) -> &dyn Backend {
        self.inner.backend.as_ref()
    }

    pub fn write(&self, key: Digest, value: Bytes) -> Result<(), StoreError> {
        let mut waiters = self.waiters();
        self.backend().put(C::COLUMN, key.as_ref(), value.clone())?;
        if let Some(waiters) = waiters.remove(&key) {
            for waiter in waiters {
                let _ = waiter.send(value.clone());
            }
        }
        Ok(())
    }

    pub fn read(&self, key: &Digest) -> Result<Option<Bytes>, StoreError> {
        self.backend().get(C::COLUMN, key.as_ref())
    }

    pub fn contains(&self, key: &Digest) -> Result<bool, StoreError> {
        self.backend().contains(C::COLUMN, key.as_ref())
    }

    /// Resolves with the value as soon as `key` is present (immediately if it already is).
    pub async fn notify_read(&self, key: Digest) -> Result<Bytes, StoreError> {
        let receiver = {
            let mut waiters = self.waiters();
            if let Some(value) = self.backend().get(C::COLUMN, key.as_ref())? {
                return Ok(value);
            }
            let (tx, rx) = oneshot::channel();
            waiters.entry(key).or_default().push(tx);
            rx
        };
        receiver.await.map_err(|_| StoreError::Closed)
    }

    pub fn remove(&self, keys: &[Digest]) -> Result<(), StoreError> {
        let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        self.backend().delete(C::COLUMN, &keys)
    }

    /// Drops waiters whose futures were dropped, so abandoned waits do not accumulate.
    pub fn prune_waiters(&self) {
        self.waiters().retain(|_, waiters| {
            waiters.retain(|w| !w.is_closed());
            !waiters.is_empty()
        });
    }

    /// Every entry of the column; keys that are not digests (none are written) are skipped.
    pub fn scan(&self) -> Result<Vec<(Digest, Bytes)>, StoreError> {
        Ok(self
            .backend()
            .scan(C::COLUMN)?
            .into_iter()
            .filter_map(|(key, value)| Some((Digest(key.as_ref().try_into().ok()?), value)))
            .collect())
    }

    pub fn len(&self) -> usize {
        self.backend().len(C::COLUMN)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiters().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn notify_read_resolves_on_write() {
        let batches = Store::new().batches();
        let key = Digest::of(b"k");
        let waiter = tokio::spawn({
            let batches = batches.clone();
            async move { batches.notify_read(key).await }
        });
        // Wait until the waiter is registered, so the test covers the pending path.
        tokio::time::timeout(Duration::from_secs(5), async {
            while batches.waiting() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("waiter registered");
        batches.write(key, Bytes::from_static(b"v")).expect("write");
        let value = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("resolved")
            .expect("task");
        assert_eq!(value.ok(), Some(Bytes::from_static(b"v")));
        assert_eq!(
            batches.notify_read(key).await.ok(),
            Some(Bytes::from_static(b"v"))
        );
    }

    #[test]
    fn remove_and_prune() {
        let batches = Store::new().batches();
        let key = Digest::of(b"k");
        batches.write(key, Bytes::from_static(b"v")).expect("write");
        assert!(batches.contains(&key).expect("read"));
        batches.remove(&[key]).expect("remove");
        assert!(batches.read(&key).expect("read").is_none());
        assert!(batches.is_empty());
    }

    /// Issue 12, item 1: a block stored under its digest is not a batch, and a waiter on the
    /// batch namespace is not woken by a block write under the same key.
    #[tokio::test]
    async fn namespaces_are_separate() {
        let store = Store::new();
        let key = Digest::of(b"same key");
        let waiter = tokio::spawn({
            let batches = store.batches();
            async move { batches.notify_read(key).await }
        });
        tokio::time::timeout(Duration::from_secs(5), async {
            while store.batches().waiting() == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("waiter registered");
        store
            .blocks()
            .write(key, Bytes::from_static(b"block"))
            .expect("write");
        assert!(!store.batches().contains(&key).expect("read"));
        assert!(store.batches().read(&key).expect("read").is_none());
        assert!(store.safety().is_empty());
        store
            .batches()
            .write(key, Bytes::from_static(b"batch"))
            .expect("write");
        let value = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("resolved")
            .expect("task");
        assert_eq!(value.ok(), Some(Bytes::from_static(b"batch")));
        assert_eq!(
            store.blocks().read(&key).expect("read"),
            Some(Bytes::from_static(b"block"))
        );
    }
}
