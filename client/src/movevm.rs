//! `client --mode movevm`: the Move executor alone, as in the paper. A generator thread feeds the
//! executor thread (the same ledger and Move executor a node runs) through a bounded channel;
//! the METRICS lines describe both stages and the channel so the harness reads them like a node's.

use crate::metrics::{now_ms, print_metrics_line};
use crate::Cli;
use anyhow::{Context, Result};
use executor::{run_standalone_until, StandaloneReport};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn line(report: &StandaloneReport) -> Value {
    json!({
        "role": "movevm",
        "name": "movevm",
        "mode": "movevm",
        "time_ms": now_ms(),
        "final": report.final_report,
        "elapsed_ms": report.elapsed_ms,
        "stages": {
            "generator": {
                "items": report.generated,
                "batches": report.generated,
                "busy_ms": (report.elapsed_ms - report.generator_blocked_ms).max(0.0),
                "invalid": 0, "failed": 0, "dropped": 0, "backlog": 0,
                "batch_size_mean": 1.0,
            },
            "executor": {
                "items": report.received,
                "batches": report.received,
                "busy_ms": report.executor_busy_ms,
                "executed": report.executed,
                "failed": report.failed,
                "dropped": report.dropped,
                "invalid": 0,
                "backlog": 0,
                "batch_size_mean": 1.0,
                "state_digest": report.state_digest,
            },
        },
        "channels": {
            "generator->executor": {
                "capacity": report.channel_capacity,
                "sent": report.generated,
                "full": report.channel_full,
                "blocked_ms": report.generator_blocked_ms,
                "mean_len": report.channel_len as f64,
                "max_len": report.channel_len,
            },
        },
    })
}

pub fn run(cli: &Cli) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone())?;
    let duration = if cli.duration == 0 {
        Duration::MAX
    } else {
        Duration::from_secs(cli.duration)
    };
    run_standalone_until(
        cli.accounts,
        duration,
        cli.channel_capacity,
        &stop,
        |report| print_metrics_line(&line(&report)),
    )
    .context("the standalone Move VM run failed")?;
    Ok(())
}

/// Sets `stop` on SIGINT or SIGTERM, from a small runtime on its own thread (the run itself is
/// plain threads).
fn watch_signals(stop: Arc<AtomicBool>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .context("starting the signal runtime")?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let (Ok(mut term), Ok(mut int)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                ) else {
                    let _ = ready_tx.send(false);
                    return;
                };
                let _ = ready_tx.send(true);
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
                stop.store(true, Ordering::Relaxed);
            });
        })
        .context("starting the signal thread")?;
    match ready_rx.recv() {
        Ok(true) => Ok(()),
        _ => anyhow::bail!("cannot install signal handlers"),
    }
}
