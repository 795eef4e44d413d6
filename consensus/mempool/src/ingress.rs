//! The ingress check: client transactions are checked at the node they are sent to, before a
//! batch is sealed, and the invalid ones (malformed, or badly signed) are dropped there.
//!
//! ```text
//! clients ─► tx_receiver ═► ingress check ═► batch_maker
//! ```
//! Without it, one forged transaction in a batch made the batch check of every node that checks
//! it (each one under `all`, the attesters under `attested`) fail and fall back to searching for
//! the forgery. With it, a batch leaving an honest node holds no invalid transaction: the other
//! nodes' checks pass at the first try, and the sealing node does not check its own batch again
//! (see `CheckedBatches`). Only honest authors are helped: a Byzantine author skips the check and
//! seals forgeries anyway, and every honest node still checks (or takes the attesters' word for)
//! every batch it did not seal itself.
//!
//! What "invalid" means is the application's: the node hands the mempool the check
//! ([`CheckTransactions`]), which runs on the node's verifier pool with a history of invalid
//! items of its own (a node's clients may forge many; the batches its peers sealed from checked
//! transactions hold none).
//!
//! Bounded, and pushing back like the other stages: the chunks on their way from the clients'
//! port keep their room in the port's queue (bounded in bytes over all connections) until the
//! batch maker has taken them, through this check. While it is behind, that room runs out, the
//! port stops reading its connections and the clients' writes block.

use super::metrics::MempoolMetrics;
use super::tx_chunk::TxChunk;
use batch::TxFrames;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// The positions, counted from 0 over all of `transactions` in order, of those that are
/// invalid, ascending.
pub type CheckTransactions = dyn Fn(&[&[u8]]) -> Vec<u32> + Send + Sync;

/// Most transactions checked in one go: what waits is taken together (a batch check of many
/// signatures costs less per signature than several small ones), up to about a batch.
const MAX_CHECK_TXS: usize = 4_096;

pub struct IngressCheck {
    check: Arc<CheckTransactions>,
    rx_chunks: mpsc::Receiver<TxChunk>,
    tx_batch_maker: mpsc::Sender<TxChunk>,
    metrics: Arc<MempoolMetrics>,
}

impl IngressCheck {
    pub fn spawn(
        check: Arc<CheckTransactions>,
        rx_chunks: mpsc::Receiver<TxChunk>,
        tx_batch_maker: mpsc::Sender<TxChunk>,
        metrics: Arc<MempoolMetrics>,
    ) -> JoinHandle<()> {
        let ingress = IngressCheck {
            check,
            rx_chunks,
            tx_batch_maker,
            metrics,
        };
        tokio::spawn(ingress.run())
    }

    async fn run(mut self) {
        while let Some(first) = self.rx_chunks.recv().await {
            let mut count = first.tx_count();
            let mut chunks = vec![first];
            while count < MAX_CHECK_TXS as u64 {
                match self.rx_chunks.try_recv() {
                    Ok(chunk) => {
                        count += chunk.tx_count();
                        chunks.push(chunk);
                    }
                    Err(_) => break,
                }
            }
            let check = self.check.clone();
            // The check runs the verifier pool, which blocks its caller until it is done.
            let checked = tokio::task::spawn_blocking(move || {
                let invalid = {
                    let txs: Vec<&[u8]> = chunks.iter().flat_map(TxChunk::transactions).collect();
                    check(&txs)
                };
                (chunks, invalid)
            })
            .await;
            let (chunks, mut invalid) = match checked {
                Ok(checked) => checked,
                Err(e) => {
                    // The transactions are lost with the task; their clients' room goes back.
                    warn!("checking {count} client transactions failed: {e}");
                    continue;
                }
            };
            invalid.sort_unstable();
            invalid.dedup();
            invalid.retain(|p| u64::from(*p) < count);
            if !invalid.is_empty() {
                self.dropped(invalid.len() as u64, count);
            }
            for chunk in drop_positions(chunks, &invalid) {
                if self.tx_batch_maker.send(chunk).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Counts what was dropped, and says so now and then: a client that forges steadily would
    /// otherwise fill the log.
    fn dropped(&self, invalid: u64, checked: u64) {
        let before = self
            .metrics
            .ingress_invalid_txs
            .fetch_add(invalid, std::sync::atomic::Ordering::Relaxed);
        let total = before + invalid;
        debug!("dropped {invalid} invalid client transactions of {checked}");
        // Once per doubling of the total: a handful of lines over any run.
        if (before + 1).next_power_of_two() <= total {
            warn!("dropped {total} invalid client transactions so far (malformed or badly signed)");
        }
    }
}

/// The chunks without the transactions at `invalid` (positions over all of their transactions
/// in order, ascending); a chunk left with none is dropped, giving its room back.
fn drop_positions(chunks: Vec<TxChunk>, invalid: &[u32]) -> Vec<TxChunk> {
    if invalid.is_empty() {
        return chunks;
    }
    let mut invalid = invalid.iter().copied().peekable();
    let mut base = 0u32;
    let mut kept = Vec::with_capacity(chunks.len());
    let mut in_run = Vec::new();
    for mut chunk in chunks {
        let runs = std::mem::take(&mut chunk.runs);
        for run in runs {
            let end = base + run.count();
            in_run.clear();
            while let Some(position) = invalid.next_if(|p| *p < end) {
                in_run.push(position - base);
            }
            base = end;
            chunk.runs.extend(TxFrames::without(run, &in_run));
        }
        if !chunk.runs.is_empty() {
            kept.push(chunk);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumbing::clock;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::sync::Semaphore;

    fn chunk(txs: &[&[u8]]) -> TxChunk {
        TxChunk {
            received_ms: 0,
            runs: txs.chunks(2).map(TxFrames::from_transactions).collect(),
            room: None,
        }
    }

    fn txs(chunk: &TxChunk) -> Vec<Vec<u8>> {
        chunk.transactions().map(<[u8]>::to_vec).collect()
    }

    /// A check that calls a transaction invalid when it starts with `x`.
    fn by_first_byte() -> Arc<CheckTransactions> {
        Arc::new(|txs: &[&[u8]]| {
            txs.iter()
                .enumerate()
                .filter(|(_, tx)| tx.first() == Some(&b'x'))
                .map(|(i, _)| i as u32)
                .collect()
        })
    }

    #[test]
    fn positions_over_several_chunks_and_runs_drop_exactly_those_transactions() {
        let chunks = vec![
            chunk(&[b"a", b"x1", b"b"]),
            chunk(&[b"x2", b"x3"]),
            chunk(&[b"c", b"d", b"x4", b"e"]),
        ];
        let kept = drop_positions(chunks, &[1, 3, 4, 7]);
        assert_eq!(kept.len(), 2, "the chunk of forgeries alone is gone");
        assert_eq!(txs(&kept[0]), [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(txs(&kept[1]), [b"c".to_vec(), b"d".to_vec(), b"e".to_vec()]);
        let untouched = drop_positions(vec![chunk(&[b"a", b"b"])], &[]);
        assert_eq!(txs(&untouched[0]), [b"a".to_vec(), b"b".to_vec()]);
    }

    #[tokio::test]
    async fn forwards_the_valid_transactions_in_order_and_counts_the_dropped() {
        let (tx_in, rx_in) = mpsc::channel(8);
        let (tx_out, mut rx_out) = mpsc::channel(8);
        let metrics = Arc::new(MempoolMetrics::default());
        IngressCheck::spawn(by_first_byte(), rx_in, tx_out, metrics.clone());
        tx_in.send(chunk(&[b"a", b"xa", b"b"])).await.expect("send");
        tx_in.send(chunk(&[b"xb"])).await.expect("send");
        tx_in.send(chunk(&[b"c"])).await.expect("send");
        drop(tx_in);
        let mut out = Vec::new();
        while let Some(chunk) = rx_out.recv().await {
            out.extend(txs(&chunk));
        }
        assert_eq!(out, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(metrics.ingress_invalid_txs.load(Ordering::Relaxed), 2);
    }

    /// A chunk keeps its room in the clients' queue while it waits for the check and while it
    /// is checked: a check that is behind leaves no room, so the port stops reading.
    #[tokio::test]
    async fn a_slow_check_holds_the_room_of_what_waits_for_it() {
        let started = Arc::new(AtomicUsize::new(0));
        // Checks wait until the test opens this.
        let open = Arc::new(AtomicBool::new(false));
        let check: Arc<CheckTransactions> = {
            let (started, open) = (started.clone(), open.clone());
            Arc::new(move |_: &[&[u8]]| {
                started.fetch_add(1, Ordering::SeqCst);
                while !open.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Vec::new()
            })
        };
        let room = Arc::new(Semaphore::new(3));
        let (tx_in, rx_in) = mpsc::channel(8);
        let (tx_out, mut rx_out) = mpsc::channel(8);
        IngressCheck::spawn(check, rx_in, tx_out, Arc::new(MempoolMetrics::default()));
        for _ in 0..3 {
            let mut c = chunk(&[b"a"]);
            c.room = Some(room.clone().try_acquire_owned().expect("room"));
            tx_in.send(c).await.expect("send");
        }
        let deadline = Duration::from_secs(10);
        clock::timeout(deadline, async {
            while started.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the check started");
        // Being checked or waiting for it: none of the room is back, nothing went on.
        assert_eq!(room.available_permits(), 0);
        assert!(rx_out.try_recv().is_err());
        open.store(true, Ordering::SeqCst);
        let mut seen = 0;
        while seen < 3 {
            let chunk = clock::timeout(deadline, rx_out.recv())
                .await
                .expect("forwarded")
                .expect("a chunk");
            seen += chunk.tx_count();
        }
        assert_eq!(
            room.available_permits(),
            3,
            "taken by the batch maker: room back"
        );
    }
}
