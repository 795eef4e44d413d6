//! The wiring of the stages below consensus that a mode's [`Pipeline`] keeps (`modes.rs`), shared
//! by a node (fed by consensus) and standalone `movevm` (fed by a generator).
//!
//! ```text
//! input ══► verifier (signatures) | decoder (no signatures) ══► executor (native | Move)
//! input ══► commit sink                                      (no execution: hotstuff)
//! ```

use crate::checkpointing::{Checkpointing, Position};
use crate::execution::ExecutorStage;
use crate::metrics::{ChannelSource, Registry, SampleEvent, SampleLog};
use crate::modes::{Execution, Pipeline, Vm};
use crate::stage::{spawn_stage, StageMetrics};
use crate::verifier::{KnownBatches, Signatures, VerifiedBatch, VerifierStage};
use anyhow::{Context, Result};
use batch::{CommittedBatch, SampleIndex};
use crypto::ParallelVerifier;
use executor::{
    opaque_sample_id, AdapterExecutor, ExecConfig, Executor, FeeCredit, GasParameters, Genesis,
    MoveExecutor, NativeExecutor, Scheme, Workload,
};
use plumbing::metered::{self, MeteredReceiver};
use std::convert::Infallible;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How the Move executor runs batches, from `--exec`, `--exec-threads` (default: one worker per
/// core of the `cores` the process is sized for) and `--fees`. Worker threads are named
/// `executor-N`, so their CPU is the executor stage's, and record it as they end.
pub fn exec_config(
    scheme: Scheme,
    threads: Option<usize>,
    fees: FeeCredit,
    cores: usize,
) -> Result<ExecConfig> {
    if threads.is_some() && scheme == Scheme::Sequential {
        anyhow::bail!("--exec-threads is for --exec waves|blockstm");
    }
    let threads = match threads {
        Some(0) => anyhow::bail!("--exec-threads must be at least 1"),
        Some(threads) => threads,
        None => cores.max(1),
    };
    Ok(ExecConfig {
        scheme,
        threads,
        fees,
        on_thread_exit: Some(crate::metrics::cpu::record_ending_thread),
        ..ExecConfig::default()
    })
}

/// What the stages below consensus need besides their input.
pub struct StageSettings {
    /// The accounts to execute against (modes that execute).
    pub genesis: Option<Genesis>,
    /// Verifier pool size (0: all cores).
    pub verifier_threads: usize,
    pub channel_capacity: usize,
    /// The bound in bytes of the channel between the stages (`Parameters::pipeline_budget_bytes`).
    pub channel_budget_bytes: usize,
    pub max_backlog_per_sender: usize,
    /// Where sample transactions are reported (a node's METRICS line).
    pub samples: Option<Arc<SampleLog>>,
    /// Each batch's samples, noted by the mempool as the batch arrived: the commit sink (no
    /// execution) looks a committed batch up there instead of walking its transactions.
    pub sample_index: Option<SampleIndex>,
    /// Whether the verifier reports the `commit` and `verify` hops of samples (the executor's
    /// `execute`, the end of the end-to-end latency, is reported whenever `samples` is set).
    pub hops: bool,
    /// Test knob: the executor busy-spins this long per transaction, so it becomes the
    /// bottleneck on purpose (and its CPU shows).
    pub executor_delay: Duration,
    /// What runs Move transactions (modes that execute Move).
    pub vm: Vm,
    /// State sync, for the last stage (a node; none in standalone `movevm`).
    pub checkpointing: Option<Checkpointing>,
    /// The workload whose genesis state the Move executor starts from (`--workload`).
    pub workload: Workload,
    /// How the Move executor runs a batch (`--exec`, `--exec-threads`, `--fees`).
    pub execution: ExecConfig,
    /// A node's: the verifier pool its mempool shares (the ingress check, the attester), and
    /// what the node knows of batches without checking them here. `None`: a pool of the
    /// stage's own, and every batch is checked.
    pub known: Option<KnownChecks>,
}

/// What the verifier stage works with in a node.
pub struct KnownChecks {
    pub verifier: Arc<ParallelVerifier>,
    pub batches: Arc<dyn KnownBatches>,
}

impl Pipeline {
    /// Starts the stages that take `input` (named `source` in channel names) and registers their
    /// metrics; returns once every stage is ready, with their threads, which end once `input`
    /// closes and everything before them has drained.
    pub fn spawn_stages(
        &self,
        source: &str,
        input: (
            MeteredReceiver<CommittedBatch>,
            Arc<metered::ChannelMetrics>,
        ),
        settings: StageSettings,
        registry: &mut Registry,
    ) -> Result<Vec<JoinHandle<()>>> {
        let (input, input_metrics) = input;
        let Some(execution) = self.execution else {
            registry.add(ChannelSource {
                name: format!("{source}->sink"),
                metrics: input_metrics,
            });
            return Ok(vec![spawn_commit_sink(
                input,
                settings.samples.map(|log| CommitSamples {
                    log,
                    index: settings.sample_index,
                }),
                settings.checkpointing,
            )?]);
        };
        let genesis = settings
            .genesis
            .context("a mode that executes needs a genesis")?;
        let (check, name) = if self.signatures {
            let check = match settings.known {
                Some(KnownChecks { verifier, batches }) => {
                    Signatures::CheckUnknown(verifier, batches)
                }
                None => Signatures::Check(Arc::new(
                    ParallelVerifier::new(settings.verifier_threads)
                        .context("starting the verifier pool")?,
                )),
            };
            (check, "verifier")
        } else {
            (Signatures::Skip, "decoder")
        };
        let (tx_checked, rx_checked, checked_metrics) = metered::channel_within(
            settings.channel_capacity,
            settings.channel_budget_bytes,
            |verified: &VerifiedBatch| verified.position.bytes as usize,
        );
        let executor_metrics = Arc::new(StageMetrics::new("executor"));
        let samples = settings.samples;
        let workload = settings.workload;
        let exec = settings.execution;
        let checker_samples = if settings.hops { samples.clone() } else { None };
        let stage = ExecutorStageSpec {
            genesis,
            input: rx_checked,
            metrics: executor_metrics.clone(),
            max_backlog_per_sender: settings.max_backlog_per_sender,
            samples,
            delay: settings.executor_delay,
            checkpointing: settings.checkpointing,
        };
        let executor = match (execution, settings.vm) {
            (Execution::Move, Vm::Adapter) => stage.spawn(move |genesis| {
                let gas = GasParameters::default();
                AdapterExecutor::from_genesis_for(genesis, gas, workload)
                    .and_then(|vm| vm.with_execution(exec))
                    .context("starting the Move adapter")
            }),
            (Execution::Move, Vm::Bare) => stage.spawn(move |genesis| {
                MoveExecutor::from_genesis_for(genesis, workload)
                    .and_then(|vm| vm.with_execution(exec))
                    .context("starting the Move executor")
            }),
            (Execution::Native, _) => stage.spawn(|genesis| {
                NativeExecutor::from_genesis(genesis).context("starting the native executor")
            }),
        }
        .context("starting the executor stage")?;
        let checker_metrics = Arc::new(StageMetrics::new(name));
        let checker = spawn_stage(
            move || Ok(VerifierStage::new(check, checker_samples)),
            input,
            Some(tx_checked),
            checker_metrics.clone(),
        )
        .with_context(|| format!("starting the {name} stage"))?;
        registry.add(ChannelSource {
            name: format!("{source}->{name}"),
            metrics: input_metrics,
        });
        registry.add(checker_metrics);
        registry.add(ChannelSource {
            name: format!("{name}->executor"),
            metrics: checked_metrics,
        });
        registry.add(executor_metrics);
        Ok(vec![checker, executor])
    }
}

/// The executor stage as every VM gets it: where it reads from, what it reports to, and the
/// settings its [`ExecutorStage`] is built with.
struct ExecutorStageSpec {
    genesis: Genesis,
    input: MeteredReceiver<VerifiedBatch>,
    metrics: Arc<StageMetrics>,
    max_backlog_per_sender: usize,
    samples: Option<Arc<SampleLog>>,
    delay: Duration,
    checkpointing: Option<Checkpointing>,
}

impl ExecutorStageSpec {
    /// Starts the stage's thread, which builds its executor there with `start` (from the
    /// genesis); returns once the stage is ready.
    fn spawn<E, F>(self, start: F) -> Result<JoinHandle<()>>
    where
        E: Executor,
        F: FnOnce(&Genesis) -> Result<E> + Send + 'static,
    {
        spawn_stage(
            move || {
                let executor = start(&self.genesis)?;
                Ok(ExecutorStage::new(
                    executor,
                    &self.genesis,
                    self.max_backlog_per_sender,
                    self.samples,
                )
                .with_delay(self.delay)
                .with_checkpointing(self.checkpointing))
            },
            self.input,
            None,
            self.metrics,
        )
    }
}

/// Where the commit sink reports the `commit` hop of samples, and where it finds them.
struct CommitSamples {
    log: Arc<SampleLog>,
    index: Option<SampleIndex>,
}

impl CommitSamples {
    /// Reports the samples of `committed`: noted in the index when the batch arrived, or (a
    /// batch the index does not know, e.g. stored before a restart) found by walking it.
    fn report(&self, committed: &CommittedBatch) {
        let t_ms = committed.committed_at_ms;
        let push = |id: String| {
            self.log.push(SampleEvent {
                id,
                event: "commit",
                t_ms,
            })
        };
        let noted = self
            .index
            .as_ref()
            .and_then(|index| index.take(&committed.batch.digest()));
        match noted {
            Some(ids) => ids.into_iter().for_each(push),
            // Borrowed slices: a `Bytes` per transaction would cost two atomic reference
            // count updates on a count the consensus threads update too.
            None => committed
                .batch
                .tx_slices()
                .filter_map(opaque_sample_id)
                .for_each(|id| push(id.to_string())),
        }
    }
}

/// The end of the pipeline in `hotstuff` mode: transactions are opaque, so committed batches are
/// only looked at for sample transactions (format in `executor::opaque`). There is no state, but
/// consensus still checkpoints (empty states at the policy's blocks), so a restarted node can
/// adopt a root past what its peers have deleted.
fn spawn_commit_sink(
    mut input: MeteredReceiver<CommittedBatch>,
    samples: Option<CommitSamples>,
    mut checkpointing: Option<Checkpointing>,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sink".into())
        .spawn(move || {
            while let Some(committed) = input.blocking_recv() {
                if let Some(checkpointing) = &mut checkpointing {
                    let position = Position::of(&committed);
                    // Nothing to restore but the position.
                    let _ = checkpointing.pending_restore();
                    if checkpointing.skips(&position) {
                        continue;
                    }
                    checkpointing.applied(&position, || Ok::<_, Infallible>(Vec::new()));
                }
                if let Some(samples) = &samples {
                    samples.report(&committed);
                }
            }
        })
        .context("starting the commit sink")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A committed batch of three opaque transactions, the second a sample with id 42.
    fn committed_with_a_sample() -> CommittedBatch {
        let mut builder = batch::BatchBuilder::with_capacity(1_000);
        for (id, sample) in [(1, false), (42, true), (3, false)] {
            builder.push(&executor::opaque_transaction(100, id, sample));
        }
        CommittedBatch {
            round: 1,
            block: crypto::Digest::default(),
            last_of_block: true,
            batch: builder.seal(5, 0),
            committed_at_ms: 9,
        }
    }

    #[test]
    fn the_sink_reports_the_samples_noted_as_the_batch_arrived() {
        let committed = committed_with_a_sample();
        let index = SampleIndex::default();
        // What the mempool noted is what is reported: the batch is not walked again.
        index.note(committed.batch.digest(), vec!["noted".into()]);
        let samples = CommitSamples {
            log: Arc::new(SampleLog::default()),
            index: Some(index.clone()),
        };
        samples.report(&committed);
        let ids: Vec<String> = samples.log.drain().into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["noted"]);
        assert!(index.is_empty());
    }

    #[test]
    fn the_sink_walks_a_batch_nobody_noted() {
        let committed = committed_with_a_sample();
        for index in [None, Some(SampleIndex::default())] {
            let samples = CommitSamples {
                log: Arc::new(SampleLog::default()),
                index,
            };
            samples.report(&committed);
            let events = samples.log.drain();
            assert_eq!(
                events,
                [SampleEvent {
                    id: "42".into(),
                    event: "commit",
                    t_ms: 9
                }]
            );
        }
    }
}
