//! `node run`: the composition root of a replica. It starts the mempool and the consensus core
//! side by side, the stages its mode keeps below them, the METRICS line and the optional
//! Prometheus endpoint, and ends the process on SIGINT/SIGTERM after a final line.

use crate::attesting::{Misbehave, Verify};
use crate::consensus_source::ConsensusSource;
use crate::ingress::OwnBatches;
use anyhow::{Context, Result};
use batch::{CommittedBatch, SampleIndex};
use checkpoint::StateSyncLink;
use clap::Args;
use config::read_json;
use config::{Committee, Parameters};
use crypto::{KeyPair, ParallelVerifier};
use executor::{FeeCredit, Genesis, Scheme, Workload};
use hotstuff::{Consensus, MempoolLink, MissingRecord};
use mempool::{Mempool, MempoolMetrics, ReportHop, SampleHooks};
use network::{EmulationSpec, NetEmulation};
use plumbing::clock;
use plumbing::metered;
use stages::checkpointing::Checkpointing;
use stages::dilation::DilationArgs;
use stages::flags::{one_of, FlagRule, Needs};
use stages::metrics::cpu::CONSENSUS_THREADS;
use stages::metrics::{
    serve_prometheus, ProcessSource, QueueSource, Registry, SampleEvent, SampleLog,
};
use stages::modes::{Mode, Vm};
use stages::pipeline::{exec_config, KnownChecks, StageSettings};
use stages::profile::Profiler;
use stages::verifier::KnownBatches;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tracing::info;

/// The exit code of a node that stopped on a safety violation.
pub const SAFETY_EXIT: i32 = 3;

/// At the stop, how long the clients' connections may take to deliver what their clients wrote
/// and never saw read (a client whose node applied back-pressure). The harness stops the
/// clients first, so their data and end of stream are on the way, and gives a node its grace
/// (5 s) to print its final line.
const CLIENT_DRAIN: Duration = Duration::from_millis(1_500);

/// The arguments of `node run`.
#[derive(Args, Clone, Debug)]
pub struct RunArgs {
    /// This node's key file.
    #[arg(long)]
    pub keys: PathBuf,
    /// The committee file.
    #[arg(long)]
    pub committee: PathBuf,
    /// The parameters file (every field optional).
    #[arg(long)]
    pub parameters: Option<PathBuf>,
    /// The genesis accounts file (modes that execute).
    #[arg(long)]
    pub genesis: Option<PathBuf>,
    #[arg(long, value_enum)]
    pub mode: Mode,
    /// What runs Move transactions (`hotmove`): the bare VM or the VM behind Diem's adapter.
    #[arg(long, value_enum, default_value_t = Vm::Bare)]
    pub vm: Vm,
    /// The workload the clients send (`hotmove`): transfer, donothing, cpuheavy, kvstore or
    /// smallbank. The node publishes every workload's module; it needs the workload for its
    /// genesis state (smallbank opens every account's bank).
    #[arg(long, default_value_t = Workload::Transfer, value_parser = one_of(&Workload::ALL, Workload::as_str))]
    pub workload: Workload,
    /// How the executor runs a committed batch (`hotmove`): `sequential` (one transaction after
    /// another), `waves` (levels of transactions whose declared reads and writes do not
    /// conflict, on a pool) or `blockstm` (Block-STM: optimistic execution on a pool, validated
    /// and re-executed). The state after each batch is the same.
    #[arg(long, default_value_t = Scheme::Sequential, value_parser = one_of(&Scheme::ALL, Scheme::as_str))]
    pub exec: Scheme,
    /// Worker threads of `--exec waves|blockstm`, each with its own VM (default: one per
    /// core, `--cores`).
    #[arg(long)]
    pub exec_threads: Option<usize>,
    /// When the adapter's fees reach the fee account (`hotmove --vm adapter`): `block` (each
    /// transaction pays its fee out of its coin, the batch's fees are credited together after
    /// it; the state after the batch is the same) or `per-tx` (each transaction credits the one
    /// fee account, a hotspot no two transactions can run in parallel around).
    #[arg(long, default_value_t = FeeCredit::Block, value_parser = one_of(&FeeCredit::ALL, FeeCredit::as_str))]
    pub fees: FeeCredit,
    /// Signature-verifier threads (default: one per core, `--cores`).
    #[arg(long)]
    pub verifier_threads: Option<usize>,
    /// Worker threads of the runtime that runs consensus, the mempool and the network (default:
    /// one per core, `--cores`): with `--verifier-threads` and `--exec-threads`, how a node's
    /// cores are split.
    #[arg(long)]
    pub consensus_threads: Option<usize>,
    /// Size the node as on a machine of N cores: the default of `--consensus-threads`,
    /// `--verifier-threads` and `--exec-threads`, and the cores its METRICS report (default:
    /// the cores this process may use). A dilated run's nodes are sized to their virtual CPUs.
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    #[command(flatten)]
    pub dilation: DilationArgs,
    /// Who checks the signatures of a committed batch (modes with signatures): `all` (every
    /// node checks every signature, the report's model) or `attested` (each batch is checked
    /// by its author and members named by its place in the author's sequence, f+1 stake in
    /// all, who sign what they found; a node holding f+1 matching statements checks no
    /// signature of the batch).
    #[arg(long, value_enum, default_value_t = Verify::All)]
    pub verify: Verify,
    /// Test knob, a Byzantine member under `--verify attested`: `silent-attester` checks and
    /// states nothing, `lying-attester` states wrong positions (and executes what is true),
    /// `statement-flood` states nothing true and floods its peers with the largest statements
    /// for batches that do not exist.
    #[arg(long, value_enum, hide = true)]
    pub misbehave: Option<Misbehave>,
    /// Serve Prometheus metrics on this address (`GET /metrics`).
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<SocketAddr>,
    /// Sample the whole process with a profiler; at exit write DIR/flamegraph.svg and
    /// DIR/profile.folded.
    #[arg(long, value_name = "DIR")]
    pub profile: Option<PathBuf>,
    /// Keep blocks, batches and the safety state (last voted round, high QC) in a durable store
    /// at PATH (one file, created if absent) instead of memory. A node restarted on its store
    /// never votes twice in a round. A store without a vote record (a new one, or memory) makes
    /// the node ask the other members what its key signed before it signs anything, and stop if
    /// they hold its signatures (see --risk-equivocation-without-vote-record).
    #[arg(long, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Start even if the store holds no vote record (a new --store path, or none) while other
    /// members hold signatures of this node's key: it then votes, times out and proposes only
    /// above the rounds they show and their highest certificate, but may repeat an act that only
    /// Byzantine members saw (an equivocation). Without it such a node stops with an error.
    #[arg(long)]
    pub risk_equivocation_without_vote_record: bool,
    /// Emulate the network on the committee's links: per-link latency and partition windows
    /// (JSON; see `network::emulation`). Client connections are not affected.
    #[arg(long, value_name = "FILE")]
    pub net_emulation: Option<PathBuf>,
    /// Test knob: the executor busy-spins this many microseconds per transaction.
    #[arg(long, default_value_t = 0, hide = true)]
    pub executor_delay_us: u64,
    /// Test knob, to measure what instrumentation costs: no CPU time per stage (the threads of
    /// /proc/self/task are not read) and no hop timestamps of samples (receive, seal, quorum,
    /// commit, verify); the `execute` event, which ends the end-to-end latency, stays.
    #[arg(long, hide = true)]
    pub no_instrumentation: bool,
}

/// The flags of `node run` that only some modes take, or only within bounds (the others apply
/// to every mode): `stages::flags` checks a command line against them and `node describe`
/// prints them per mode.
pub const RULES: &[FlagRule] = &[
    FlagRule::new("vm", Needs::Move),
    FlagRule::new("workload", Needs::Move),
    FlagRule::new("exec", Needs::Move),
    FlagRule::new("exec-threads", Needs::Move)
        .with("exec", &["waves", "blockstm"])
        .at_least(1.0),
    FlagRule::new("fees", Needs::Move).with("vm", &["adapter"]),
    FlagRule::new("verifier-threads", Needs::Signatures).at_least(1.0),
    FlagRule::new("consensus-threads", Needs::Consensus).at_least(1.0),
    FlagRule::new("cores", Needs::Consensus).at_least(1.0),
    FlagRule::new("verify", Needs::Signatures),
    FlagRule::new("misbehave", Needs::Signatures).with("verify", &["attested"]),
    FlagRule::new("genesis", Needs::Execution),
    FlagRule::new("executor-delay-us", Needs::Execution).at_least(0.0),
];

/// The run arguments with the files they name read and checked.
pub struct NodeConfig {
    pub args: RunArgs,
    pub keys: KeyPair,
    pub committee: Committee,
    pub parameters: Parameters,
    /// Present exactly for the modes that execute.
    pub genesis: Option<Genesis>,
    /// The checked `--net-emulation` file.
    pub emulation: Option<EmulationSpec>,
}

impl NodeConfig {
    pub fn load(args: RunArgs) -> Result<Self> {
        let pipeline = args.mode.pipeline();
        if !pipeline.consensus {
            anyhow::bail!(
                "--mode {} runs without consensus: use `client --mode {}`",
                args.mode.as_str(),
                args.mode.as_str()
            );
        }
        let keys: KeyPair = read_json(&args.keys)?;
        let committee = Committee::load(&args.committee)?;
        let parameters = match &args.parameters {
            Some(path) => Parameters::load(path)?,
            None => Parameters::default(),
        };
        if committee.authority(&keys.name).is_none() {
            anyhow::bail!("key {} is not in the committee", keys.name.to_hex());
        }
        // What each flag needs of the mode was checked against `RULES` on the command line.
        exec_config(args.exec, args.exec_threads, args.fees, args.cores())?;
        let genesis = match (pipeline.execution, &args.genesis) {
            (None, _) => None,
            (Some(_), None) => anyhow::bail!("--mode {} needs --genesis", args.mode.as_str()),
            (Some(_), Some(path)) => Some(Genesis::load(path)?),
        };
        let emulation = args
            .net_emulation
            .as_deref()
            .map(|path| EmulationSpec::load(path, &committee))
            .transpose()?;
        Ok(NodeConfig {
            args,
            keys,
            committee,
            parameters,
            genesis,
            emulation,
        })
    }
}

impl RunArgs {
    /// The cores the node is sized for: `--cores`, or those this process may use.
    pub fn cores(&self) -> usize {
        self.cores
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

pub fn run(config: NodeConfig) -> Result<()> {
    // Before anything reads the clock (the runtime's timers among them).
    config.args.dilation.apply()?;
    let cores = config.args.cores();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.args.consensus_threads.unwrap_or(cores))
        .enable_all()
        .thread_name(CONSENSUS_THREADS)
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run_async(config))
}

async fn run_async(config: NodeConfig) -> Result<()> {
    let NodeConfig {
        args,
        keys,
        committee,
        parameters,
        genesis,
        emulation,
    } = config;
    // First, so the profile covers the start too.
    let profiler = args.profile.as_deref().map(Profiler::start).transpose()?;
    let name = keys.name;
    let capacity = parameters.channel_capacity;
    let store = match &args.store {
        Some(path) => {
            Store::open(path).with_context(|| format!("opening --store {}", path.display()))?
        }
        None => Store::new(),
    };
    let emulation = match emulation {
        Some(spec) => {
            info!("network emulation on the committee's links");
            // Links of a millisecond or two need sleeps finer than tokio's 1 ms timer.
            plumbing::precise_sleep::enable().context("starting the precise timer thread")?;
            Some(NetEmulation::start(&spec, &name, &committee))
        }
        None => None,
    };

    // Mempool and consensus, side by side: batch digests go up, sync requests come down.
    let (tx_digests, rx_digests) = mpsc::channel(capacity);
    let (tx_mempool, rx_mempool) = mpsc::channel(capacity);
    let mempool = Arc::new(MempoolMetrics::default());
    let samples = Arc::new(SampleLog::default());
    let instrumented = !args.no_instrumentation;
    // Without execution, the commit sink reports the last hop of samples (the end of the
    // end-to-end latency, kept without instrumentation too): the mempool notes each batch's
    // while it is in cache, so the sink need not walk every committed transaction.
    let sample_index = args
        .mode
        .pipeline()
        .execution
        .is_none()
        .then(SampleIndex::default);
    let sample_hooks = args
        .mode
        .sample_detector()
        .filter(|_| instrumented || sample_index.is_some())
        .map(|detect| {
            let log = samples.clone();
            let report: Arc<ReportHop> = if instrumented {
                Arc::new(move |id, event, t_ms| log.push(SampleEvent { id, event, t_ms }))
            } else {
                Arc::new(|_, _, _| {})
            };
            SampleHooks {
                detect: Arc::new(detect),
                report,
                index: sample_index.clone(),
            }
        });
    let cores = args.cores();
    let verifier_threads = args.verifier_threads.unwrap_or(cores);
    // Signed transactions: one verifier pool for the ingress check, the attester and the
    // verifier stage.
    let verifier = args
        .mode
        .pipeline()
        .signatures
        .then(|| ParallelVerifier::new(verifier_threads).map(Arc::new))
        .transpose()
        .context("starting the verifier pool")?;
    let ingress = verifier.as_deref().map(crate::ingress::ingress);
    let checked = ingress.as_ref().map(|ingress| ingress.checked.clone());
    let (attesting, known) = match (&verifier, checked) {
        (Some(verifier), Some(checked)) => {
            let (attesting, batches) = match args.verify {
                Verify::All => (None, Arc::new(OwnBatches(checked)) as Arc<dyn KnownBatches>),
                Verify::Attested => {
                    let (attesting, batches) = crate::attesting::attesting(
                        args.misbehave,
                        name,
                        &committee,
                        &parameters,
                        verifier.clone(),
                        checked,
                    );
                    (Some(attesting), batches)
                }
            };
            let known = KnownChecks {
                verifier: verifier.clone(),
                batches,
            };
            (attesting, Some(known))
        }
        _ => (None, None),
    };
    let mempool_handle = Mempool::spawn(
        name,
        keys.secret.clone(),
        committee.clone(),
        parameters.clone(),
        store.clone(),
        rx_mempool,
        tx_digests,
        mempool.clone(),
        sample_hooks,
        emulation.clone(),
        attesting,
        ingress,
    )
    .await
    .context("starting the mempool")?;
    // Committed batches vary from a few bytes to `batch_size`: bounded in bytes too.
    let (tx_output, rx_output, output_metrics) = metered::channel_within(
        capacity,
        parameters.pipeline_budget_bytes(),
        |committed: &CommittedBatch| committed.batch.bytes().len(),
    );
    // State sync: the last stage checkpoints and restores, consensus serves and adopts.
    let (state_sync, rx_restore) = StateSyncLink::new(&store);
    let checkpointing = Checkpointing::new(&state_sync, rx_restore, parameters.checkpoint_rounds);
    let consensus = Consensus::spawn(
        name,
        keys.secret,
        committee,
        parameters.clone(),
        store,
        MempoolLink {
            rx_digests,
            tx_mempool,
            quota: mempool_handle.quota.clone(),
        },
        tx_output,
        state_sync,
        emulation,
        if args.risk_equivocation_without_vote_record {
            MissingRecord::RiskEquivocation
        } else {
            MissingRecord::Refuse
        },
    )
    .await
    .context("starting consensus")?;

    let mut fatal = consensus.fatal;
    let mut registry = Registry::new("node", &name.to_string(), args.mode.as_str());
    registry.add(ConsensusSource {
        consensus: consensus.metrics,
        mempool,
    });
    let clients = mempool_handle.clients;
    for queue in consensus.queues.into_iter().chain(mempool_handle.queues) {
        registry.add(QueueSource(queue));
    }
    registry.add(samples.clone());
    args.mode
        .pipeline()
        .spawn_stages(
            "consensus",
            (rx_output, output_metrics),
            StageSettings {
                genesis,
                verifier_threads,
                channel_capacity: capacity,
                channel_budget_bytes: parameters.pipeline_budget_bytes(),
                max_backlog_per_sender: parameters.max_backlog_per_sender,
                samples: Some(samples),
                sample_index,
                hops: instrumented,
                executor_delay: Duration::from_micros(args.executor_delay_us),
                vm: args.vm,
                checkpointing: Some(checkpointing),
                workload: args.workload,
                execution: exec_config(args.exec, args.exec_threads, args.fees, cores)?,
                known,
            },
            &mut registry,
        )
        .context("starting the stages")?;
    registry.add(
        ProcessSource::new(args.mode.pipeline().stage_names(), true)
            .with_cores(cores)
            .with_store(args.store.is_some())
            .per_thread(instrumented),
    );
    let registry = Arc::new(registry);
    if let Some(address) = args.prometheus {
        serve_prometheus(address, registry.clone())?;
    }
    info!(
        "node {} running in {} mode ({} VM, {} workload, {} execution, verify {})",
        name,
        args.mode.as_str(),
        args.vm.as_str(),
        args.workload,
        args.exec,
        args.verify.as_str()
    );

    let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut ticker = clock::interval(Duration::from_secs(1));
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => registry.emit(false),
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            Ok(()) = fatal.changed() => {
                // Consensus stopped on an error it must not go on after (a fork): say so and
                // leave with a distinct code, so no harness mistakes the run for a measurement.
                let error = fatal.borrow().clone();
                if let Some(error) = error {
                    registry.emit(true);
                    tracing::error!("{error}");
                    eprintln!("error: {error}");
                    std::process::exit(SAFETY_EXIT);
                }
            }
        }
    }
    // What the clients wrote and this node never took, counted (`unread_txs`) before the final
    // line so the audit can tell it from a loss.
    if !clients.drain(CLIENT_DRAIN).await {
        tracing::warn!(
            "client connections still open {CLIENT_DRAIN:?} after the stop: what they still held \
             is not counted"
        );
    }
    // The profile before the final line: a harness may stop waiting once it has the line.
    if let Some(profiler) = profiler {
        if let Err(e) = profiler.finish() {
            tracing::error!("{e}");
        }
    }
    registry.emit(true);
    info!("node {} stopped", name);
    // Leave without waiting for the actors: their sockets close with the process.
    std::process::exit(0);
}
