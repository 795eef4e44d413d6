//! A segment log's files on disk: their names (`<sequence>.segment`, `<sequence>.spare`) and
//! their records, `[kind u8][key length u8][value length u32 LE][crc32 u32 LE][key][value]`, the
//! CRC over the segment's sequence number, the key and the value. Writing a record's head, and
//! reading a segment's records back at recovery.

use crate::column::Column;
use crate::error::StoreError;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

pub(super) const HEADER_BYTES: usize = 1 + 1 + 4 + 4;
pub(super) const PUT: u8 = 1;
pub(super) const DELETE: u8 = 2;

pub(super) fn segment_path(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("{sequence:012}.segment"))
}

pub(super) fn spare_path(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("{sequence:012}.spare"))
}

/// A segment or spare file, for reading and positioned writes.
pub(super) fn open_file(path: &Path, create: bool) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)
}

/// A record read back: a value's place in its segment file, or a tombstone.
pub(super) enum Record {
    Put {
        key: Box<[u8]>,
        /// Offset of the value in the segment file.
        offset: u64,
        len: u32,
    },
    Delete {
        key: Box<[u8]>,
    },
}

/// The checksum of a record: over the sequence number of the segment it is written in, so that
/// a recycled file's old records do not check out in its new life, then its key and value.
pub(super) fn record_crc(sequence: u64, key: &[u8], value: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&sequence.to_le_bytes());
    crc.update(key);
    crc.update(value);
    crc.finalize()
}

/// A record's header and key; its value follows them on disk (written from the caller's buffer,
/// not copied into this one: a batch is hundreds of KB).
pub(super) fn record_head(
    column: Column,
    kind: u8,
    sequence: u64,
    key: &[u8],
    value: &[u8],
) -> Result<Vec<u8>, StoreError> {
    let key_len = u8::try_from(key.len())
        .map_err(|_| StoreError::backend(column, "key longer than 255 bytes"))?;
    let value_len = u32::try_from(value.len())
        .map_err(|_| StoreError::backend(column, "value larger than 4 GiB"))?;
    let mut head = Vec::with_capacity(HEADER_BYTES + key.len());
    head.push(kind);
    head.push(key_len);
    head.extend_from_slice(&value_len.to_le_bytes());
    head.extend_from_slice(&record_crc(sequence, key, value).to_le_bytes());
    head.extend_from_slice(key);
    Ok(head)
}

/// Reads the records of one segment, in order, into `on_record`, and returns the length of its
/// intact prefix, truncating the file there if a crash tore its last record or, in the head, a
/// recycled file's old records follow its own.
pub(super) fn replay(
    path: &Path,
    sequence: u64,
    is_head: bool,
    mut on_record: impl FnMut(Record),
) -> std::io::Result<u64> {
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
        let (key, value) = body.split_at(key_len);
        if record_crc(sequence, key, value) != crc {
            break;
        }
        let key: Box<[u8]> = key.into();
        on_record(if kind == PUT {
            Record::Put {
                key,
                offset: at + (HEADER_BYTES + key_len) as u64,
                len: value_len,
            }
        } else {
            Record::Delete { key }
        });
        at += HEADER_BYTES as u64 + body_len;
    }
    if at < file_len {
        // Expected in the head after a crash or when its file was recycled; a segment before
        // it was cut to its records when the next one started, so anything after them there
        // is damage.
        if is_head {
            tracing::info!(
                "segment log: {} ends at byte {at} of {file_len} (a torn record or a recycled \
                 file's old records follow); cut there",
                path.display()
            );
        } else {
            tracing::warn!(
                "segment log: {} ends in a torn or corrupt record at byte {at} of {file_len}; \
                 cut there (peers serve what it held)",
                path.display()
            );
        }
        OpenOptions::new().write(true).open(path)?.set_len(at)?;
    }
    Ok(at)
}
