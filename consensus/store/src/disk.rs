//! The durable [`Backend`] of `node run --store PATH`: each column where its access pattern
//! wants it.
//!
//! - The safety state (`Column::Safety`), in a [`DurableCell`] at `PATH.safety`: written and
//!   synced before the vote, timeout or proposal it protects leaves the node (a node that forgot
//!   it could vote twice in a round), several times a round, so its write is the one on the
//!   consensus path. One positioned write and an `fdatasync`, no metadata.
//! - Batches and blocks, each in an append-only [`SegmentLog`] (`PATH.batches/`,
//!   `PATH.blocks/`), written without an fsync: they survive a crash of the process (the kernel
//!   holds them), and what a machine crash loses is fetched from peers like anything missing.
//!   Neither is needed for safety: the safety state carries its highest QC whole.
//! - Checkpoints (`Column::Meta`, written every `checkpoint_rounds` rounds), in one redb table at
//!   `PATH`, each write a durable commit.
//!
//! Blocks and the safety state were in redb too. Its durable commit, one per safety write,
//! flushed the pages the blocks written since the last one had dirtied and redb's own metadata;
//! at 400,000 tx/s in `hotstuff` that fsync was the second cost of `--store` after the batches'.

use crate::backend::Backend;
use crate::column::Column;
use crate::durable_cell::DurableCell;
use crate::error::StoreError;
use crate::segment_log::SegmentLog;
use bytes::Bytes;
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::path::{Path, PathBuf};

/// redb's page cache. Its default, 1 GiB, is what made `--store` collapse under load when redb
/// still held the batches: every 500 KB batch written took fresh cache pages, so each node's
/// cache grew to the full GiB (RSS 1,060 MiB per node) and the kernel zeroed every page of it
/// first. Checkpoints need far less.
const CACHE_BYTES: usize = 64 << 20;

fn table(column: Column) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(column.name())
}

fn failed(column: Column) -> impl Fn(&dyn std::fmt::Display) -> StoreError {
    move |e| StoreError::backend(column, e)
}

pub struct DiskBackend {
    /// `Column::Meta`.
    db: Database,
    safety: DurableCell,
    batches: SegmentLog,
    blocks: SegmentLog,
}

/// Where one column lives.
enum Home<'a> {
    Cell(&'a DurableCell),
    Log(&'a SegmentLog),
    Redb,
}

/// A file or directory beside the redb file: `PATH.<name>`.
fn beside(path: &Path, name: &str) -> PathBuf {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".");
    dir.push(name);
    PathBuf::from(dir)
}

impl DiskBackend {
    /// Opens the store at `path`, creating the file and its tables if they do not exist.
    ///
    /// A store that exists without its safety state (`PATH.safety` deleted, or never copied
    /// with the rest) is refused: recreated empty, it would let the node vote again in rounds it
    /// voted in before. Only a store of which nothing exists yet is created, the safety state
    /// first, so a crash while creating it leaves no store without one.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let open_failed = |e: &dyn std::fmt::Display| StoreError::open(path, e);
        let safety_path = beside(path, "safety");
        let existing = [
            path.to_path_buf(),
            beside(path, "batches"),
            beside(path, "blocks"),
        ]
        .into_iter()
        .find(|part| part.exists());
        if let (Some(part), false) = (&existing, safety_path.exists()) {
            return Err(open_failed(&format!(
                "{} exists but the safety state {} does not: the node would forget its votes \
                 and could vote twice in a round. Restore that file; a store without it (a new \
                 store path included) must not run under this member's key (docs/store.md)",
                part.display(),
                safety_path.display()
            )));
        }
        let safety = DurableCell::open(&safety_path, Column::Safety)?;
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| open_failed(&e))?;
        let tx = db.begin_write().map_err(|e| open_failed(&e))?;
        tx.open_table(table(Column::Meta))
            .map_err(|e| open_failed(&e))?;
        tx.commit().map_err(|e| open_failed(&e))?;
        Ok(DiskBackend {
            db,
            safety,
            batches: SegmentLog::open(&beside(path, "batches"), Column::Batches)?,
            blocks: SegmentLog::open(&beside(path, "blocks"), Column::Blocks)?,
        })
    }

    fn home(&self, column: Column) -> Home<'_> {
        match column {
            Column::Safety => Home::Cell(&self.safety),
            Column::Batches => Home::Log(&self.batches),
            Column::Blocks => Home::Log(&self.blocks),
            Column::Meta => Home::Redb,
        }
    }

    fn write(
        &self,
        column: Column,
        change: impl FnOnce(&mut redb::Table<&[u8], &[u8]>) -> Result<(), redb::StorageError>,
    ) -> Result<(), StoreError> {
        let fail = failed(column);
        let tx = self.db.begin_write().map_err(|e| fail(&e))?;
        {
            let mut table = tx.open_table(table(column)).map_err(|e| fail(&e))?;
            change(&mut table).map_err(|e| fail(&e))?;
        }
        tx.commit().map_err(|e| fail(&e))
    }
}

/// What [`recover`] did to a store.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The parts it deleted (checkpoints, batches, blocks), as they were found.
    pub deleted: Vec<PathBuf>,
    /// The safety state it kept.
    pub kept: PathBuf,
}

/// Deletes everything of the store at `path` but its safety state (`node recover`): the
/// checkpoints, the batch log and the block log. A node started on what is left votes only
/// where its recorded state lets it (never again in a round it voted in) and rejoins from its
/// peers: it replays the chain they still hold, or adopts a checkpoint f+1 of them report.
///
/// For a store whose batches or blocks a crash of the machine took (they are written without
/// an fsync), so that the node stops on a batch no peer holds any longer (`STORE: batch ... is
/// lost`) at every restart. Starting it on a new store path instead would discard its vote
/// record with the rest. Refused when the safety state is missing or unreadable: there is then
/// nothing to keep, and no safe way back under this key.
pub fn recover(path: &Path) -> Result<Recovered, StoreError> {
    let safety = beside(path, "safety");
    if !safety.exists() {
        return Err(StoreError::open(
            path,
            format!(
                "its safety state {} does not exist: there is no vote record to keep. Restore \
                 it; without it this member must not run under its key again (docs/store.md)",
                safety.display()
            ),
        ));
    }
    // Refused if no record in it is valid (`DurableCell::open`).
    DurableCell::open(&safety, Column::Safety)?;
    let mut deleted = Vec::new();
    for part in [
        path.to_path_buf(),
        beside(path, "batches"),
        beside(path, "blocks"),
    ] {
        let removed = if part.is_dir() {
            std::fs::remove_dir_all(&part)
        } else if part.exists() {
            std::fs::remove_file(&part)
        } else {
            continue;
        };
        removed.map_err(|e| StoreError::open(&part, format!("cannot delete it: {e}")))?;
        deleted.push(part);
    }
    Ok(Recovered {
        deleted,
        kept: safety,
    })
}

impl Backend for DiskBackend {
    fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        match self.home(column) {
            Home::Cell(cell) => return Ok(cell.get(key)),
            Home::Log(log) => return log.get(key),
            Home::Redb => {}
        }
        let fail = failed(column);
        let tx = self.db.begin_read().map_err(|e| fail(&e))?;
        let table = tx.open_table(table(column)).map_err(|e| fail(&e))?;
        let value = table.get(key).map_err(|e| fail(&e))?;
        Ok(value.map(|v| Bytes::copy_from_slice(v.value())))
    }

    fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        match self.home(column) {
            Home::Cell(cell) => return cell.put(key, value),
            Home::Log(log) => return log.put(key, value),
            Home::Redb => {}
        }
        self.write(column, |table| {
            table.insert(key, value.as_ref()).map(|_| ())
        })
    }

    fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        match self.home(column) {
            Home::Cell(cell) => return cell.delete(keys),
            Home::Log(log) => return log.delete(keys),
            Home::Redb => {}
        }
        self.write(column, |table| {
            for key in keys {
                table.remove(*key)?;
            }
            Ok(())
        })
    }

    fn contains(&self, column: Column, key: &[u8]) -> Result<bool, StoreError> {
        if let Home::Log(log) = self.home(column) {
            return Ok(log.contains(key));
        }
        self.get(column, key).map(|v| v.is_some())
    }

    fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError> {
        match self.home(column) {
            Home::Cell(cell) => return Ok(cell.scan()),
            Home::Log(log) => return log.scan(),
            Home::Redb => {}
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
        match self.home(column) {
            Home::Cell(cell) => return cell.len(),
            Home::Log(log) => return log.len(),
            Home::Redb => {}
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
    use crate::Store;
    use crypto::Digest;

    #[tokio::test]
    async fn values_survive_reopening_and_columns_stay_apart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.redb");
        let key = Digest::of(b"k");
        {
            let store = Store::open(&path).expect("open");
            store
                .batches()
                .write(key, Bytes::from_static(b"batch"))
                .await
                .expect("write");
            store
                .safety()
                .write(key, Bytes::from_static(b"state"))
                .await
                .expect("write");
            store
                .blocks()
                .write(Digest::of(b"gone"), Bytes::from_static(b"x"))
                .await
                .expect("write");
            store
                .blocks()
                .remove(&[Digest::of(b"gone")])
                .await
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

    /// A store whose safety state is gone is refused with an error naming the file, instead of
    /// being opened with an empty one (before, the cell was recreated and the node voted again
    /// in rounds it had voted in). A path where nothing exists yet is a new store.
    #[tokio::test]
    async fn recovery_a_store_without_its_safety_state_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.redb");
        {
            let store = Store::open(&path).expect("a new store");
            store
                .safety()
                .write(Digest::of(b"k"), Bytes::from_static(b"voted in round 7"))
                .await
                .expect("write");
        }
        let safety = beside(&path, "safety");
        std::fs::remove_file(&safety).expect("remove");
        let error = Store::open(&path).err().expect("refused").to_string();
        assert!(
            error.contains(&safety.display().to_string()) && error.contains("twice"),
            "{error}"
        );
        assert!(!safety.exists(), "the safety state was recreated");
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

    /// `node recover`: what a machine crash may have damaged goes, the vote record stays, and
    /// the store opens again as one that has voted (the safety state reads back) but holds no
    /// block, batch or checkpoint.
    #[tokio::test]
    async fn recovery_keeps_the_safety_state_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.redb");
        let key = Digest::of(b"k");
        {
            let store = Store::open(&path).expect("a new store");
            store
                .safety()
                .write(key, Bytes::from_static(b"voted in round 7"))
                .await
                .expect("write");
            let x = || (Digest::of(b"x"), Bytes::from_static(b"x"));
            store.batches().write(x().0, x().1).await.expect("write");
            store.blocks().write(x().0, x().1).await.expect("write");
            store
                .meta()
                .write(Digest::of(b"checkpoint"), Bytes::from_static(b"state"))
                .await
                .expect("write");
        }
        let recovered = recover(&path).expect("recovered");
        assert_eq!(recovered.kept, beside(&path, "safety"));
        assert_eq!(recovered.deleted.len(), 3, "{recovered:?}");
        let store = Store::open(&path).expect("reopens");
        assert_eq!(
            store.safety().read(&key).expect("read"),
            Some(Bytes::from_static(b"voted in round 7"))
        );
        assert!(store.batches().is_empty() && store.blocks().is_empty());
        assert!(store.meta().is_empty());
        drop(store);

        // Without a safety state there is nothing to keep: refused, nothing deleted.
        std::fs::remove_file(beside(&path, "safety")).expect("remove");
        let error = recover(&path).expect_err("refused").to_string();
        assert!(error.contains("no vote record to keep"), "{error}");
        assert!(path.exists());
    }
}
