//! The durable home of the batch and block columns: an append-only log of segment files.
//!
//! Batches are the store's bulk (hundreds of KB each, hundreds a second at speed), written once,
//! read a few times soon after (the committer, a peer's sync request), and deleted together
//! `gc_depth` rounds after they commit. A B-tree is the wrong shape for that: redb copied every
//! 500 KB value into its pages, checksummed and freed them again, which cost `hotstuff --store`
//! a large share of its capacity (`docs/store.md`). A log writes each batch once, sequentially, and deletes
//! whole files. Blocks follow the same life (written once, pruned in order), in a log of their
//! own.
//!
//! Layout: `DIR/<sequence>.segment` files, each a run of records
//! `[kind u8][key length u8][value length u32 LE][crc32 u32 LE][key][value]`, where the CRC
//! covers the segment's sequence number, the key and the value, and a `Delete` record (a
//! tombstone, value empty) removes the key from the index at recovery. A new segment starts once
//! the head reaches [`SEGMENT_BYTES`].
//!
//! In memory: an index from key to its record, holding the value itself for what this life
//! wrote (the in-memory store holds the same, so `--store` costs no extra memory), and read back
//! with one positioned read for what an earlier life wrote.
//!
//! Reclaiming space, oldest first only: the front segment is retired once nothing in it is
//! live, and moved forward (its few live records appended to the head) once less than a quarter
//! of it is live, so a batch that never commits cannot pin old files. Retiring only from the
//! front keeps recovery right without rewriting tombstones: a tombstone can only name a key
//! written in its own segment or an older one, so it is never needed after everything up to its
//! own segment is gone.
//!
//! Recycling: a retired segment's file is renamed `DIR/<sequence>.spare` and becomes a later
//! head, overwritten in place, rather than deleted (up to [`SPARE_SEGMENTS`] are kept). Writing
//! into pages the kernel already caches for a file whose blocks are already allocated costs
//! half the kernel time of filling fresh pages of a new file and freeing them at its deletion
//! (`cargo bench -p store --bench store`, `batch_append`). The old records a recycled file
//! still holds past the head's end are never read as live: their CRC covers their own, older,
//! sequence number. Spares found at startup are deleted, never replayed.
//!
//! A file is recycled only while it is younger than [`RECYCLE_WITHIN`], then deleted like
//! before. Linux writes a file's dirty pages to disk once they have been dirty for
//! `vm.dirty_expire_centisecs` (30 s by default), and a file overwritten again and again never
//! gets clean: recycling without an age limit makes the kernel write the dead batches of every
//! recycled file every 30 s, in bursts that hold up the safety state's `fdatasync` behind them
//! (and with it every vote). A file deleted before its pages expire takes them with it unwritten.
//!
//! Durability: records are written with `pwrite` and never synced. They survive a crash of the
//! process (the kernel holds them), not of the machine; a batch lost that way is fetched from
//! peers like any missing one. Only the safety state, which keeps a node from voting twice,
//! is synced (`durable_cell.rs`). A record torn by a crash (or a recycled head's old records)
//! ends its segment: recovery keeps what precedes it and truncates the rest.

mod format;

use crate::column::Column;
use crate::error::StoreError;
use bytes::Bytes;
use format::{open_file, record_head, segment_path, spare_path, Record, DELETE, HEADER_BYTES, PUT};
use plumbing::clock::Instant;
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// A new segment starts once the head is this large.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// Files of retired segments kept for reuse as later heads; more are deleted.
pub const SPARE_SEGMENTS: usize = 4;
/// A file is reused only within this long of its creation: under the kernel's default 30 s
/// after which dirty pages are written back (see the module's documentation).
pub const RECYCLE_WITHIN: Duration = Duration::from_secs(20);
/// The front segment is moved forward once less than this fraction of its bytes is live.
const LIVE_FRACTION_TO_MOVE: u64 = 4;

/// Where a live key's record is, and its value when this life wrote it.
struct Entry {
    segment: u64,
    /// Offset of the value in the segment file.
    offset: u64,
    len: u32,
    cached: Option<Bytes>,
}

impl Entry {
    fn record_bytes(&self, key: &[u8]) -> u64 {
        (HEADER_BYTES + key.len()) as u64 + u64::from(self.len)
    }
}

/// How large a log's segments grow, and how many retired ones it keeps for reuse and how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    pub segment_bytes: u64,
    pub spare_segments: usize,
    pub recycle_within: Duration,
}

impl Default for Sizing {
    fn default() -> Self {
        Sizing {
            segment_bytes: SEGMENT_BYTES,
            spare_segments: SPARE_SEGMENTS,
            recycle_within: RECYCLE_WITHIN,
        }
    }
}

struct Segment {
    file: File,
    path: PathBuf,
    /// Where the records end: the next one is written here.
    size: u64,
    /// The file's length, larger than `size` while a recycled file's old records follow them.
    file_len: u64,
    /// Bytes of the records still live in this segment.
    live: u64,
    /// When this life created the file (`None`: an earlier life did, never recycled).
    born: Option<Instant>,
}

/// A retired segment's file, waiting to be the head again.
struct Spare {
    file: File,
    path: PathBuf,
    len: u64,
    born: Instant,
}

struct State {
    index: HashMap<Box<[u8]>, Entry>,
    /// By sequence number; the last one is the head, where records are appended.
    segments: BTreeMap<u64, Segment>,
    spares: Vec<Spare>,
}

pub struct SegmentLog {
    /// The store column this log holds (named in its errors).
    column: Column,
    dir: PathBuf,
    sizing: Sizing,
    state: Mutex<State>,
}

/// A poisoned lock is still consistent: every critical section updates the index only after
/// its file operation succeeded.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl SegmentLog {
    /// Opens the log in `dir` (created if absent) and rebuilds its index from the segments.
    pub fn open(dir: &Path, column: Column) -> Result<Self, StoreError> {
        Self::open_with(dir, column, Sizing::default())
    }

    /// As [`open`](Self::open), with segments and spares as `sizing` says.
    pub fn open_with(dir: &Path, column: Column, sizing: Sizing) -> Result<Self, StoreError> {
        let open_failed = |e: &dyn std::fmt::Display| StoreError::open(dir, e);
        fs::create_dir_all(dir).map_err(|e| open_failed(&e))?;
        let mut sequences = Vec::new();
        let mut spare_sequences = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| open_failed(&e))? {
            let name = entry.map_err(|e| open_failed(&e))?.file_name();
            let name = name.to_string_lossy();
            let (list, sequence) = if let Some(sequence) = name.strip_suffix(".segment") {
                (&mut sequences, sequence)
            } else if let Some(sequence) = name.strip_suffix(".spare") {
                (&mut spare_sequences, sequence)
            } else {
                continue;
            };
            match sequence.parse::<u64>() {
                Ok(sequence) => list.push(sequence),
                Err(_) => return Err(open_failed(&format!("unexpected file {name}"))),
            }
        }
        sequences.sort_unstable();
        let mut state = State {
            index: HashMap::new(),
            segments: BTreeMap::new(),
            spares: Vec::new(),
        };
        let head = sequences.last().copied();
        for sequence in sequences {
            let path = segment_path(dir, sequence);
            let is_head = Some(sequence) == head;
            let size = replay(&path, sequence, is_head, &mut state).map_err(|e| open_failed(&e))?;
            let file = open_file(&path, false).map_err(|e| open_failed(&e))?;
            state.segments.insert(
                sequence,
                Segment {
                    file,
                    path,
                    size,
                    file_len: size,
                    live: 0,
                    born: None,
                },
            );
        }
        // Spares hold only dead records, and dirty pages of unknown age: deleted.
        for sequence in spare_sequences {
            fs::remove_file(spare_path(dir, sequence)).map_err(|e| open_failed(&e))?;
        }
        let live: Vec<(u64, u64)> = state
            .index
            .iter()
            .map(|(key, entry)| (entry.segment, entry.record_bytes(key)))
            .collect();
        for (segment, bytes) in live {
            if let Some(segment) = state.segments.get_mut(&segment) {
                segment.live += bytes;
            }
        }
        let log = SegmentLog {
            column,
            dir: dir.to_path_buf(),
            sizing,
            state: Mutex::new(state),
        };
        {
            let mut state = lock(&log.state);
            if state.segments.is_empty() {
                log.start_segment(&mut state, 0)?;
            }
        }
        Ok(log)
    }

    /// Whether a file created at `born` is still young enough to be reused.
    fn recyclable(&self, born: Instant) -> bool {
        born.elapsed() < self.sizing.recycle_within
    }

    /// Starts segment `sequence` as the head, in a spare's file when a young one is left.
    fn start_segment(&self, state: &mut State, sequence: u64) -> Result<(), StoreError> {
        let failed = |e: std::io::Error| StoreError::backend(self.column, e);
        let path = segment_path(&self.dir, sequence);
        let mut reused = None;
        while let Some(spare) = state.spares.pop() {
            if self.recyclable(spare.born) {
                fs::rename(&spare.path, &path).map_err(failed)?;
                reused = Some((spare.file, spare.len, spare.born));
                break;
            }
            fs::remove_file(&spare.path).map_err(failed)?;
        }
        let (file, file_len, born) = match reused {
            Some(reused) => reused,
            None => (open_file(&path, true).map_err(failed)?, 0, Instant::now()),
        };
        state.segments.insert(
            sequence,
            Segment {
                file,
                path,
                size: 0,
                file_len,
                live: 0,
                born: Some(born),
            },
        );
        Ok(())
    }

    /// The head's sequence number, after starting a new head if this one is full. A full head
    /// in a recycled file is cut to its records first, so that only the head can ever end in
    /// records that are not its own.
    fn head(&self, state: &mut State) -> Result<u64, StoreError> {
        let (&head, segment) = state
            .segments
            .iter_mut()
            .next_back()
            .ok_or_else(|| StoreError::backend(self.column, "no segment"))?;
        if segment.size < self.sizing.segment_bytes {
            return Ok(head);
        }
        if segment.file_len > segment.size {
            segment
                .file
                .set_len(segment.size)
                .map_err(|e| StoreError::backend(self.column, e))?;
            segment.file_len = segment.size;
        }
        self.start_segment(state, head + 1)?;
        Ok(head + 1)
    }

    /// Writes `parts` (one record, or several tombstones, built for segment `head`) at the end
    /// of the head; returns the offset they start at. The end moves only once all of them are
    /// written: after a failed write the next record goes where this one started, over what
    /// part of it reached the file, rather than after a half record that replay would stop at.
    fn append(&self, state: &mut State, head: u64, parts: &[&[u8]]) -> Result<u64, StoreError> {
        let segment = state
            .segments
            .get_mut(&head)
            .ok_or_else(|| StoreError::backend(self.column, "no head segment"))?;
        let at = segment.size;
        let mut end = at;
        for part in parts {
            let written = segment.file.write_all_at(part, end);
            end += part.len() as u64;
            // The file may hold part of it even when the write failed.
            segment.file_len = segment.file_len.max(end);
            written.map_err(|e| StoreError::backend(self.column, e))?;
        }
        segment.size = end;
        Ok(at)
    }

    fn put_locked(&self, state: &mut State, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        let segment = self.head(state)?;
        let head = record_head(self.column, PUT, segment, key, &value)?;
        let at = self.append(state, segment, &[&head, &value])?;
        let entry = Entry {
            segment,
            offset: at + (HEADER_BYTES + key.len()) as u64,
            len: value.len() as u32,
            cached: Some(value),
        };
        let bytes = entry.record_bytes(key);
        if let Some(head) = state.segments.get_mut(&segment) {
            head.live += bytes;
        }
        if let Some(old) = state.index.insert(key.into(), entry) {
            forget(state, key, &old);
        }
        Ok(())
    }

    pub fn put(&self, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        let mut state = lock(&self.state);
        self.put_locked(&mut state, key, value)?;
        self.reclaim(&mut state)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        self.read_locked(&lock(&self.state), key)
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        lock(&self.state).index.contains_key(key)
    }

    /// Writes one tombstone record for the keys that are live, then reclaims what it can.
    pub fn delete(&self, keys: &[&[u8]]) -> Result<(), StoreError> {
        let mut state = lock(&self.state);
        if !keys.iter().any(|key| state.index.contains_key(*key)) {
            return Ok(());
        }
        let head = self.head(&mut state)?;
        let mut tombstones = Vec::new();
        for key in keys {
            if state.index.contains_key(*key) {
                tombstones.extend(record_head(self.column, DELETE, head, key, &[])?);
            }
        }
        self.append(&mut state, head, &[&tombstones])?;
        for key in keys {
            if let Some(old) = state.index.remove(*key) {
                forget(&mut state, key, &old);
            }
        }
        self.reclaim(&mut state)
    }

    /// Retires the front segment while nothing in it is live, and moves it forward when little
    /// is; never touches the head. A move may start a new head, never a nested reclaim.
    fn reclaim(&self, state: &mut State) -> Result<(), StoreError> {
        loop {
            let (Some((&front, segment)), Some(&head)) = (
                state.segments.first_key_value(),
                state.segments.keys().last(),
            ) else {
                return Ok(());
            };
            if front == head {
                return Ok(());
            }
            if segment.live > 0 && segment.live * LIVE_FRACTION_TO_MOVE >= segment.size {
                return Ok(());
            }
            let survivors: Vec<Box<[u8]>> = state
                .index
                .iter()
                .filter(|(_, entry)| entry.segment == front)
                .map(|(key, _)| key.clone())
                .collect();
            for key in survivors {
                if let Some(value) = self.read_locked(state, &key)? {
                    self.put_locked(state, &key, value)?;
                }
            }
            if let Some(segment) = state.segments.remove(&front) {
                self.retire(state, front, segment)?;
            }
        }
    }

    /// Keeps a segment that holds nothing live as a spare while its file is young and spares
    /// are few, and deletes it otherwise.
    fn retire(&self, state: &mut State, sequence: u64, segment: Segment) -> Result<(), StoreError> {
        let failed = |e: std::io::Error| StoreError::backend(self.column, e);
        let born = match segment.born {
            Some(born)
                if self.recyclable(born) && state.spares.len() < self.sizing.spare_segments =>
            {
                born
            }
            _ => return fs::remove_file(&segment.path).map_err(failed),
        };
        let path = spare_path(&self.dir, sequence);
        fs::rename(&segment.path, &path).map_err(failed)?;
        state.spares.push(Spare {
            file: segment.file,
            path,
            len: segment.file_len,
            born,
        });
        Ok(())
    }
    fn read_locked(&self, state: &State, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        let Some(entry) = state.index.get(key) else {
            return Ok(None);
        };
        if let Some(value) = &entry.cached {
            return Ok(Some(value.clone()));
        }
        let segment = state
            .segments
            .get(&entry.segment)
            .ok_or_else(|| StoreError::backend(self.column, "index names a deleted segment"))?;
        let mut value = vec![0; entry.len as usize];
        segment
            .file
            .read_exact_at(&mut value, entry.offset)
            .map_err(|e| StoreError::backend(self.column, e))?;
        Ok(Some(Bytes::from(value)))
    }

    pub fn scan(&self) -> Result<Vec<(Bytes, Bytes)>, StoreError> {
        let state = lock(&self.state);
        let keys: Vec<Box<[u8]>> = state.index.keys().cloned().collect();
        let mut entries = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(value) = self.read_locked(&state, &key)? {
                entries.push((Bytes::copy_from_slice(&key), value));
            }
        }
        Ok(entries)
    }

    pub fn len(&self) -> usize {
        lock(&self.state).index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Segment files on disk (for tests and metrics).
    pub fn segments(&self) -> usize {
        lock(&self.state).segments.len()
    }

    /// Retired segment files kept for reuse (for tests and metrics).
    pub fn spares(&self) -> usize {
        lock(&self.state).spares.len()
    }
}

/// The record of `key` is no longer live: its segment's live bytes shrink.
fn forget(state: &mut State, key: &[u8], entry: &Entry) {
    if let Some(segment) = state.segments.get_mut(&entry.segment) {
        segment.live = segment.live.saturating_sub(entry.record_bytes(key));
    }
}

/// Reads the records of one segment into the index and returns the length of its intact
/// prefix (see [`format::replay`]).
fn replay(path: &Path, sequence: u64, is_head: bool, state: &mut State) -> std::io::Result<u64> {
    format::replay(path, sequence, is_head, |record| match record {
        Record::Put { key, offset, len } => {
            state.index.insert(
                key,
                Entry {
                    segment: sequence,
                    offset,
                    len,
                    cached: None,
                },
            );
        }
        Record::Delete { key } => {
            state.index.remove(&key);
        }
    })
}

#[cfg(test)]
mod tests;
