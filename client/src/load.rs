//! Open-loop load: a burst every `BURST_INTERVAL`, sized so the bursts add up to the rate,
//! whatever the node does. A burst that cannot be written in time is counted (and warned
//! about) instead of silently lowering the offered load.

use crate::metrics::{now_ms, ClientMetrics, SampleSent};
use crate::Cli;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use futures::SinkExt;
use node::metrics::{serve_prometheus, ProcessSource, Registry};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{interval, sleep, Instant, MissedTickBehavior};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tracing::{info, warn};

const BURST_INTERVAL: Duration = Duration::from_millis(50);
const BURSTS_PER_SECOND: u64 = 20;
/// Nodes get this long to come up before the client gives up.
const WAIT_FOR_NODES: Duration = Duration::from_secs(60);

pub struct NextTx {
    pub bytes: Bytes,
    pub sample_id: Option<String>,
    pub invalid: bool,
}

/// Where transactions come from. `sample` asks for a sample (the first of every burst); a
/// source with its own sampling rule may ignore it. `None`: the source is exhausted.
pub trait TxSource {
    fn next(&mut self, sample: bool) -> Option<NextTx>;
}

async fn wait_for_nodes(nodes: &[SocketAddr]) -> Result<()> {
    let deadline = Instant::now() + WAIT_FOR_NODES;
    for node in nodes {
        loop {
            if TcpStream::connect(node).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                bail!("node {node} did not come up within {WAIT_FOR_NODES:?}");
            }
            sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

pub async fn run<S: TxSource>(cli: &Cli, target: SocketAddr, mut source: S) -> Result<()> {
    let name = format!("client-{}", cli.client_index);
    let mode = cli.mode.as_str();
    let mut nodes = cli.nodes.clone();
    if !nodes.contains(&target) {
        nodes.push(target);
    }
    info!("{name}: waiting for {} nodes", nodes.len());
    wait_for_nodes(&nodes).await?;
    let stream = TcpStream::connect(target)
        .await
        .with_context(|| format!("connecting to {target}"))?;
    stream.set_nodelay(true)?;
    let mut transport = Framed::new(stream, LengthDelimitedCodec::new());

    let burst = (cli.rate / BURSTS_PER_SECOND).max(1);
    info!(
        "{name}: sending {} tx/s to {target} in bursts of {burst}",
        cli.rate
    );
    let metrics = Arc::new(ClientMetrics::new(cli.rate));
    let registry = Arc::new(
        Registry::new("client", &name, mode)
            .with(metrics.clone())
            .with(ProcessSource::new(Vec::new(), false)),
    );
    if let Some(address) = cli.prometheus {
        serve_prometheus(address, registry.clone())?;
    }
    let mut ticker = interval(BURST_INTERVAL);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut report = interval(Duration::from_secs(1));
    report.tick().await;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let end = (cli.duration > 0).then(|| Instant::now() + Duration::from_secs(cli.duration));
    let stop = async {
        match end {
            Some(end) => tokio::time::sleep_until(end).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop);
    let mut result = Ok(());
    loop {
        tokio::select! {
            deadline = ticker.tick() => {
                let mut exhausted = false;
                let mut written = 0;
                for i in 0..burst {
                    let Some(tx) = source.next(i == 0) else {
                        exhausted = true;
                        break;
                    };
                    written += 1;
                    ClientMetrics::add(&metrics.sent_bytes, tx.bytes.len() as u64);
                    ClientMetrics::add(&metrics.invalid_sent, tx.invalid as u64);
                    if let Some(id) = tx.sample_id {
                        metrics.push_sample(SampleSent { id, t_ms: now_ms() });
                    }
                    if let Err(e) = transport.feed(tx.bytes).await {
                        result = Err(e).context("connection to the node lost");
                        break;
                    }
                }
                if result.is_err() {
                    break;
                }
                if let Err(e) = SinkExt::<Bytes>::flush(&mut transport).await {
                    result = Err(e).context("connection to the node lost");
                    break;
                }
                ClientMetrics::add(&metrics.sent, written);
                if exhausted {
                    info!("{name}: every pre-signed transaction was sent");
                    break;
                }
                if Instant::now() > deadline + BURST_INTERVAL {
                    let missed = ClientMetrics::add(&metrics.missed_bursts, 1);
                    if missed.is_power_of_two() {
                        warn!("{name}: cannot keep {} tx/s ({missed} late bursts)", cli.rate);
                    }
                }
            },
            _ = report.tick() => registry.emit(false),
            _ = &mut stop => break,
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
    }
    registry.emit(true);
    result
}
