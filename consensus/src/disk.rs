//! The durable [`Backend`] of `node run --store PATH`: the batches in an append-only log in the
//! directory `PATH.batches` ([`BatchLog`]), everything else in one redb file at `PATH`, one table
//! per [`Column`].
//!
//! What must survive a crash, and when it must be on disk:
//! - the safety state (`Column::Safety`) is written with an fsync before the vote, timeout or
//!   proposal it protects leaves the node: a node that forgot it could vote twice in a round;
//! - blocks are written without an fsync. They become durable with the next safety write (redb
//!   makes a durable commit durable for every commit before it), so a crash loses at most the
//!   blocks of the last round, which peers still hold and serve;
//! - batches are written to the log without an fsync: they survive the process, and a batch a
//!   machine crash loses is fetched from peers like any missing one.
//!
//! Every redb call is its own transaction. redb has one writer at a time; its writes here are
//! small (a block, a safety state), the fsync of a safety write is the long one (about 4 ms on
//! the VM this was measured on).

use crate::batch_log::BatchLog;
use crate::store::{Backend, Column, StoreError};
use bytes::Bytes;
use redb::{Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::path::{Path, PathBuf};

/// redb's page cache. Its default, 1 GiB, is what made `--store` collapse under load when redb
/// still held the batches: every 500 KB batch written took fresh cache pages, so each node's
/// cache grew to the full GiB (RSS 1,060 MiB per node) and the kernel zeroed every page of it
/// first. Blocks and safety states need far less.
const CACHE_BYTES: usize = 64 << 20;

fn table(column: Column) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(column.name())
}

fn failed(column: Column) -> impl Fn(&dyn std::fmt::Display) -> StoreError {
    move |e| StoreError::Backend {
        column,
        message: e.to_string(),
    }
}

pub struct DiskBackend {
    db: Database,
    batches: BatchLog,
}

/// A log's directory beside the redb file: `PATH.<name>`.
fn log_dir(path: &Path, name: &str) -> PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".");
    dir.push(name);
    PathBuf::from(dir)
}

impl DiskBackend {
    /// Opens the store at `path`, creating the file and its tables if they do not exist.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let open_failed = |e: &dyn std::fmt::Display| StoreError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| open_failed(&e))?;
        let tx = db.begin_write().map_err(|e| open_failed(&e))?;
        for column in Column::ALL {
            tx.open_table(table(column)).map_err(|e| open_failed(&e))?;
        }
        tx.commit().map_err(|e| open_failed(&e))?;
        let batches = BatchLog::open(&log_dir(path, "batches"))?;
        Ok(DiskBackend { db, batches })
    }

    /// The append-only log that holds `column`, if one does (the batches: blocks are small, and
    /// keeping them in redb makes them durable with the next safety write; moving them to a log
    /// too saved nothing measurable).
    fn log(&self, column: Column) -> Option<&BatchLog> {
        (column == Column::Batches).then_some(&self.batches)
    }

    fn write(
        &self,
        column: Column,
        change: impl FnOnce(&mut redb::Table<&[u8], &[u8]>) -> Result<(), redb::StorageError>,
    ) -> Result<(), StoreError> {
        let fail = failed(column);
        let mut tx = self.db.begin_write().map_err(|e| fail(&e))?;
        tx.set_durability(match column {
            Column::Safety | Column::Meta => Durability::Immediate,
            Column::Blocks | Column::Batches => Durability::None,
        });
        {
            let mut table = tx.open_table(table(column)).map_err(|e| fail(&e))?;
            change(&mut table).map_err(|e| fail(&e))?;
        }
        tx.commit().map_err(|e| fail(&e))
    }
}

impl Backend for DiskBackend {
    fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        if let Some(log) = self.log(column) {
            return log.get(key);
        }
        let fail = failed(column);
        let tx = self.db.begin_read().map_err(|e| fail(&e))?;
        let table = tx.open_table(table(column)).map_err(|e| fail(&e))?;
        let value = table.get(key).map_err(|e| fail(&e))?;
        Ok(value.map(|v| Bytes::copy_from_slice(v.value())))
    }

    fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        if let Some(log) = self.log(column) {
            return log.put(key, value);
        }
        self.write(column, |table| {
            table.insert(key, value.as_ref()).map(|_| ())
        })
    }

    fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        if let Some(log) = self.log(column) {
            return log.delete(keys);
        }
        self.write(column, |table| {
            for key in keys {
                table.remove(*key)?;
            }
            Ok(())
        })
    }

    fn contains(&self, column: Column, key: &[u8]) -> Result<bool, StoreError> {
        if let Some(log) = self.log(column) {
            return Ok(log.contains(key));
        }
        self.get(column, key).map(|v| v.is_some())
    }

    fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError> {
        if let Some(log) = self.log(column) {
            return log.scan();
        }
        let fail = failed(column);
        let tx = self.db.begin_read().map_err(|e| fail(&e))?;
        let table = tx.open_table(table(column)).map_err(|e| fail(&e))?;
        let mut entries = Vec::new();
        for entry in table.iter().map_err(|e| fail(&e))? {
            let (key, value) = entry.map_err(|e| fail(&e))?;
            entries.push((
                Bytes::copy_from_slice(key.value()),
                Bytes::copy_from_slice(value.value()),
            ));
        }
        Ok(entries)
    }

    fn len(&self, column: Column) -> usize {
        if let Some(log) = self.log(column) {
            return log.len();
        }
        let Ok(tx) = self.db.begin_read() else {
            return 0;
        };
        tx.open_table(table(column))
            .ok()
            .and_then(|table| table.len().ok())
            .map_or(0, |n| n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crypto::Digest;

    #[test]
    fn values_survive_reopening_and_columns_stay_apart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.redb");
        let key = Digest::of(b"k");
        {
            let store = Store::open(&path).expect("open");
            store
                .batches()
                .write(key, Bytes::from_static(b"batch"))
                .expect("write");
            store
                .safety()
                .write(key, Bytes::from_static(b"state"))
                .expect("write");
            store
                .blocks()
                .write(Digest::of(b"gone"), Bytes::from_static(b"x"))
                .expect("write");
            store
                .blocks()
                .remove(&[Digest::of(b"gone")])
                .expect("remove");
        }
        let store = Store::open(&path).expect("reopen");
        assert_eq!(
            store.batches().read(&key).expect("read"),
            Some(Bytes::from_static(b"batch"))
        );
        assert_eq!(
            store.safety().read(&key).expect("read"),
            Some(Bytes::from_static(b"state"))
        );
        assert!(store.blocks().read(&key).expect("read").is_none());
        assert!(store.blocks().is_empty());
        assert_eq!(store.batches().scan().expect("scan").len(), 1);
    }

    #[test]
    fn a_path_that_cannot_be_a_store_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        // A directory is not a store file.
        let error = Store::open(dir.path()).err().expect("refused");
        assert!(error
            .to_string()
            .contains(&dir.path().display().to_string()));
    }
}
