//! One small record kept in a file of its own, replaced in place and synced on every write: the
//! home of the safety state on a durable store.
//!
//! The safety state is written before every vote, timeout and proposal, so the cost of one write
//! is paid several times a round. In redb it was a commit with an fsync, and that fsync also
//! flushed every page the commit and the blocks since the last one had dirtied, plus the journal
//! of a file that grows. Here a write is one positioned write of a few hundred bytes into blocks
//! the file already has, then `fdatasync`: the data and a device flush, no metadata.
//!
//! Layout: two slots of [`SLOT_BYTES`] each, written alternately. A slot is
//! `[sequence u64 LE][length u32 LE][crc32 u32 LE][payload]`, the CRC covering the sequence, the
//! length and the payload. Reading takes the valid slot with the higher sequence, so a write torn
//! by a crash leaves the previous record in force: the write had not returned, so nothing it
//! protects had left the node. The file is created full of zeros (an all-zero slot is not valid)
//! and synced, with its directory, before first use, so later writes never allocate.
//!
//! The payload is `[key length u8][key][value]`: the store's API is keyed, and the cell holds
//! one entry, which a write replaces whatever its key.

use crate::column::Column;
use crate::error::StoreError;
use bytes::Bytes;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Bytes per slot: room for a highest QC of several hundred signers.
pub const SLOT_BYTES: usize = 64 << 10;
const HEADER_BYTES: usize = 8 + 4 + 4;

struct State {
    file: File,
    /// Sequence of the record in force (0: none yet).
    sequence: u64,
    /// The entry in force, if any.
    entry: Option<(Box<[u8]>, Bytes)>,
}

pub struct DurableCell {
    column: Column,
    state: Mutex<State>,
}

fn checksum(sequence: u64, payload: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&sequence.to_le_bytes());
    crc.update(&(payload.len() as u32).to_le_bytes());
    crc.update(payload);
    crc.finalize()
}

/// The slot's record, if it holds a valid one: its sequence and payload.
fn parse_slot(slot: &[u8]) -> Option<(u64, &[u8])> {
    let sequence = u64::from_le_bytes(slot.get(0..8)?.try_into().ok()?);
    let len = u32::from_le_bytes(slot.get(8..12)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(slot.get(12..16)?.try_into().ok()?);
    let payload = slot.get(HEADER_BYTES..HEADER_BYTES.checked_add(len)?)?;
    (sequence > 0 && checksum(sequence, payload) == crc).then_some((sequence, payload))
}

fn parse_entry(payload: &[u8]) -> Option<(Box<[u8]>, Bytes)> {
    let (&key_len, rest) = payload.split_first()?;
    let key = rest.get(..key_len as usize)?;
    let value = rest.get(key_len as usize..)?;
    Some((key.into(), Bytes::copy_from_slice(value)))
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Creates the file at `path` full of zeros through a temporary file and a rename, so a crash
/// never leaves a half-created cell behind.
fn create(path: &Path) -> std::io::Result<()> {
    let mut temporary = PathBuf::from(path.as_os_str().to_owned());
    temporary.set_extension("creating");
    {
        let mut file = File::create(&temporary)?;
        file.write_all(&vec![0; 2 * SLOT_BYTES])?;
        file.sync_all()?;
    }
    fs::rename(&temporary, path)?;
    File::open(directory_of(path))?.sync_all()?;
    Ok(())
}

/// The directory that holds `path`: `.` for a bare file name (`node run --store store.redb`),
/// whose `parent()` is the empty path, which cannot be opened.
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

impl DurableCell {
    /// Opens the cell at `path`, creating it if absent, and reads the record in force.
    pub fn open(path: &Path, column: Column) -> Result<Self, StoreError> {
        let open_failed = |e: &dyn std::fmt::Display| StoreError::open(path, e);
        if !path.exists() {
            create(path).map_err(|e| open_failed(&e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| open_failed(&e))?;
        let mut slots = vec![0; 2 * SLOT_BYTES];
        file.read_exact_at(&mut slots, 0)
            .map_err(|e| open_failed(&format!("not a cell of two {SLOT_BYTES}-byte slots: {e}")))?;
        let newest = slots
            .chunks_exact(SLOT_BYTES)
            .filter_map(parse_slot)
            .max_by_key(|(sequence, _)| *sequence);
        // A cell is created all zeros, and every write is of a valid record: a cell written to
        // that holds none was damaged (by the medium, or by hand), not torn by a crash (which
        // leaves the other slot's record). Read as empty it would be a fresh cell, and the
        // record it held (a node's last vote) forgotten.
        if newest.is_none() && slots.iter().any(|byte| *byte != 0) {
            return Err(open_failed(
                &"it was written to but no slot holds a valid record: the record it held is \
                  lost",
            ));
        }
        let (sequence, entry) = match newest {
            Some((sequence, [])) => (sequence, None),
            Some((sequence, payload)) => {
                let entry = parse_entry(payload)
                    .ok_or_else(|| open_failed(&"the record in force does not decode"))?;
                (sequence, Some(entry))
            }
            None => (0, None),
        };
        Ok(DurableCell {
            column,
            state: Mutex::new(State {
                file,
                sequence,
                entry,
            }),
        })
    }

    fn failed(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::backend(self.column, message)
    }

    /// Writes `payload` into the slot not in force and syncs it; it is in force on return.
    fn write_locked(&self, state: &mut State, payload: &[u8]) -> Result<(), StoreError> {
        if HEADER_BYTES + payload.len() > SLOT_BYTES {
            return Err(self.failed(format!(
                "a record of {} bytes does not fit a {SLOT_BYTES}-byte slot",
                payload.len()
            )));
        }
        let sequence = state.sequence + 1;
        let mut slot = Vec::with_capacity(HEADER_BYTES + payload.len());
        slot.extend_from_slice(&sequence.to_le_bytes());
        slot.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        slot.extend_from_slice(&checksum(sequence, payload).to_le_bytes());
        slot.extend_from_slice(payload);
        let offset = (sequence % 2) * SLOT_BYTES as u64;
        state
            .file
            .write_all_at(&slot, offset)
            .map_err(|e| self.failed(e))?;
        state.file.sync_data().map_err(|e| self.failed(e))?;
        state.sequence = sequence;
        Ok(())
    }

    /// Makes (`key`, `value`) the cell's one entry, on disk when this returns.
    pub fn put(&self, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        let key_len = u8::try_from(key.len()).map_err(|_| self.failed("key longer than 255"))?;
        let mut payload = Vec::with_capacity(1 + key.len() + value.len());
        payload.push(key_len);
        payload.extend_from_slice(key);
        payload.extend_from_slice(&value);
        let mut state = lock(&self.state);
        self.write_locked(&mut state, &payload)?;
        state.entry = Some((key.into(), value));
        Ok(())
    }

    pub fn get(&self, key: &[u8]) -> Option<Bytes> {
        match &lock(&self.state).entry {
            Some((held, value)) if **held == *key => Some(value.clone()),
            _ => None,
        }
    }

    /// Empties the cell if it holds one of `keys`.
    pub fn delete(&self, keys: &[&[u8]]) -> Result<(), StoreError> {
        let mut state = lock(&self.state);
        let held = matches!(&state.entry, Some((held, _)) if keys.contains(&&**held));
        if held {
            self.write_locked(&mut state, &[])?;
            state.entry = None;
        }
        Ok(())
    }

    pub fn scan(&self) -> Vec<(Bytes, Bytes)> {
        lock(&self.state)
            .entry
            .iter()
            .map(|(key, value)| (Bytes::copy_from_slice(key), value.clone()))
            .collect()
    }

    pub fn len(&self) -> usize {
        usize::from(lock(&self.state).entry.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `node run --store store.redb` (a bare file name, as fab remote passes it) failed to
    /// create its safety state: the directory synced after the rename was the empty path.
    #[test]
    fn a_bare_file_name_is_created_in_the_current_directory() {
        assert_eq!(directory_of(Path::new("store.redb.safety")), Path::new("."));
        assert_eq!(directory_of(Path::new("d/s.safety")), Path::new("d"));
        assert!(File::open(directory_of(Path::new("store.redb.safety"))).is_ok());
    }

    fn open(path: &Path) -> DurableCell {
        DurableCell::open(path, Column::Safety).expect("open")
    }

    #[test]
    fn the_last_write_survives_reopening_and_replaces_the_entry() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cell");
        {
            let cell = open(&path);
            assert!(cell.is_empty());
            cell.put(b"a", Bytes::from_static(b"first")).expect("put");
            cell.put(b"b", Bytes::from_static(b"second")).expect("put");
            cell.put(b"b", Bytes::from_static(b"third")).expect("put");
        }
        let cell = open(&path);
        assert_eq!(cell.get(b"b"), Some(Bytes::from_static(b"third")));
        assert_eq!(cell.get(b"a"), None);
        assert_eq!(cell.len(), 1);
        cell.delete(&[b"b"]).expect("delete");
        drop(cell);
        assert!(open(&path).is_empty());
    }

    #[test]
    fn a_torn_write_leaves_the_previous_record_in_force() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cell");
        {
            let cell = open(&path);
            cell.put(b"k", Bytes::from_static(b"round 7")).expect("put");
            cell.put(b"k", Bytes::from_static(b"round 8")).expect("put");
        }
        // The write of sequence 3 (slot 1, where sequence 1 was) tore after its header: the
        // header is new, the payload still the old one, so its CRC fails.
        let file = OpenOptions::new().write(true).open(&path).expect("file");
        let mut header = Vec::new();
        header.extend_from_slice(&3u64.to_le_bytes());
        header.extend_from_slice(&9u32.to_le_bytes());
        header.extend_from_slice(&checksum(3, b"\x01kround 9").to_le_bytes());
        file.write_all_at(&header, SLOT_BYTES as u64).expect("tear");
        let cell = open(&path);
        assert_eq!(cell.get(b"k"), Some(Bytes::from_static(b"round 8")));
        // And the next write goes on from the record in force, into the torn slot.
        cell.put(b"k", Bytes::from_static(b"round 9")).expect("put");
        drop(cell);
        assert_eq!(open(&path).get(b"k"), Some(Bytes::from_static(b"round 9")));
    }

    #[test]
    fn a_record_larger_than_a_slot_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cell = open(&dir.path().join("cell"));
        let error = cell
            .put(b"k", Bytes::from(vec![0; SLOT_BYTES]))
            .expect_err("too large");
        assert!(error.to_string().contains("does not fit"), "{error}");
        assert!(cell.is_empty());
    }

    #[test]
    fn a_file_that_is_not_a_cell_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cell");
        fs::write(&path, b"short").expect("write");
        let error = DurableCell::open(&path, Column::Safety)
            .err()
            .expect("refused");
        assert!(error.to_string().contains("slots"), "{error}");
    }

    /// A cell that was written to and holds no valid record (both slots damaged) is an error,
    /// not an empty cell: the safety state it held would be forgotten, and the node could vote
    /// a second time in rounds it voted in. Before, it opened as a fresh cell. One never
    /// written to (all zeros) is still empty.
    #[test]
    fn recovery_a_cell_with_no_valid_record_left_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cell");
        {
            let cell = open(&path);
            cell.put(b"k", Bytes::from_static(b"round 7")).expect("put");
            cell.put(b"k", Bytes::from_static(b"round 8")).expect("put");
        }
        let file = OpenOptions::new().write(true).open(&path).expect("file");
        for slot in 0..2u64 {
            file.write_all_at(b"damaged", slot * SLOT_BYTES as u64 + 12)
                .expect("damage");
        }
        let error = DurableCell::open(&path, Column::Safety)
            .err()
            .expect("refused");
        assert!(
            error.to_string().contains("no slot holds a valid record"),
            "{error}"
        );
        let fresh = dir.path().join("fresh");
        assert!(open(&fresh).is_empty());
        assert!(open(&fresh).is_empty(), "reopened before any write");
    }
}
