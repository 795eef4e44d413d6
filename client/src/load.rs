//! Open-loop load: a burst every `BURST_INTERVAL`, sized so the bursts add up to the rate,
//! whatever the node does. A burst that cannot be written in time is counted (and warned
//! about) instead of silently lowering the offered load, and the bursts whose time came while
//! a write was held back are counted as skipped, not sent later (`pacing.rs`).

use crate::cli::Cli;
use crate::failover::{NodeConnection, ResendWindow};
use crate::metrics::{now_ms, ClientMetrics, SampleSent};
use crate::pacing::Pacer;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use plumbing::clock;
use plumbing::clock::{interval, sleep, Instant};
use stages::metrics::{serve_prometheus, ProcessSource, Registry};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

const BURST_INTERVAL: Duration = Duration::from_millis(50);
const BURSTS_PER_SECOND: u64 = 20;
/// Nodes get this long to come up before the client gives up.
const WAIT_FOR_NODES: Duration = Duration::from_secs(60);
/// At the end of the run, a burst its node is holding back gets this long to be written.
const LAST_WRITE_GRACE: Duration = Duration::from_secs(2);

/// What a burst adds to the counters, so that a burst never written can be taken back out.
#[derive(Clone, Copy, Default)]
struct BurstTally {
    txs: u64,
    bytes: u64,
    invalid: u64,
}

impl BurstTally {
    fn count(&self, metrics: &ClientMetrics) {
        ClientMetrics::add(&metrics.sent, self.txs);
        ClientMetrics::add(&metrics.sent_bytes, self.bytes);
        ClientMetrics::add(&metrics.invalid_sent, self.invalid);
    }

    fn take_back(&self, metrics: &ClientMetrics) {
        metrics.sent.fetch_sub(self.txs, Ordering::Relaxed);
        metrics.sent_bytes.fetch_sub(self.bytes, Ordering::Relaxed);
        metrics
            .invalid_sent
            .fetch_sub(self.invalid, Ordering::Relaxed);
    }
}

pub struct NextTx {
    pub bytes: Bytes,
    pub sample_id: Option<String>,
    pub invalid: bool,
}

/// Where transactions come from. `sample` asks for a sample (the first of every burst); a
/// source with its own sampling rule may ignore it. `None`: the source is exhausted.
pub trait TxSource {
    fn next(&mut self, sample: bool) -> Option<NextTx>;

    /// Whether a transaction sent twice executes once (a nonce makes the copy stale), so that
    /// what a lost node may have dropped can be sent again (`failover.rs`).
    fn replay_safe(&self) -> bool {
        false
    }
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

/// Writes `txs` to the node and flushes them.
async fn send_all(connection: &mut NodeConnection, txs: Vec<Bytes>) -> std::io::Result<()> {
    for tx in txs {
        connection.feed(tx).await?;
    }
    connection.flush().await
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
    let connection = NodeConnection::open(target, &nodes)
        .await
        .with_context(|| format!("connecting to {target}"))?;
    let mut window = ResendWindow::default();
    let replay_safe = source.replay_safe();

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
    let mut pacer = Pacer::new(BURST_INTERVAL);
    let mut report = interval(Duration::from_secs(1));
    report.tick().await;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let end = (cli.duration > 0).then(|| Instant::now() + Duration::from_secs(cli.duration));
    let stop = async {
        match end {
            Some(end) => clock::sleep_until(end).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop);
    let mut result = Ok(());
    // The deadline of the burst being written, to count it late if it ends after its interval.
    let mut late: Option<Instant> = None;
    // The source ran out: the last burst is written, then the client stops.
    let mut exhausted = false;
    // The connection travels with the write in progress, if any: a node that applies
    // back-pressure (its mempool is full) blocks the write, and the loop must still report
    // once a second and stop on time meanwhile. No burst is made while one is being written;
    // the first due after it goes at once (late), the others due meanwhile are skipped.
    let mut idle = Some(connection);
    let mut writing = None;
    let mut in_flight = BurstTally::default();
    loop {
        tokio::select! {
            due = pacer.tick(), if idle.is_some() && !exhausted => {
                ClientMetrics::add(&metrics.skipped_bursts, due.skipped);
                ClientMetrics::add(&metrics.bursts, 1);
                let mut txs = Vec::with_capacity(burst as usize);
                let mut tally = BurstTally::default();
                let now = Instant::now();
                for i in 0..burst {
                    let Some(tx) = source.next(i == 0) else {
                        exhausted = true;
                        break;
                    };
                    tally.bytes += tx.bytes.len() as u64;
                    tally.invalid += tx.invalid as u64;
                    if let Some(id) = tx.sample_id {
                        metrics.push_sample(SampleSent { id, t_ms: now_ms() });
                    }
                    // A forged copy takes no nonce: losing it leaves no gap to fill.
                    if replay_safe && !tx.invalid {
                        window.push(now, tx.bytes.clone());
                    }
                    txs.push(tx.bytes);
                }
                window.expire(now);
                tally.txs = txs.len() as u64;
                // Counted now, so the once-a-second lines show what is being offered while a
                // node holds the write back.
                tally.count(&metrics);
                in_flight = tally;
                if let Some(mut connection) = idle.take() {
                    writing = Some(Box::pin(async move {
                        let written = send_all(&mut connection, txs).await;
                        (connection, written)
                    }));
                }
                if exhausted {
                    info!("{name}: every pre-signed transaction was sent");
                }
                late = Some(due.deadline);
            },
            (mut connection, written) = async { writing.as_mut().expect("guarded").await }, if writing.is_some() => {
                writing = None;
                if written.is_err() {
                    // The node went away: move to another, and send again what it may have
                    // dropped (the last burst included).
                    let give_up = end.unwrap_or_else(|| Instant::now() + WAIT_FOR_NODES);
                    let moved = match connection.fail_over(give_up).await {
                        Ok(moved) => moved,
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    };
                    ClientMetrics::add(&metrics.failovers, 1);
                    let resend: Vec<Bytes> = window.to_resend().cloned().collect();
                    let count = resend.len() as u64;
                    if let Err(e) = send_all(&mut connection, resend).await {
                        warn!("{name}: resending to {moved} failed too: {e}");
                    } else {
                        ClientMetrics::add(&metrics.resent, count);
                        info!("{name}: now sending to {moved}; resent the last {count} transactions");
                    }
                }
                idle = Some(connection);
                if exhausted {
                    break;
                }
                if late.take().is_some_and(|deadline| Instant::now() > deadline + BURST_INTERVAL) {
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
    // The run ended with a burst counted and not yet written: write it (the node may still be
    // holding it back), or take it out of the count. The audit compares what clients sent with
    // what nodes committed; a burst counted but never written would read as lost transactions.
    if let Some(write) = writing.take() {
        match clock::timeout(LAST_WRITE_GRACE, write).await {
            Ok((_, Ok(()))) => {}
            Ok((_, Err(e))) => {
                warn!("{name}: the last burst was not written: {e}");
                in_flight.take_back(&metrics);
            }
            Err(_) => {
                warn!("{name}: the last burst was still held back after {LAST_WRITE_GRACE:?}; not counted as sent");
                in_flight.take_back(&metrics);
            }
        }
    }
    registry.emit(true);
    result
}
