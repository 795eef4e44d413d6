//! The executor stage: one thread that sequences verified transactions by sender nonce and runs
//! them (native transfers or the Move VM), reporting what ran and a digest of the state.

use crate::metrics::{now_ms, SampleEvent, SampleLog};
use crate::stage::StageMetrics;
use crate::verifier::VerifiedBatch;
use consensus::metered::MeteredReceiver;
use executor::{Address, Completed, DropReason, Executor, Genesis, Ledger};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::error::TryRecvError;
use tracing::{error, info};

/// How often, at most, the state digest (and total supply) is recomputed. Both walk every
/// account, which at 10,000 accounts costs milliseconds: done after every batch, it took more CPU
/// than the transactions themselves, and on a machine shared with the verifiers that CPU is
/// throughput. Once input stops, the final state is published within this interval.
const DIGEST_INTERVAL: Duration = Duration::from_millis(500);

pub struct ExecutorStage<E> {
    rx: MeteredReceiver<VerifiedBatch>,
    ledger: Ledger<E>,
    /// Every account, to add up the supply (which transfers must conserve).
    accounts: Vec<Address>,
    metrics: Arc<StageMetrics>,
    samples: Arc<SampleLog>,
}

impl<E: Executor + 'static> ExecutorStage<E> {
    /// Builds the executor and its ledger from `genesis` on the stage's own thread (the Move
    /// VM stays on the thread that uses it) and returns once it is ready, or with the error that
    /// stopped it.
    pub fn spawn<F>(
        rx: MeteredReceiver<VerifiedBatch>,
        genesis: Genesis,
        max_backlog_per_sender: usize,
        make_executor: F,
        metrics: Arc<StageMetrics>,
        samples: Arc<SampleLog>,
    ) -> anyhow::Result<JoinHandle<()>>
    where
        F: FnOnce(&Genesis) -> anyhow::Result<E> + Send + 'static,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("executor".into())
            .spawn(move || {
                let executor = match make_executor(&genesis) {
                    Ok(executor) => {
                        let _ = ready_tx.send(Ok(()));
                        executor
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let stage = ExecutorStage {
                    rx,
                    ledger: Ledger::from_genesis(executor, &genesis, max_backlog_per_sender),
                    accounts: genesis.accounts.iter().map(|a| a.address()).collect(),
                    metrics,
                    samples,
                };
                stage.run();
            })?;
        ready_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the executor thread died while starting"))??;
        Ok(handle)
    }

    fn run(mut self) {
        // A timer to publish the final state once input pauses; the stage has no other async work.
        let timer = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(timer) => timer,
            Err(e) => {
                error!("executor stage cannot start its timer: {e}");
                return;
            }
        };
        let mut done: Vec<Completed> = Vec::new();
        self.publish_state();
        let mut last_digest = Instant::now();
        // Whether something ran since the digest was last published.
        let mut stale = false;
        loop {
            let batch = match self.rx.try_recv() {
                Ok(batch) => batch,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) if !stale => match self.rx.blocking_recv() {
                    Some(batch) => batch,
                    None => break,
                },
                Err(TryRecvError::Empty) => {
                    let due = DIGEST_INTERVAL.saturating_sub(last_digest.elapsed());
                    // Built inside `block_on`: a timer needs the runtime's context.
                    let next =
                        timer.block_on(async { tokio::time::timeout(due, self.rx.recv()).await });
                    match next {
                        Ok(Some(batch)) => batch,
                        Ok(None) => break,
                        Err(_elapsed) => {
                            self.publish_state();
                            last_digest = Instant::now();
                            stale = false;
                            continue;
                        }
                    }
                }
            };
            let start = Instant::now();
            let items = batch.txs.len() as u64;
            for tx in batch.txs {
                // Drops are counted by the ledger; nothing else to do with them here.
                let _: Result<(), DropReason> = self.ledger.apply_into(tx, &mut done);
            }
            let t_ms = now_ms();
            for completed in done.drain(..) {
                if completed.is_sample() {
                    self.samples.push(SampleEvent {
                        id: completed.sample_id(),
                        event: "execute",
                        t_ms,
                    });
                }
            }
            stale = true;
            if last_digest.elapsed() >= DIGEST_INTERVAL {
                self.publish_state();
                last_digest = Instant::now();
                stale = false;
            } else {
                self.publish_counters();
            }
            self.metrics.record_batch(items, start.elapsed());
        }
        self.publish_state();
        info!("executor stage stopped");
    }

    fn publish_counters(&self) {
        let stats = self.ledger.stats();
        self.metrics
            .executed
            .store(stats.executed, Ordering::Relaxed);
        self.metrics.failed.store(stats.failed, Ordering::Relaxed);
        self.metrics
            .dropped
            .store(stats.dropped.total(), Ordering::Relaxed);
        self.metrics.backlog.store(stats.backlog, Ordering::Relaxed);
    }

    fn publish_state(&self) {
        self.publish_counters();
        let stats = self.ledger.stats();
        let by_reason: Map<String, Value> = DropReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), json!(stats.dropped.get(*r))))
            .collect();
        self.metrics
            .set_extra("dropped_by_reason", Value::Object(by_reason));
        self.metrics.set_extra(
            "state_digest",
            json!(format!("{:?}", self.ledger.state_digest())),
        );
        // The digest and the count it belongs to, published together.
        self.metrics
            .set_extra("state_executed", json!(stats.executed + stats.failed));
        let supply: u128 = self
            .accounts
            .iter()
            .filter_map(|a| self.ledger.balance(a))
            .map(u128::from)
            .sum();
        self.metrics
            .set_extra("total_supply", json!(supply.to_string()));
    }
}
