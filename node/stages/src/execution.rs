//! The executor stage: one thread that sequences verified transactions by sender nonce and runs
//! them (native transfers or the Move VM), a committed batch at a time, reporting what ran and a
//! digest of the state.

use crate::checkpointing::Checkpointing;
use crate::metrics::{now_ms, SampleEvent, SampleLog, Value};
use crate::stage::{Stage, StageMetrics};
use crate::verifier::VerifiedBatch;
use checkpoint::Checkpoint;
use executor::{Address, Completed, DropReason, Executor, Genesis, Ledger};
use plumbing::clock;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info};

/// How often, at most, the state digest (and total supply) is recomputed. Both walk every
/// account, which at 10,000 accounts costs milliseconds: done after every batch, it took more CPU
/// than the transactions themselves, and on a machine shared with the verifiers that CPU is
/// throughput. Once input stops, the final state is published within this interval.
const DIGEST_INTERVAL: Duration = Duration::from_millis(500);

pub struct ExecutorStage<E> {
    ledger: Ledger<E>,
    /// Every account, to add up the supply (which transfers must conserve).
    accounts: Vec<Address>,
    /// Where executed sample transactions are reported (none in standalone `movevm`).
    samples: Option<Arc<SampleLog>>,
    done: Vec<Completed>,
    /// Busy-spun per transaction (the `--executor-delay-us` test knob); zero in real runs.
    delay: Duration,
    /// Checkpoints for state sync (a node's executor; none in standalone `movevm`).
    checkpointing: Option<Checkpointing>,
    restore_failures: u64,
}

impl<E: Executor> ExecutorStage<E> {
    pub fn new(
        executor: E,
        genesis: &Genesis,
        max_backlog_per_sender: usize,
        samples: Option<Arc<SampleLog>>,
    ) -> Self {
        ExecutorStage {
            ledger: Ledger::from_genesis(executor, genesis, max_backlog_per_sender),
            accounts: genesis.accounts.iter().map(|a| a.address()).collect(),
            samples,
            done: Vec::new(),
            delay: Duration::ZERO,
            checkpointing: None,
            restore_failures: 0,
        }
    }

    /// Takes part in state sync: checkpoints the state, and restores an adopted checkpoint.
    pub fn with_checkpointing(mut self, checkpointing: Option<Checkpointing>) -> Self {
        self.checkpointing = checkpointing;
        self
    }

    /// Replaces the state with a checkpoint's that consensus adopted from peers. The executed
    /// count comes with it, so this node's counts (and the audit's heights) line up with the
    /// peers' from here on.
    fn restore(&mut self, checkpoint: &Checkpoint, metrics: &StageMetrics) {
        match self.ledger.restore(&checkpoint.state) {
            Ok(()) => {
                let stats = self.ledger.stats();
                let height = stats.executed + stats.failed;
                info!(
                    "restored the state after round {} from a checkpoint ({} bytes): {height} \
                     transactions executed by then",
                    checkpoint.round,
                    checkpoint.state.len()
                );
                metrics.set("restored_round", Value::Gauge(checkpoint.round as f64));
                metrics.set("restored_height", Value::Gauge(height as f64));
                self.publish_counters(metrics);
            }
            // f+1 members reported these bytes, so at least one honest member made them: a
            // failure means this node's genesis or version differs from theirs. The state is
            // left as it was, and the audit's digest check will show the divergence.
            Err(e) => {
                error!(
                    "cannot restore the checkpoint of round {}: {e}",
                    checkpoint.round
                );
                self.restore_failures += 1;
                metrics.set(
                    "restore_failures",
                    Value::Counter(self.restore_failures as f64),
                );
            }
        }
    }

    /// Makes every transaction cost `delay` of CPU more: a spin, not a sleep, so the stage is
    /// slow the way a costly executor is (it holds a core).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    fn publish_counters(&self, metrics: &StageMetrics) {
        let stats = self.ledger.stats();
        metrics.executed.store(stats.executed, Ordering::Relaxed);
        metrics.failed.store(stats.failed, Ordering::Relaxed);
        metrics
            .dropped
            .store(stats.dropped.total(), Ordering::Relaxed);
        metrics.backlog.store(stats.backlog, Ordering::Relaxed);
    }
}

impl<E: Executor> Stage for ExecutorStage<E> {
    type Input = VerifiedBatch;
    type Output = ();

    fn process(&mut self, batch: VerifiedBatch, metrics: &StageMetrics) -> Option<()> {
        let restore = self
            .checkpointing
            .as_mut()
            .and_then(Checkpointing::pending_restore);
        if let Some(checkpoint) = restore {
            self.restore(&checkpoint, metrics);
        }
        if let Some(checkpointing) = &self.checkpointing {
            if checkpointing.skips(&batch.position) {
                return None;
            }
        }
        if !self.delay.is_zero() {
            for _ in &batch.txs {
                spin(self.delay);
            }
        }
        // The whole batch at once: the executor may run it in parallel (`--exec`).
        self.ledger.execute_block(batch.txs, &mut self.done);
        let t_ms = now_ms();
        for completed in self.done.drain(..) {
            if let (true, Some(samples)) = (completed.is_sample(), &self.samples) {
                samples.push(SampleEvent {
                    id: completed.sample_id(),
                    event: "execute",
                    t_ms,
                });
            }
        }
        self.publish_counters(metrics);
        if let Some(checkpointing) = &mut self.checkpointing {
            let ledger = &self.ledger;
            checkpointing.applied(&batch.position, || ledger.snapshot());
        }
        None
    }

    fn tick_interval(&self) -> Option<Duration> {
        Some(DIGEST_INTERVAL)
    }

    /// Publishes the state digest, the count it belongs to, the supply and drops by reason.
    fn tick(&mut self, metrics: &StageMetrics) {
        self.publish_counters(metrics);
        let stats = self.ledger.stats();
        let by_reason = DropReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), stats.dropped.get(*r) as f64))
            .collect();
        metrics.set(
            "dropped_by_reason",
            Value::Counts {
                label: "reason",
                counts: by_reason,
            },
        );
        metrics.set(
            "state_digest",
            Value::Text(format!("{:?}", self.ledger.state_digest())),
        );
        // The digest and the count it belongs to, published together.
        metrics.set(
            "state_executed",
            Value::Gauge((stats.executed + stats.failed) as f64),
        );
        let failed_by_reason = self
            .ledger
            .failed_by_reason()
            .iter()
            .map(|(reason, count)| (reason.clone(), *count as f64))
            .collect();
        metrics.set(
            "failed_by_reason",
            Value::Counts {
                label: "reason",
                counts: failed_by_reason,
            },
        );
        // The money in the system: every account's balance, plus the fees the adapter collected
        // (zero under the bare VM), plus what SmallBank accounts hold (zero under the other
        // workloads), which no transaction may change.
        let fees = self.ledger.executor().fees_collected();
        let bank = self.ledger.executor().bank_holdings();
        let supply: u128 = self
            .accounts
            .iter()
            .filter_map(|a| self.ledger.balance(a))
            .map(u128::from)
            .sum::<u128>()
            + u128::from(fees)
            + bank;
        // Text: a u128 does not fit a JSON number the harness could read exactly.
        metrics.set("total_supply", Value::Text(supply.to_string()));
        metrics.set("fees_collected", Value::Text(fees.to_string()));
        metrics.set("bank_holdings", Value::Text(bank.to_string()));
        metrics.set(
            "gas_used",
            Value::Counter(self.ledger.executor().gas_used() as f64),
        );
        // What a parallel scheme (`--exec`) did; zero under sequential execution.
        let blocks = self.ledger.executor().block_stats();
        metrics.set("exec_threads", Value::Gauge(blocks.threads as f64));
        for (field, count) in [
            ("reexecutions", blocks.reexecutions),
            ("validation_aborts", blocks.validation_aborts),
            ("dependency_waits", blocks.dependency_waits),
            ("sequential_fallbacks", blocks.sequential_fallbacks),
            ("contended_blocks", blocks.contended_blocks),
            ("waves", blocks.waves),
        ] {
            metrics.set(field, Value::Counter(count as f64));
        }
    }
}

/// Burns `delay` of CPU on this thread.
fn spin(delay: Duration) {
    let start = clock::Instant::now();
    while start.elapsed() < delay {
        std::hint::spin_loop();
    }
}
