use super::*;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A task waiting for `key` in `table`, returned once its wait is registered (so a test
/// covers the pending path, not a read that finds the key).
async fn waiter_on<C: ColumnKind>(
    table: &Table<C>,
    key: Digest,
) -> JoinHandle<Result<Bytes, StoreError>> {
    let waiting = table.waiting();
    let waiter = tokio::spawn({
        let table = table.clone();
        async move { table.notify_read(key).await }
    });
    tokio::time::timeout(Duration::from_secs(5), async {
        while table.waiting() == waiting {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("waiter registered");
    waiter
}

/// What `waiter` resolved to, within 5 s.
async fn resolved(waiter: JoinHandle<Result<Bytes, StoreError>>) -> Result<Bytes, StoreError> {
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("resolved")
        .expect("task")
}

/// The test backend records the writes it makes and fails those to the columns named.
#[tokio::test]
async fn the_test_backend_records_writes_and_fails_the_columns_named() {
    let backend = testing::TestBackend::default();
    let (writes, failing) = (backend.writes.clone(), backend.failing.clone());
    let store = Store::with_backend(backend);
    let key = Digest::of(b"k");
    lock(&failing).push(Column::Safety);
    let refused = store.safety().write(key, Bytes::from_static(b"v")).await;
    assert!(
        matches!(refused, Err(StoreError::Backend { .. })),
        "{refused:?}"
    );
    store
        .batches()
        .write(key, Bytes::from_static(b"v"))
        .await
        .expect("write");
    assert_eq!(
        lock(&writes).iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        [Column::Batches]
    );
    assert!(!store.safety().contains(&key).expect("read"));
}

/// On a store with writer threads, each column's writes run on that column's thread, and a
/// waiter on a key still wakes once the write is made. A delete in the background is
/// queued behind the writes before it.
#[tokio::test]
async fn each_columns_writes_run_on_its_own_thread() {
    let recorder = testing::RecordingBackend::default();
    let threads = recorder.writes.clone();
    let store = Store::with_writer_threads(recorder).expect("store");
    let key = Digest::of(b"k");
    let waiter = waiter_on(&store.batches(), key).await;
    let value = Bytes::from_static(b"v");
    store
        .blocks()
        .write(key, value.clone())
        .await
        .expect("write");
    store
        .batches()
        .write(key, value.clone())
        .await
        .expect("write");
    store
        .safety()
        .write(key, value.clone())
        .await
        .expect("write");
    store.meta().write(key, value.clone()).await.expect("write");
    let woken = resolved(waiter).await;
    assert_eq!(woken.ok(), Some(value.clone()));
    let expected: Vec<_> = [
        Column::Blocks,
        Column::Batches,
        Column::Safety,
        Column::Meta,
    ]
    .into_iter()
    .map(|c| (c, Some(column_writer::thread_name(c))))
    .collect();
    assert_eq!(*lock(&threads), expected);
    store.batches().remove(&[key]).await.expect("remove");
    assert!(!store.batches().contains(&key).expect("read"));

    let other = Digest::of(b"other");
    store.batches().remove_in_background(&[key]);
    store
        .batches()
        .write(key, value.clone())
        .await
        .expect("write");
    store.batches().remove_in_background(&[key]);
    // Queued after the delete: once it is made, so is the delete.
    store.batches().write(other, value).await.expect("write");
    assert!(!store.batches().contains(&key).expect("read"));
}

/// A write handed to a writer thread is made even if its caller stops waiting (its task is
/// cancelled, its future dropped), and it still wakes those who wait for the key: else a
/// core waiting for that batch would wait until someone wrote it again.
#[tokio::test]
async fn an_abandoned_write_still_wakes_waiters() {
    let store = Store::with_writer_threads(MemoryBackend::default()).expect("store");
    let key = Digest::of(b"k");
    let batches = store.batches();
    let waiter = waiter_on(&batches, key).await;
    // Polled once (the write is queued), then dropped.
    let _ = futures::FutureExt::now_or_never(batches.write(key, Bytes::from_static(b"v")));
    let value = resolved(waiter).await;
    assert_eq!(value.ok(), Some(Bytes::from_static(b"v")));
}

#[tokio::test]
async fn notify_read_resolves_on_write() {
    let batches = Store::new().batches();
    let key = Digest::of(b"k");
    let waiter = waiter_on(&batches, key).await;
    batches
        .write(key, Bytes::from_static(b"v"))
        .await
        .expect("write");
    let value = resolved(waiter).await;
    assert_eq!(value.ok(), Some(Bytes::from_static(b"v")));
    assert_eq!(
        batches.notify_read(key).await.ok(),
        Some(Bytes::from_static(b"v"))
    );
}

#[tokio::test]
async fn remove_and_prune() {
    let batches = Store::new().batches();
    let key = Digest::of(b"k");
    batches
        .write(key, Bytes::from_static(b"v"))
        .await
        .expect("write");
    assert!(batches.contains(&key).expect("read"));
    batches.remove(&[key]).await.expect("remove");
    assert!(batches.read(&key).expect("read").is_none());
    assert!(batches.is_empty());
}

/// A block stored under its digest is not a batch, and a waiter on the
/// batch namespace is not woken by a block write under the same key.
#[tokio::test]
async fn namespaces_are_separate() {
    let store = Store::new();
    let key = Digest::of(b"same key");
    let waiter = waiter_on(&store.batches(), key).await;
    store
        .blocks()
        .write(key, Bytes::from_static(b"block"))
        .await
        .expect("write");
    assert!(!store.batches().contains(&key).expect("read"));
    assert!(store.batches().read(&key).expect("read").is_none());
    assert!(store.safety().is_empty());
    store
        .batches()
        .write(key, Bytes::from_static(b"batch"))
        .await
        .expect("write");
    let value = resolved(waiter).await;
    assert_eq!(value.ok(), Some(Bytes::from_static(b"batch")));
    assert_eq!(
        store.blocks().read(&key).expect("read"),
        Some(Bytes::from_static(b"block"))
    );
}
