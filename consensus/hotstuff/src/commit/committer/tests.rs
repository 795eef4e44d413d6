use super::*;
use crate::messages::tests::{keys, signed_block};
use crate::messages::QC;
use batch::BatchBuilder;
use crypto::Digest;
use crypto::KeyPair;
use plumbing::metered;
use std::time::Duration;

fn batch(tag: &[u8]) -> Batch {
    let mut builder = BatchBuilder::with_capacity(64);
    builder.push(tag);
    builder.seal(1, 64)
}

/// Whether `store` still holds `batch`'s bytes.
fn holds(store: &Store, batch: &Batch) -> bool {
    store.batches().contains(&batch.digest()).expect("read")
}

/// One batch per tag.
fn batches(tags: &[&[u8]]) -> Vec<Batch> {
    tags.iter().map(|tag| batch(tag)).collect()
}

/// A window no test outlasts: batches leave only by what the test sets up (peers holding
/// them, a checkpoint), never by rounds, time or bytes.
fn lasting_window() -> GcWindow {
    GcWindow {
        rounds: 100,
        time: Duration::from_secs(3_600),
        bytes: u64::MAX,
    }
}

/// A block of `round` naming `payload`; the committer checks no certificate or author.
fn block(keys: &[KeyPair], round: Round, payload: Vec<Digest>) -> Block {
    signed_block(QC::genesis(), None, round, payload, &keys[0])
}

/// Hands `blocks` to the committer as committed, in order.
async fn send_commits(tx: &mpsc::Sender<ToCommitter>, blocks: &[&Block]) {
    for block in blocks {
        tx.send(ToCommitter::Commit((*block).clone()))
            .await
            .expect("send");
    }
}

/// The next `count` batches the committer delivers.
async fn next_delivered(
    rx: &mut metered::MeteredReceiver<CommittedBatch>,
    count: usize,
) -> Vec<CommittedBatch> {
    let mut delivered = Vec::new();
    for _ in 0..count {
        let committed = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("delivered in time")
            .expect("committer alive");
        delivered.push(committed);
    }
    delivered
}

/// A running committer and its ends: blocks in, batches out, and the round every peer holds
/// (see `PeerRounds`).
struct Running {
    store: Store,
    tx_commit: mpsc::Sender<ToCommitter>,
    rx_output: metered::MeteredReceiver<CommittedBatch>,
    tx_held: watch::Sender<Round>,
    rx_fatal: watch::Receiver<Option<FatalError>>,
    /// What the committer asks the mempool for.
    rx_mempool: mpsc::Receiver<ConsensusMempoolMessage>,
}

/// How long these committers wait for a batch missing from their store.
const PATIENCE: Duration = Duration::from_millis(300);

/// Starts a committer with `window` over a store that holds `batches`.
async fn committer_over(batches: &[&Batch], window: GcWindow) -> Running {
    committer_with(batches, window, None).await
}

/// As `committer_over`, for an application that checkpoints into `checkpoints`.
async fn committer_with(
    batches: &[&Batch],
    window: GcWindow,
    checkpoints: Option<CheckpointSlot>,
) -> Running {
    let store = Store::new();
    for b in batches {
        store
            .batches()
            .write(b.digest(), b.bytes().clone())
            .await
            .expect("write");
    }
    let (tx_commit, rx_commit) = mpsc::channel(8);
    let (tx_output, rx_output, _) = metered::channel(8);
    let (tx_held, rx_held) = watch::channel(0);
    let (tx_fatal, rx_fatal) = watch::channel(None);
    let (tx_mempool, rx_mempool) = mpsc::channel(8);
    Committer::spawn(
        store.clone(),
        window,
        rx_commit,
        tx_output,
        Arc::new(ConsensusMetrics::default()),
        CommitterLinks {
            held_by_all: rx_held,
            progress: Arc::default(),
            checkpoints,
            tx_fatal,
            tx_mempool,
            patience: PATIENCE,
        },
    );
    Running {
        store,
        tx_commit,
        rx_output,
        tx_held,
        rx_fatal,
        rx_mempool,
    }
}

/// A block that names a batch it committed before, or names one batch twice, delivers it
/// once.
#[tokio::test]
async fn never_delivers_a_batch_twice() {
    let keys = keys(4);
    let (old, fresh) = (batch(b"old"), batch(b"fresh"));
    let mut running = committer_over(&[&old, &fresh], lasting_window()).await;
    let first = block(&keys, 1, vec![old.digest()]);
    // A Byzantine leader re-proposes it, and names `fresh` twice.
    let repeating = block(&keys, 9, vec![old.digest(), fresh.digest(), fresh.digest()]);
    let empty = block(&keys, 10, vec![]);
    send_commits(&running.tx_commit, &[&first, &repeating, &empty]).await;
    assert_eq!(
        delivered_rounds(&mut running.rx_output, 3).await,
        vec![
            (1, Some(old.digest())),
            (9, Some(fresh.digest())),
            (10, None)
        ]
    );
}

/// The committed rounds of what the committer delivers next: (round, batch), `None` for a
/// block with nothing to deliver.
async fn delivered_rounds(
    rx: &mut metered::MeteredReceiver<CommittedBatch>,
    count: usize,
) -> Vec<(Round, Option<Digest>)> {
    next_delivered(rx, count)
        .await
        .into_iter()
        .map(|committed| {
            let digest = (!committed.is_empty_block()).then(|| committed.batch.digest());
            (committed.round, digest)
        })
        .collect()
}

/// A Byzantine leader proposes a committed batch again. Whether honest nodes deliver it again
/// must follow from the chain alone, or they hand their applications different streams: it is
/// skipped up to the round window's last round after the first commit, and delivered again
/// past it, however long this node still remembers the batch (here an hour: the time half of
/// the window is local, as is the checkpoint that holds batches back). Before, the committer
/// skipped whatever it still remembered, so a node that remembered longer (a slower clock, a
/// lagging executor) skipped what its peers delivered.
#[tokio::test]
async fn byzantine_a_batch_proposed_again_is_delivered_again_by_rounds_alone() {
    let keys = keys(4);
    let again = batch(b"again");
    let mut running = committer_over(&[&again], lasting_window()).await;
    let rounds = lasting_window().rounds;
    let first = block(&keys, 1, vec![again.digest()]);
    let last_in_window = block(&keys, 1 + rounds, vec![again.digest()]);
    let past_window = block(&keys, 2 + rounds, vec![again.digest()]);
    send_commits(&running.tx_commit, &[&first, &last_in_window, &past_window]).await;
    assert_eq!(
        delivered_rounds(&mut running.rx_output, 3).await,
        vec![
            (1, Some(again.digest())),
            (1 + rounds, None),
            (2 + rounds, Some(again.digest())),
        ]
    );
}

/// A batch delivered again belongs to the block that delivered it last: the first block
/// leaving the window neither deletes its bytes nor forgets it, so a third proposal within
/// the window of the second is skipped, not read from a store that lost it. Before, the
/// first block's expiry deleted the batch, and the third proposal stopped the node.
#[tokio::test]
async fn byzantine_a_batch_delivered_again_lives_by_its_last_commit() {
    let keys = keys(4);
    let again = batch(b"again");
    let window = GcWindow {
        rounds: 2,
        time: Duration::ZERO,
        bytes: u64::MAX,
    };
    let mut running = committer_over(&[&again], window).await;
    let blocks = [
        block(&keys, 1, vec![again.digest()]),
        block(&keys, 4, vec![again.digest()]),
        block(&keys, 5, vec![]),
        block(&keys, 6, vec![again.digest()]),
    ];
    send_commits(&running.tx_commit, &blocks.iter().collect::<Vec<_>>()).await;
    assert_eq!(
        delivered_rounds(&mut running.rx_output, 4).await,
        vec![
            (1, Some(again.digest())),
            (4, Some(again.digest())),
            (5, None),
            (6, None),
        ]
    );
    assert!(running.rx_fatal.borrow().is_none());
    assert!(
        holds(&running.store, &again),
        "its last commit is in the window"
    );
}

/// A batch of a committed block that the store lost (a machine crash loses batch records
/// not yet written back) and that no peer sends in time stops the node with an error naming
/// it. Before, the committer skipped it ("was collected; skipped") and the node's state
/// silently left its peers'.
#[tokio::test]
async fn recovery_a_lost_batch_of_a_committed_block_stops_the_node() {
    let keys = keys(4);
    let (kept, lost) = (batch(b"kept"), batch(b"lost"));
    let mut running = committer_over(&[&kept], lasting_window()).await;
    let block = block(&keys, 3, vec![kept.digest(), lost.digest()]);
    send_commits(&running.tx_commit, &[&block]).await;
    let request = tokio::time::timeout(Duration::from_secs(5), running.rx_mempool.recv())
        .await
        .expect("asked in time");
    assert_eq!(
        request,
        Some(ConsensusMempoolMessage::Synchronize(
            vec![lost.digest()],
            block.author,
            block.round
        ))
    );
    tokio::time::timeout(Duration::from_secs(5), running.rx_fatal.changed())
        .await
        .expect("stopped in time")
        .expect("sender alive until it reports");
    let fatal = running.rx_fatal.borrow().clone();
    match fatal {
        Some(FatalError::LostBatch {
            batch, block: b, ..
        }) => {
            assert_eq!((batch, b), (lost.digest(), block.digest()));
        }
        other => panic!("expected a lost batch, got {other:?}"),
    }
    // Nothing of the block is marked complete: the application never checkpoints after it.
    while let Ok(committed) = running.rx_output.try_recv() {
        assert!(
            !committed.last_of_block,
            "the block was delivered as complete"
        );
    }
}

/// Batches of blocks after the application's latest checkpoint stay in the store however
/// far commits go, even when every peer holds them: a node restarted on its store replays
/// those blocks from its checkpoint. Before, an executor that lagged its commits by more
/// than the GC window found them deleted at the restart.
#[tokio::test]
async fn recovery_batches_after_the_latest_checkpoint_are_kept() {
    let keys = keys(4);
    let batches = batches(&[b"a", b"b", b"c", b"d"]);
    let window = GcWindow {
        rounds: 1,
        time: Duration::ZERO,
        bytes: 0,
    };
    let checkpoints = CheckpointSlot::default();
    let mut running = committer_with(
        &batches.iter().collect::<Vec<_>>(),
        window,
        Some(checkpoints.clone()),
    )
    .await;
    running.tx_held.send(Round::MAX).expect("committer alive");
    let block = |round: Round, i: usize| block(&keys, round, vec![batches[i].digest()]);
    let stored = |i: usize| holds(&running.store, &batches[i]);
    // The application checkpointed after round 1 only: it lags.
    checkpoints.publish(checkpoint::Checkpoint::new(
        Digest::default(),
        1,
        bytes::Bytes::new(),
    ));
    for (round, i) in [(1, 0), (5, 1), (10, 2), (20, 3)] {
        commit(&running.tx_commit, &mut running.rx_output, block(round, i)).await;
    }
    commit(&running.tx_commit, &mut running.rx_output, block(30, 3)).await;
    assert!(!stored(0), "batches up to the checkpoint go");
    assert!(stored(1) && stored(2) && stored(3), "batches after it stay");
    // Once the application checkpoints past them, they go.
    checkpoints.publish(checkpoint::Checkpoint::new(
        Digest::default(),
        10,
        bytes::Bytes::new(),
    ));
    commit(&running.tx_commit, &mut running.rx_output, block(31, 3)).await;
    assert!(!stored(1) && !stored(2) && stored(3));
}

/// Every committed block reaches the application, also one with nothing to deliver (an idle
/// chain's block, or one naming only batches committed before): the application checkpoints
/// after the blocks it sees, so on an idle chain it would otherwise stop checkpointing while
/// peers prune, and a node restarted then could not rejoin (found by the 60 s leader-kill
/// run once its clients had stopped).
#[tokio::test]
async fn a_block_without_batches_reaches_the_application_as_an_empty_block() {
    let keys = keys(4);
    let a = batch(b"a");
    let mut running = committer_over(&[&a], lasting_window()).await;
    let blocks = [
        block(&keys, 1, vec![a.digest()]),
        block(&keys, 2, vec![]),
        block(&keys, 3, vec![a.digest()]),
    ];
    send_commits(&running.tx_commit, &blocks.iter().collect::<Vec<_>>()).await;
    let delivered: Vec<_> = next_delivered(&mut running.rx_output, 3)
        .await
        .into_iter()
        .map(|committed| {
            (
                committed.round,
                committed.block,
                committed.last_of_block,
                committed.batch.tx_count(),
                committed.is_empty_block(),
            )
        })
        .collect();
    assert_eq!(
        delivered,
        vec![
            (1, blocks[0].digest(), true, 1, false),
            (2, blocks[1].digest(), true, 0, true),
            (3, blocks[2].digest(), true, 0, true),
        ]
    );
}

/// The time window is for peers that are behind. When every peer signed a QC at a batch's
/// round, its bytes go as soon as the round window passed, not after the time window (with
/// the time window alone a healthy node's memory grows by its throughput times the window, all
/// of it fresh memory the kernel must zero; see `docs/overload.md`). While a peer is behind,
/// bytes stay. The time window here is an hour, so nothing below can have
/// been freed by time.
#[tokio::test]
async fn frees_bytes_held_by_every_peer_without_waiting_for_the_time_window() {
    let keys = keys(4);
    let batches = batches(&[b"a", b"b", b"c", b"d", b"e"]);
    let window = GcWindow {
        rounds: 1,
        time: Duration::from_secs(3_600),
        bytes: u64::MAX,
    };
    let mut running = committer_over(&batches.iter().collect::<Vec<_>>(), window).await;
    let stored = |i: usize| holds(&running.store, &batches[i]);
    // Commits block `round` naming batch `i` and waits for its delivery: the committer
    // handles blocks in turn, so the previous block's garbage collection is done by then.
    let block = |round: Round, i: usize| block(&keys, round, vec![batches[i].digest()]);
    commit(&running.tx_commit, &mut running.rx_output, block(1, 0)).await;
    commit(&running.tx_commit, &mut running.rx_output, block(3, 1)).await;
    commit(&running.tx_commit, &mut running.rx_output, block(4, 2)).await;
    // Block 1 is outside the round window, but no peer signed anything yet: a peer that is
    // behind may still fetch `a` from us.
    assert!(stored(0));
    // Every peer signed a QC of round 1: `a` is theirs already.
    running.tx_held.send(1).expect("committer alive");
    commit(&running.tx_commit, &mut running.rx_output, block(6, 3)).await;
    commit(&running.tx_commit, &mut running.rx_output, block(7, 4)).await;
    assert!(!stored(0), "bytes every peer holds were kept");
    // Round 3 is above what every peer holds: `b` stays, and so do the recent ones.
    assert!(stored(1) && stored(2) && stored(3) && stored(4));
}

/// Sends `block` to the committer and waits for its delivery: the committer handles blocks in
/// turn, so the previous block's garbage collection is done by then.
async fn commit(
    tx: &mpsc::Sender<ToCommitter>,
    rx: &mut metered::MeteredReceiver<CommittedBatch>,
    block: Block,
) {
    let round = block.round;
    tx.send(ToCommitter::Commit(block)).await.expect("send");
    let committed = rx.recv().await.expect("committer alive");
    assert_eq!(committed.round, round);
}

/// A peer that stops signing (or that the QCs keep leaving out) must not make a node keep
/// every committed batch for the whole time window: past the byte budget, the oldest go.
#[tokio::test]
async fn committed_bytes_kept_for_peers_stay_within_the_budget() {
    let keys = keys(4);
    let batches = batches(&[b"a", b"b", b"c", b"d"]);
    let size = batches[0].bytes().len() as u64;
    let window = GcWindow {
        bytes: 2 * size,
        ..lasting_window()
    };
    let mut running = committer_over(&batches.iter().collect::<Vec<_>>(), window).await;
    for (i, batch) in batches.iter().enumerate() {
        let round = i as Round + 1;
        commit(
            &running.tx_commit,
            &mut running.rx_output,
            block(&keys, round, vec![batch.digest()]),
        )
        .await;
    }
    // An empty block, so the last one's garbage collection is done.
    commit(
        &running.tx_commit,
        &mut running.rx_output,
        block(&keys, 5, vec![]),
    )
    .await;
    // No peer holds anything and the window is long: only the budget freed the oldest.
    let stored: Vec<bool> = batches.iter().map(|b| holds(&running.store, b)).collect();
    assert_eq!(stored, vec![false, false, true, true]);
}

/// A checkpoint is taken after a block's last batch, so the flag must be on the last batch
/// delivered of each block, even when the block's last named batch is skipped.
#[tokio::test]
async fn the_last_delivered_batch_of_a_block_says_so() {
    let keys = keys(4);
    let [a, b, c] = [batch(b"a"), batch(b"b"), batch(b"c")];
    let mut running = committer_over(&[&a, &b, &c], lasting_window()).await;
    let first = block(&keys, 1, vec![a.digest(), b.digest()]);
    // `a` again at the end: skipped, so `c` is the last delivered.
    let second = block(&keys, 2, vec![c.digest(), a.digest()]);
    send_commits(&running.tx_commit, &[&first, &second]).await;
    let delivered: Vec<_> = next_delivered(&mut running.rx_output, 3)
        .await
        .into_iter()
        .map(|committed| {
            (
                committed.batch.digest(),
                committed.block,
                committed.last_of_block,
            )
        })
        .collect();
    assert_eq!(
        delivered,
        vec![
            (a.digest(), first.digest(), false),
            (b.digest(), first.digest(), true),
            (c.digest(), second.digest(), true),
        ]
    );
}

/// A batch of a committed block missing from the store is fetched from peers, and the block is
/// delivered whole once it arrives. It goes missing when a machine crash lost its record, or
/// when the mempool drained it (a batch no stored block named) just as the core stored its
/// block. Before, the node stopped at once.
#[tokio::test]
async fn recovery_a_batch_of_a_committed_block_missing_here_is_fetched_from_peers() {
    let keys = keys(4);
    let (kept, missing) = (batch(b"kept"), batch(b"missing"));
    let mut running = committer_over(&[&kept], lasting_window()).await;
    let block = block(&keys, 3, vec![kept.digest(), missing.digest()]);
    send_commits(&running.tx_commit, &[&block]).await;
    let request = tokio::time::timeout(Duration::from_secs(5), running.rx_mempool.recv())
        .await
        .expect("asked in time");
    assert!(matches!(
        request,
        Some(ConsensusMempoolMessage::Synchronize(ref digests, author, 3))
            if *digests == vec![missing.digest()] && author == block.author
    ));
    // A peer's reply lands in the store, as the mempool's peer handler writes it.
    running
        .store
        .batches()
        .write(missing.digest(), missing.bytes().clone())
        .await
        .expect("write");
    assert_eq!(
        delivered_rounds(&mut running.rx_output, 2).await,
        vec![(3, Some(kept.digest())), (3, Some(missing.digest()))]
    );
    assert!(running.rx_fatal.borrow().is_none());
}
