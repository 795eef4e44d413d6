//! The durable home of the batch and block columns: an append-only log of segment files.
//!
//! Batches are the store's bulk (hundreds of KB each, hundreds a second at speed), written once,
//! read a few times soon after (the committer, a peer's sync request), and deleted together
//! `gc_depth` rounds after they commit. A B-tree is the wrong shape for that: redb copied every
//! 500 KB value into its pages, checksummed and freed them again, and `hotstuff --store` lost
//! about 40 % of its capacity to it. A log writes each batch once, sequentially, and deletes
//! whole files. Blocks follow the same life (written once, pruned in order), in a log of their
//! own.
//!
//! Layout: `DIR/<sequence>.segment` files, each a run of records
//! `[kind u8][key length u8][value length u32 LE][crc32 of key and value u32 LE][key][value]`,
//! where a `Delete` record (a tombstone, value empty) removes the key from the index at
//! recovery. A new segment starts once the head reaches [`SEGMENT_BYTES`].
//!
//! In memory: an index from key to its record, holding the value itself for what this life
//! wrote (the in-memory store holds the same, so `--store` costs no extra memory), and read back
//! with one positioned read for what an earlier life wrote.
//!
//! Reclaiming space, oldest first only: the front segment is deleted once nothing in it is live,
//! and moved forward (its few live records appended to the head) once less than a quarter of it
//! is live, so a batch that never commits cannot pin old files. Deleting only from the front
//! keeps recovery right without rewriting tombstones: a tombstone can only name a key written in
//! its own segment or an older one, so it is never needed after everything up to its own segment
//! is gone.
//!
//! Durability: records are written with `write` and never synced. They survive a crash of the
//! process (the kernel holds them), not of the machine; a batch lost that way is fetched from
//! peers like any missing one. Only the safety state, which keeps a node from voting twice,
//! is synced (`durable_cell.rs`). A record torn by a crash ends its segment: recovery keeps what precedes
//! it and truncates the rest.

use crate::store::{Column, StoreError};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A new segment starts once the head is this large.
pub const SEGMENT_BYTES: u64 = 64 << 20;
/// The front segment is moved forward once less than this fraction of its bytes is live.
const LIVE_FRACTION_TO_MOVE: u64 = 4;

const HEADER_BYTES: usize = 1 + 1 + 4 + 4;
const PUT: u8 = 1;
const DELETE: u8 = 2;

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

struct Segment {
    file: File,
    path: PathBuf,
    size: u64,
    /// Bytes of the records still live in this segment.
    live: u64,
}

struct State {
    index: HashMap<Box<[u8]>, Entry>,
    /// By sequence number; the last one is the head, where records are appended.
    segments: BTreeMap<u64, Segment>,
}

pub struct SegmentLog {
    /// The store column this log holds (named in its errors).
    column: Column,
    dir: PathBuf,
    segment_bytes: u64,
    state: Mutex<State>,
}

/// A record's header and key; its value follows them on disk (written from the caller's buffer,
/// not copied into this one: a batch is hundreds of KB).
fn record_head(column: Column, kind: u8, key: &[u8], value: &[u8]) -> Result<Vec<u8>, StoreError> {
    let key_len = u8::try_from(key.len())
        .map_err(|_| StoreError::backend(column, "key longer than 255 bytes"))?;
    let value_len = u32::try_from(value.len())
        .map_err(|_| StoreError::backend(column, "value larger than 4 GiB"))?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(key);
    crc.update(value);
    let mut head = Vec::with_capacity(HEADER_BYTES + key.len());
    head.push(kind);
    head.push(key_len);
    head.extend_from_slice(&value_len.to_le_bytes());
    head.extend_from_slice(&crc.finalize().to_le_bytes());
    head.extend_from_slice(key);
    Ok(head)
}

fn segment_path(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("{sequence:012}.segment"))
}

/// A poisoned lock is still consistent: every critical section updates the index only after
/// its file operation succeeded.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl SegmentLog {
    /// Opens the log in `dir` (created if absent) and rebuilds its index from the segments.
    pub fn open(dir: &Path, column: Column) -> Result<Self, StoreError> {
        Self::open_with_segments_of(dir, column, SEGMENT_BYTES)
    }

    /// As [`open`](Self::open), starting a new segment once the head holds `segment_bytes`.
    pub fn open_with_segments_of(
        dir: &Path,
        column: Column,
        segment_bytes: u64,
    ) -> Result<Self, StoreError> {
        let open_failed = |e: &dyn std::fmt::Display| StoreError::open(dir, e);
        fs::create_dir_all(dir).map_err(|e| open_failed(&e))?;
        let mut sequences = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| open_failed(&e))? {
            let name = entry.map_err(|e| open_failed(&e))?.file_name();
            let name = name.to_string_lossy();
            if let Some(sequence) = name.strip_suffix(".segment") {
                match sequence.parse::<u64>() {
                    Ok(sequence) => sequences.push(sequence),
                    Err(_) => return Err(open_failed(&format!("unexpected file {name}"))),
                }
            }
        }
        sequences.sort_unstable();
        let mut state = State {
            index: HashMap::new(),
            segments: BTreeMap::new(),
        };
        for sequence in sequences {
            let path = segment_path(dir, sequence);
            let size = replay(&path, sequence, &mut state).map_err(|e| open_failed(&e))?;
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .open(&path)
                .map_err(|e| open_failed(&e))?;
            state.segments.insert(
                sequence,
                Segment {
                    file,
                    path,
                    size,
                    live: 0,
                },
            );
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
            segment_bytes,
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

    fn start_segment(&self, state: &mut State, sequence: u64) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, sequence);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| StoreError::backend(self.column, e))?;
        state.segments.insert(
            sequence,
            Segment {
                file,
                path,
                size: 0,
                live: 0,
            },
        );
        Ok(())
    }

    /// Appends `parts` (one record, or several tombstones) to the head, starting a new head
    /// first if this one is full; returns the head and the offset they start at.
    fn append(&self, state: &mut State, parts: &[&[u8]]) -> Result<(u64, u64), StoreError> {
        let (&head, segment) = state
            .segments
            .last_key_value()
            .ok_or_else(|| StoreError::backend(self.column, "no segment"))?;
        if segment.size >= self.segment_bytes {
            self.start_segment(state, head + 1)?;
        }
        let (&head, segment) = state
            .segments
            .iter_mut()
            .next_back()
            .ok_or_else(|| StoreError::backend(self.column, "no segment"))?;
        let at = segment.size;
        for part in parts {
            segment
                .file
                .write_all(part)
                .map_err(|e| StoreError::backend(self.column, e))?;
            segment.size += part.len() as u64;
        }
        Ok((head, at))
    }

    fn put_locked(&self, state: &mut State, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        let head = record_head(self.column, PUT, key, &value)?;
        let (segment, at) = self.append(state, &[&head, &value])?;
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
        let mut tombstones = Vec::new();
        for key in keys {
            if state.index.contains_key(*key) {
                tombstones.extend(record_head(self.column, DELETE, key, &[])?);
            }
        }
        if tombstones.is_empty() {
            return Ok(());
        }
        self.append(&mut state, &[&tombstones])?;
        for key in keys {
            if let Some(old) = state.index.remove(*key) {
                forget(&mut state, key, &old);
            }
        }
        self.reclaim(&mut state)
    }

    /// Deletes the front segment while nothing in it is live, and moves it forward when little
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
                fs::remove_file(&segment.path).map_err(|e| StoreError::backend(self.column, e))?;
            }
        }
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
}

/// The record of `key` is no longer live: its segment's live bytes shrink.
fn forget(state: &mut State, key: &[u8], entry: &Entry) {
    if let Some(segment) = state.segments.get_mut(&entry.segment) {
        segment.live = segment.live.saturating_sub(entry.record_bytes(key));
    }
}

/// Reads the records of one segment into the index and returns the length of its intact
/// prefix, truncating the file there if a crash tore its last record.
fn replay(path: &Path, sequence: u64, state: &mut State) -> std::io::Result<u64> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut at = 0u64;
    let mut header = [0u8; HEADER_BYTES];
    let mut body = Vec::new();
    loop {
        if file_len - at < HEADER_BYTES as u64 {
            break;
        }
        reader.read_exact(&mut header)?;
        let kind = header[0];
        let key_len = usize::from(header[1]);
        let value_len = u32::from_le_bytes([header[2], header[3], header[4], header[5]]);
        let crc = u32::from_le_bytes([header[6], header[7], header[8], header[9]]);
        let body_len = key_len as u64 + u64::from(value_len);
        if !matches!(kind, PUT | DELETE) || file_len - at - (HEADER_BYTES as u64) < body_len {
            break;
        }
        body.resize(body_len as usize, 0);
        reader.read_exact(&mut body)?;
        if crc32fast::hash(&body) != crc {
            break;
        }
        let key: Box<[u8]> = body[..key_len].into();
        if kind == PUT {
            state.index.insert(
                key,
                Entry {
                    segment: sequence,
                    offset: at + (HEADER_BYTES + key_len) as u64,
                    len: value_len,
                    cached: None,
                },
            );
        } else {
            state.index.remove(&key);
        }
        at += HEADER_BYTES as u64 + body_len;
    }
    if at < file_len {
        tracing::warn!(
            "batch log: {} ends in a torn or corrupt record at byte {at} of {file_len}; \
             truncating (peers serve what it held)",
            path.display()
        );
        OpenOptions::new().write(true).open(path)?.set_len(at)?;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> [u8; 32] {
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(&i.to_le_bytes());
        key
    }

    fn value(i: u32, len: usize) -> Bytes {
        Bytes::from(vec![i as u8; len])
    }

    #[test]
    fn values_and_deletes_survive_reopening() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let log = SegmentLog::open(dir.path(), Column::Batches).expect("open");
            for i in 0..10 {
                log.put(&key(i), value(i, 1000)).expect("put");
            }
            log.delete(&[&key(3)[..], &key(7)[..]]).expect("delete");
        }
        let log = SegmentLog::open(dir.path(), Column::Batches).expect("reopen");
        assert_eq!(log.len(), 8);
        assert!(!log.contains(&key(3)) && !log.contains(&key(7)));
        // Read back from the file (this life did not write it).
        assert_eq!(log.get(&key(9)).expect("get"), Some(value(9, 1000)));
        // A key deleted and written again is live after a reopen.
        log.put(&key(3), value(33, 10)).expect("put");
        drop(log);
        let log = SegmentLog::open(dir.path(), Column::Batches).expect("reopen");
        assert_eq!(log.get(&key(3)).expect("get"), Some(value(33, 10)));
    }

    #[test]
    fn a_torn_last_record_is_cut_and_what_precedes_it_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let log = SegmentLog::open(dir.path(), Column::Batches).expect("open");
            log.put(&key(1), value(1, 500)).expect("put");
            log.put(&key(2), value(2, 500)).expect("put");
        }
        let path = segment_path(dir.path(), 0);
        let full = fs::metadata(&path).expect("stat").len();
        // A crash in the middle of the second record's value.
        OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open")
            .set_len(full - 100)
            .expect("truncate");
        let log = SegmentLog::open(dir.path(), Column::Batches).expect("reopen");
        assert_eq!(log.get(&key(1)).expect("get"), Some(value(1, 500)));
        assert!(!log.contains(&key(2)));
        // The log goes on after the cut.
        log.put(&key(3), value(3, 500)).expect("put");
        drop(log);
        let log = SegmentLog::open(dir.path(), Column::Batches).expect("reopen");
        assert_eq!(log.len(), 2);
        assert_eq!(log.get(&key(3)).expect("get"), Some(value(3, 500)));
    }

    #[test]
    fn a_corrupt_record_is_not_read_as_a_batch() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let log = SegmentLog::open(dir.path(), Column::Batches).expect("open");
            log.put(&key(1), value(1, 500)).expect("put");
        }
        let path = segment_path(dir.path(), 0);
        let mut bytes = fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        fs::write(&path, bytes).expect("write");
        let log = SegmentLog::open(dir.path(), Column::Batches).expect("reopen");
        assert!(log.is_empty());
    }

    #[test]
    fn deleted_segments_go_and_a_straggler_moves_forward() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Segments of ten 1,000-byte values.
        let log =
            SegmentLog::open_with_segments_of(dir.path(), Column::Batches, 10_000).expect("open");
        for i in 0..100 {
            log.put(&key(i), value(i, 1000)).expect("put");
        }
        assert!(log.segments() >= 10, "{}", log.segments());
        // Garbage collection deletes all but one batch (say, one that never commits).
        let keys: Vec<[u8; 32]> = (0..95).filter(|&i| i != 5).map(key).collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        log.delete(&refs).expect("delete");
        assert!(log.segments() <= 2, "{}", log.segments());
        assert_eq!(log.len(), 6);
        assert_eq!(log.get(&key(5)).expect("get"), Some(value(5, 1000)));
        let files = fs::read_dir(dir.path()).expect("list").count();
        assert_eq!(files, log.segments());
        drop(log);
        // Nothing deleted comes back, the straggler is still there.
        let log =
            SegmentLog::open_with_segments_of(dir.path(), Column::Batches, 10_000).expect("reopen");
        assert_eq!(log.len(), 6);
        assert_eq!(log.get(&key(5)).expect("get"), Some(value(5, 1000)));
        assert_eq!(log.get(&key(99)).expect("get"), Some(value(99, 1000)));
        assert!(!log.contains(&key(0)));
    }
}
