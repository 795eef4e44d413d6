//! Wiring of one replica's pipeline for each mode, and its lifetime (signals, final METRICS).

use crate::metrics::{NodeMetrics, SampleLog};
use crate::sink::run_commit_sink;
use crate::Mode;
use anyhow::{Context, Result};
use consensus::config::read_json;
use consensus::{metered, Committee, Consensus, Parameters, Store};
use crypto::KeyPair;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};
use tracing::info;

pub struct NodeConfig {
    pub keys: KeyPair,
    pub committee: Committee,
    pub parameters: Parameters,
    pub genesis: Option<PathBuf>,
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
        if mode != Mode::Hotstuff && genesis.is_none() {
            anyhow::bail!("--mode {} needs --genesis", mode.as_str());
        }
        Ok(NodeConfig {
            keys,
            committee,
            parameters,
            genesis: genesis.map(Path::to_path_buf),
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
        mode,
        ..
    } = config;
    let name = keys.name;
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
    let reporters: Vec<Box<dyn crate::metrics::Reporter>> = Vec::new();
    match mode {
        Mode::Hotstuff => {
            tokio::spawn(run_commit_sink(rx_output, samples.clone()));
        }
        Mode::Hotcrypto | Mode::Hotmove => {
            anyhow::bail!("--mode {} is not available yet", mode.as_str());
        }
    }
    let _ = output_metrics;
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
