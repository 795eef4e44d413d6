//! The durable store's writes on the consensus path, old against new: the safety state synced
//! before a vote (a redb durable commit after a block written to redb, as before; a
//! `DurableCell` write after a block appended to a `SegmentLog`, as now) and a batch appended
//! (retired segment files deleted, as before, or recycled, as now).
//!
//! `cargo bench -p store --bench store -- --warm-up-time 1 --measurement-time 5`
//!
//! These are wall times of calls that end in an fsync: they measure the disk under the
//! temporary directory (`TMPDIR`) as much as the code. Run on the disk the nodes will use, when
//! the machine is otherwise idle, and compare within one run.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use redb::{Database, Durability, TableDefinition};
use store::durable_cell::DurableCell;
use store::segment_log::{SegmentLog, Sizing, SPARE_SEGMENTS};
use store::Column;

/// About what one vote's safety state and one block weigh on the wire at 4 nodes.
const SAFETY_BYTES: usize = 400;
const BLOCK_BYTES: usize = 2_000;
const BATCH_BYTES: usize = 500_000;

const BLOCKS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks");
const SAFETY: TableDefinition<&[u8], &[u8]> = TableDefinition::new("safety");

fn key(i: u64) -> [u8; 32] {
    let mut key = [0; 32];
    key[..8].copy_from_slice(&i.to_le_bytes());
    key
}

fn redb_write(
    db: &Database,
    table: TableDefinition<&[u8], &[u8]>,
    key: &[u8],
    value: &[u8],
    durability: Durability,
) {
    let mut tx = db.begin_write().expect("begin");
    tx.set_durability(durability);
    tx.open_table(table)
        .expect("table")
        .insert(key, value)
        .expect("insert");
    tx.commit().expect("commit");
}

fn block_then_safety(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let block = vec![7u8; BLOCK_BYTES];
    let safety = vec![9u8; SAFETY_BYTES];
    let mut group = c.benchmark_group("block_then_safety");

    let db = Database::create(dir.path().join("store.redb")).expect("redb");
    let mut i = 0u64;
    group.bench_function("redb", |b| {
        b.iter(|| {
            i += 1;
            redb_write(&db, BLOCKS, &key(i), &block, Durability::None);
            redb_write(&db, SAFETY, &key(0), &safety, Durability::Immediate);
        })
    });

    let log = SegmentLog::open(&dir.path().join("blocks"), Column::Blocks).expect("log");
    let cell = DurableCell::open(&dir.path().join("safety"), Column::Safety).expect("cell");
    let mut i = 0u64;
    group.bench_function("log_and_cell", |b| {
        b.iter(|| {
            i += 1;
            log.put(&key(i), Bytes::from(block.clone())).expect("block");
            cell.put(&key(0), Bytes::from(safety.clone()))
                .expect("safety");
        })
    });
    group.finish();
}

fn batch_append(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let batch = Bytes::from(vec![5u8; BATCH_BYTES]);
    let mut group = c.benchmark_group("batch_append");
    group.throughput(Throughput::Bytes(BATCH_BYTES as u64));
    // Retired segments deleted (as before) against kept and overwritten in place (as now).
    for (name, spare_segments) in [("delete_segments", 0), ("recycle_segments", SPARE_SEGMENTS)] {
        let sizing = Sizing {
            spare_segments,
            ..Sizing::default()
        };
        let log =
            SegmentLog::open_with(&dir.path().join(name), Column::Batches, sizing).expect("log");
        let mut i = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                log.put(&key(i), batch.clone()).expect("put");
                // Keep a window of 100 live batches, as the GC window does.
                if i > 100 {
                    log.delete(&[&key(i - 100)]).expect("delete");
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, block_then_safety, batch_append);
criterion_main!(benches);
