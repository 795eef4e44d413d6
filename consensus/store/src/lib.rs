//! The node's key-value store, split into typed namespaces (column families). The root holds the
//! typed front ([`Store`], [`Table`]); what every backend shares (the [`Backend`] trait,
//! [`Column`], [`StoreError`]) has files of its own, which the backends import: the in-memory
//! [`MemoryBackend`], and the durable backend and the files it is made of, [`disk`] (a column in
//! a file shaped for it), [`segment_log`] (blocks and batches), [`durable_cell`] (the safety
//! state) and [`column_writer`] (a durable store's writes on a thread per column).
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

mod backend;
mod column;
pub mod column_writer;
pub mod disk;
pub mod durable_cell;
mod error;
mod lock;
mod memory;
pub mod segment_log;

pub use backend::Backend;
pub use column::Column;
pub use error::StoreError;
pub use memory::MemoryBackend;

use bytes::Bytes;
use column_writer::ColumnWriter;
use crypto::Digest;
use lock::lock;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;
use tracing::warn;

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
