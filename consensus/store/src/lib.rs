//! The node's key-value store, split into typed namespaces (column families). The root holds
//! what every backend shares (the [`Backend`] trait, [`Column`], [`StoreError`]) and the typed
//! front ([`Store`], [`Table`]); the durable backend and the files it is made of are modules
//! below it that import only from here: [`disk`] (a column in a file shaped for it),
//! [`segment_log`] (blocks and batches), [`durable_cell`] (the safety state) and
//! [`column_writer`] (a durable store's writes on a thread per column).
//!
//! It must not know what the values mean: keys and values are bytes, and which column holds what
//! is its users' business (blocks and the safety state of `hotstuff`, batches of `mempool`).
//!
//! Blocks and batches are both keyed by a 32-byte digest, so in one key space a block digest
//! would look like a batch to anyone who only asks "is this key present?". That let a Byzantine
//! leader name a stored block as a payload batch. Each kind of value now
//! lives in its own [`Column`], and code is handed a [`Table`] typed by its column: the mempool
//! and the payload check hold a `Table<Batches>`, the core's block code a `Table<Blocks>`, and
//! the compiler keeps them apart.
//!
//! Storage goes through the [`Backend`] trait, with two implementations behind the same
//! `Store`/`Table` API: [`MemoryBackend`] (the default) and the durable
//! [`DiskBackend`](disk::DiskBackend), each column in a file shaped for it (`Store::open`). Every
//! operation that touches the backend returns a `Result`, because a disk can fail even though
//! memory cannot.
//!
//! Besides plain reads and writes a table offers `notify_read`: a future that resolves once a key
//! is written, which is how the core waits for a missing batch or ancestor without polling. The
//! waiters live here, above the backend, so every backend gets them for free.

pub mod column_writer;
pub mod disk;
pub mod durable_cell;
pub mod segment_log;

use bytes::Bytes;
use column_writer::ColumnWriter;
use crypto::Digest;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;
use tokio::sync::oneshot;
use tracing::warn;

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
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
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
    /// By column index, on a durable backend: the thread that makes the column's writes
    /// (`column_writer.rs`). Empty (the in-memory backend): a write is made on the caller's
    /// thread.
    writers: Vec<ColumnWriter>,
    backend: Arc<dyn Backend>,
    /// Per column. `notify_read` holds it across its read and its registration, and a write
    /// takes it only once the backend holds the value, so a write can never slip between the
    /// two and leave a waiter waiting for a key that is already there: either the read sees the
    /// value, or the waiter is registered before the write looks for waiters. Shared with the
    /// writes queued on writer threads, which wake the waiters themselves: a write whose caller
    /// stopped waiting for it (a dropped future) is still made, and must still wake them.
    waiters: Arc<[Mutex<Waiters>; 4]>,
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

    /// A durable store in the file at `path` (created if absent), as `node run --store` uses;
    /// its writes run on a thread per column. (Blocks too, though a block is a few KB: writing
    /// them on the caller's thread instead saved no measurable CPU, and one path for every
    /// column is simpler.)
    pub fn open(path: &std::path::Path) -> Result<Self, StoreError> {
        Self::with_writer_threads(disk::DiskBackend::open(path)?)
    }

    /// A store whose writes are made on the caller's thread (a backend that never blocks).
    pub fn with_backend(backend: impl Backend) -> Self {
        Self::build(Arc::new(backend), Vec::new())
    }

    /// A store whose writes run on a thread per column (a backend that blocks on I/O).
    pub fn with_writer_threads(backend: impl Backend) -> Result<Self, StoreError> {
        let backend: Arc<dyn Backend> = Arc::new(backend);
        // In index order, so a column's writer is at its index.
        let writers = Column::ALL
            .iter()
            .map(|&column| ColumnWriter::spawn(column, backend.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::build(backend, writers))
    }

    fn build(backend: Arc<dyn Backend>, writers: Vec<ColumnWriter>) -> Self {
        Store {
            inner: Arc::new(Inner {
                writers,
                backend,
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

    /// The thread that makes this column's writes, on a durable store.
    fn writer(&self) -> Option<&ColumnWriter> {
        self.inner.writers.get(C::COLUMN.index())
    }

    /// Writes `value` under `key`; resolves once the backend holds it (on a durable store: it
    /// is written, and for the safety column synced), then wakes whoever waits for the key.
    pub async fn write(&self, key: Digest, value: Bytes) -> Result<(), StoreError> {
        let waiters = self.inner.waiters.clone();
        let write = move |backend: &dyn Backend| {
            backend.put(C::COLUMN, key.as_ref(), value.clone())?;
            let woken = lock(&waiters[C::COLUMN.index()]).remove(&key);
            for waiter in woken.into_iter().flatten() {
                let _ = waiter.send(value.clone());
            }
            Ok(())
        };
        match self.writer() {
            Some(writer) => writer.run(write).await,
            None => write(self.backend()),
        }
    }

    /// [`write`](Self::write) for code that is not async (a thread of its own, a constructor):
    /// blocks the calling thread until the write is made.
    pub fn write_blocking(&self, key: Digest, value: Bytes) -> Result<(), StoreError> {
        futures::executor::block_on(self.write(key, value))
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

    /// Deletes `keys`; resolves once the backend no longer holds them.
    pub async fn remove(&self, keys: &[Digest]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let delete = Self::delete(keys.to_vec());
        match self.writer() {
            Some(writer) => writer.run(delete).await,
            None => delete(self.backend()),
        }
    }

    /// Deletes `keys` without waiting for it, for garbage collection: on a writer thread the
    /// delete is queued behind the writes before it (and its failure logged there), otherwise
    /// it is made at once. Nobody waits to be woken by a delete, so the caller need not wait.
    pub fn remove_in_background(&self, keys: &[Digest]) {
        if keys.is_empty() {
            return;
        }
        let delete = Self::delete(keys.to_vec());
        let job = move |backend: &dyn Backend| {
            if let Err(e) = delete(backend) {
                warn!("cannot delete from {:?}: {e}", C::COLUMN);
            }
        };
        match self.writer() {
            Some(writer) => writer.submit(job),
            None => job(self.backend()),
        }
    }

    fn delete(keys: Vec<Digest>) -> impl FnOnce(&dyn Backend) -> Result<(), StoreError> {
        move |backend| {
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
            backend.delete(C::COLUMN, &keys)
        }
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

    /// How many reads wait for a key (other crates' tests check that waiters are dropped).
    #[cfg(any(test, feature = "testing"))]
    pub fn waiting(&self) -> usize {
        self.waiters().len()
    }
}

/// A backend for tests (here and, with the `testing` feature, other crates'): it records every
/// write, and fails those to the columns a test names.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::*;

    /// Each write's column and the name of the thread it ran on, in order.
    pub type Writes = Arc<Mutex<Vec<(Column, Option<String>)>>>;

    /// The in-memory backend, recording each write (`put`) as it is made in `writes`, and failing
    /// those to the columns in `failing` as a full or broken disk would.
    #[derive(Default)]
    pub struct TestBackend {
        memory: MemoryBackend,
        pub writes: Writes,
        pub failing: Arc<Mutex<Vec<Column>>>,
    }

    /// The names tests use it by: for the writes it records, for the writes it fails.
    pub type RecordingBackend = TestBackend;
    pub type FailingBackend = TestBackend;

    impl Backend for TestBackend {
        fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
            self.memory.get(column, key)
        }
        fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError> {
            if lock(&self.failing).contains(&column) {
                return Err(StoreError::backend(column, "no space left on device"));
            }
            let thread = std::thread::current().name().map(str::to_owned);
            lock(&self.writes).push((column, thread));
            self.memory.put(column, key, value)
        }
        fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError> {
            self.memory.delete(column, keys)
        }
        fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError> {
            self.memory.scan(column)
        }
        fn len(&self, column: Column) -> usize {
            self.memory.len(column)
        }
    }
}

#[cfg(test)]
mod tests;
