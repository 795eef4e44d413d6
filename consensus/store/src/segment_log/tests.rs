use super::*;
use std::fs::OpenOptions;

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

/// Segments of ten 1,000-byte values.
fn small(spare_segments: usize) -> Sizing {
    Sizing {
        segment_bytes: 10_000,
        spare_segments,
        recycle_within: Duration::from_secs(3600),
    }
}

/// The `.segment` and `.spare` files in `dir`.
fn files(dir: &Path) -> (usize, usize) {
    let names: Vec<String> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let count = |suffix: &str| names.iter().filter(|n| n.ends_with(suffix)).count();
    (count(".segment"), count(".spare"))
}

#[test]
fn deleted_segments_go_and_a_straggler_moves_forward() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = SegmentLog::open_with(dir.path(), Column::Batches, small(0)).expect("open");
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
    assert_eq!(files(dir.path()), (log.segments(), 0));
    drop(log);
    // Nothing deleted comes back, the straggler is still there.
    let log = SegmentLog::open_with(dir.path(), Column::Batches, small(0)).expect("reopen");
    assert_eq!(log.len(), 6);
    assert_eq!(log.get(&key(5)).expect("get"), Some(value(5, 1000)));
    assert_eq!(log.get(&key(99)).expect("get"), Some(value(99, 1000)));
    assert!(!log.contains(&key(0)));
}

#[test]
fn retired_files_are_reused_and_their_old_records_never_come_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = SegmentLog::open_with(dir.path(), Column::Batches, small(3)).expect("open");
    for i in 0..50 {
        log.put(&key(i), value(i, 1000)).expect("put");
    }
    let keys: Vec<[u8; 32]> = (0..45).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    log.delete(&refs).expect("delete");
    // At most three retired files kept, the rest deleted.
    assert_eq!(log.spares(), 3);
    assert_eq!(files(dir.path()), (log.segments(), 3));
    // New heads take the spares' files, overwriting fewer bytes than the files hold: the
    // head ends in old records of keys 0..45 (written under older sequence numbers).
    for i in 100..120 {
        log.put(&key(i), value(i, 1000)).expect("put");
    }
    assert_eq!(log.spares(), 1);
    log.put(&key(200), value(200, 10)).expect("put");
    drop(log);
    let log = SegmentLog::open_with(dir.path(), Column::Batches, small(3)).expect("reopen");
    let live: Vec<u32> = (0..250).filter(|&i| log.contains(&key(i))).collect();
    let expected: Vec<u32> = (45..50).chain(100..120).chain([200]).collect();
    assert_eq!(live, expected);
    for i in expected {
        let len = if i == 200 { 10 } else { 1000 };
        assert_eq!(
            log.get(&key(i)).expect("get"),
            Some(value(i, len)),
            "key {i}"
        );
    }
    // The spare left is deleted, not replayed; the log goes on in new files.
    assert_eq!(log.spares(), 0);
    assert_eq!(files(dir.path()), (log.segments(), 0));
    for i in 300..320 {
        log.put(&key(i), value(i, 1000)).expect("put");
    }
    drop(log);
    let log = SegmentLog::open_with(dir.path(), Column::Batches, small(3)).expect("reopen");
    assert_eq!(log.len(), 46);
    assert_eq!(log.get(&key(319)).expect("get"), Some(value(319, 1000)));
    assert!(!log.contains(&key(0)) && !log.contains(&key(44)));
}

#[test]
fn a_record_written_under_another_sequence_does_not_check_out() {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let log = SegmentLog::open(dir.path(), Column::Batches).expect("open");
        log.put(&key(1), value(1, 500)).expect("put");
    }
    // The same bytes as segment 7: what a file recycled from segment 0 into 7 would hold.
    fs::rename(segment_path(dir.path(), 0), segment_path(dir.path(), 7)).expect("rename");
    let log = SegmentLog::open(dir.path(), Column::Batches).expect("reopen");
    assert!(log.is_empty());
    let len = fs::metadata(segment_path(dir.path(), 7))
        .expect("stat")
        .len();
    assert_eq!(len, 0, "cut at its own records");
}

#[test]
fn files_past_the_recycling_age_are_deleted_not_reused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sizing = Sizing {
        recycle_within: Duration::ZERO,
        ..small(3)
    };
    let log = SegmentLog::open_with(dir.path(), Column::Batches, sizing).expect("open");
    for i in 0..50 {
        log.put(&key(i), value(i, 1000)).expect("put");
    }
    let keys: Vec<[u8; 32]> = (0..45).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    log.delete(&refs).expect("delete");
    assert_eq!(log.spares(), 0);
    assert_eq!(files(dir.path()), (log.segments(), 0));
    assert_eq!(log.len(), 5);
}

/// Run in a child process of its own (see the test below): it lowers the process's file size
/// limit so that a record's header is written and its value fails, then lifts it.
const FAILED_WRITE_CHILD: &str = "SEGMENT_LOG_FAILED_WRITE_DIR";

#[test]
fn a_record_after_a_failed_write_survives_a_restart() {
    if let Ok(dir) = std::env::var(FAILED_WRITE_CHILD) {
        let dir = Path::new(&dir);
        let log = SegmentLog::open(dir, Column::Batches).expect("open");
        log.put(&key(1), value(1, 1000)).expect("put");
        let end = fs::metadata(segment_path(dir, 0)).expect("stat").len();
        // Room for the next header and a little of its value: past the limit a write
        // fails with EFBIG (once SIGXFSZ, which would end the process, is ignored).
        let limit = end + (HEADER_BYTES + 32 + 100) as u64;
        let set_limit = |soft: libc::rlim_t| {
            let mut current = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: reads and writes this process's limits through valid pointers.
            unsafe {
                assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut current), 0);
                current.rlim_cur = soft;
                assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &current), 0);
            }
            current.rlim_max
        };
        // SAFETY: ignoring a signal installs no handler code.
        unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
        let hard = set_limit(limit);
        assert!(
            log.put(&key(2), value(2, 1000)).is_err(),
            "the value's write fails"
        );
        set_limit(hard);
        log.put(&key(3), value(3, 1000))
            .expect("put after the failure");
        drop(log);
        let log = SegmentLog::open(dir, Column::Batches).expect("reopen");
        assert_eq!(log.get(&key(1)).expect("get"), Some(value(1, 1000)));
        assert!(!log.contains(&key(2)));
        assert!(
            log.contains(&key(3)),
            "the record written after the failed one is lost"
        );
        assert_eq!(log.get(&key(3)).expect("get"), Some(value(3, 1000)));
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "segment_log::tests::a_record_after_a_failed_write_survives_a_restart",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FAILED_WRITE_CHILD, dir.path())
        .output()
        .expect("run the child");
    assert!(
        output.status.success(),
        "child failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the child ran the test: {stdout}"
    );
}
