//! Wiring of one replica's pipeline for each mode, and its lifetime (signals, final METRICS).

use crate::execution::ExecutorStage;
use crate::metrics::{NodeMetrics, Reporter, SampleLog};
use crate::sink::run_commit_sink;
use crate::stage::{ChannelReporter, StageMetrics, StageReporter};
use crate::verifier::VerifierStage;
use crate::Mode;
use anyhow::{Context, Result};
use consensus::config::read_json;
use consensus::metered::MeteredReceiver;
use consensus::{metered, CommittedBatch, Committee, Consensus, Parameters, Store};
use crypto::{KeyPair, ParallelVerifier};
use executor::{Genesis, MoveExecutor, NativeExecutor};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::info;

pub struct NodeConfig {
    pub keys: KeyPair,
    pub committee: Committee,
    pub parameters: Parameters,
    pub genesis: Option<Genesis>,
    pub mode: Mode,
    pub verifier_threads: Option<usize>,
}

impl NodeConfig {
    pub fn load(
        keys: &Path,
        committee: &Path,
        parameters: Option<&Path>,
        genesis: Option<&Path>,
        mode: Mode,
        verifier_threads: Option<usize>,
    ) -> Result<Self> {
        let keys: KeyPair = read_json(keys)?;
        let committee = Committee::load(committee)?;
        let parameters = match parameters {
            Some(path) => Parameters::load(path)?,
            None => Parameters::default(),
        };
        if committee.authority(&keys.name).is_none() {
            anyhow::bail!("key {} is not in the committee", keys.name.to_hex());
        }
        let genesis = match (mode, genesis) {
            (Mode::Hotstuff, _) => None,
            (_, None) => anyhow::bail!("--mode {} needs --genesis", mode.as_str()),
            (_, Some(path)) => Some(Genesis::load(path)?),
        };
        Ok(NodeConfig {
            keys,
            committee,
            parameters,
            genesis,
            mode,
            verifier_threads,
        })
    }
}

pub fn run(config: NodeConfig) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("node")
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run_async(config))
}

async fn run_async(config: NodeConfig) -> Result<()> {
    let NodeConfig {
        keys,
        committee,
        parameters,
        genesis,
        mode,
        verifier_threads,
    } = config;
    let name = keys.name;
    let parameters_capacity = parameters.channel_capacity;
    let max_backlog_per_sender = parameters.max_backlog_per_sender;
    let (tx_output, rx_output, output_metrics) = metered::channel(parameters.channel_capacity);
    let handle = Consensus::spawn(
        name,
        keys.secret,
        committee,
        parameters,
        Store::new(),
        tx_output,
    )
    .await
    .context("starting consensus")?;
    let samples = Arc::new(SampleLog::default());
    let mut reporters: Vec<Box<dyn Reporter>> = vec![Box::new(ChannelReporter {
        name: "consensus->verifier",
        metrics: output_metrics,
    })];
    // `NodeConfig::load` keeps a genesis exactly for the modes that verify and execute.
    match genesis {
        None => {
            tokio::spawn(run_commit_sink(rx_output, samples.clone()));
        }
        Some(genesis) => {
            let stages = ExecutionPipeline {
                mode,
                genesis,
                verifier_threads: verifier_threads.unwrap_or(0),
                capacity: parameters_capacity,
                max_backlog_per_sender,
            };
            reporters.extend(stages.spawn(rx_output, samples.clone())?);
        }
    }
    let metrics = NodeMetrics {
        name: name.to_string(),
        mode: mode.as_str().into(),
        consensus: handle,
        samples,
        reporters,
    };
    info!("node {} running in {} mode", name, mode.as_str());

    let mut sigterm = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => metrics.emit(false),
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
    }
    metrics.emit(true);
    info!("node {} stopped", name);
    // Leave without waiting for the actors: their sockets close with the process.
    std::process::exit(0);
}

/// consensus ─► verifier stage ─► executor stage, for the modes that check and execute.
struct ExecutionPipeline {
    mode: Mode,
    genesis: Genesis,
    verifier_threads: usize,
    capacity: usize,
    max_backlog_per_sender: usize,
}

impl ExecutionPipeline {
    fn spawn(
        self,
        rx_committed: MeteredReceiver<CommittedBatch>,
        samples: Arc<SampleLog>,
    ) -> Result<Vec<Box<dyn Reporter>>> {
        let verifier =
            ParallelVerifier::new(self.verifier_threads).context("starting the verifier pool")?;
        let (tx_verified, rx_verified, verified_metrics) = metered::channel(self.capacity);
        let verifier_metrics = Arc::new(StageMetrics::default());
        let executor_metrics = Arc::new(StageMetrics::default());
        self.spawn_executor(rx_verified, executor_metrics.clone(), samples)?;
        VerifierStage::spawn(
            rx_committed,
            tx_verified,
            verifier,
            verifier_metrics.clone(),
        )
        .context("starting the verifier stage")?;
        Ok(vec![
            Box::new(StageReporter {
                name: "verifier",
                metrics: verifier_metrics,
            }),
            Box::new(ChannelReporter {
                name: "verifier->executor",
                metrics: verified_metrics,
            }),
            Box::new(StageReporter {
                name: "executor",
                metrics: executor_metrics,
            }),
        ])
    }

    fn spawn_executor(
        self,
        rx: MeteredReceiver<crate::verifier::VerifiedBatch>,
        metrics: Arc<StageMetrics>,
        samples: Arc<SampleLog>,
    ) -> Result<()> {
        let backlog = self.max_backlog_per_sender;
        match self.mode {
            Mode::Hotmove => ExecutorStage::spawn(
                rx,
                self.genesis,
                backlog,
                |genesis| MoveExecutor::from_genesis(genesis).context("starting the Move executor"),
                metrics,
                samples,
            )?,
            _ => ExecutorStage::spawn(
                rx,
                self.genesis,
                backlog,
                |genesis| {
                    NativeExecutor::from_genesis(genesis).context("starting the native executor")
                },
                metrics,
                samples,
            )?,
        };
        Ok(())
    }
}
