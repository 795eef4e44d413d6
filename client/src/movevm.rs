//! `client --mode movevm`: the Move executor alone, as in the paper, run by the node's own
//! decoder and executor stages behind a generator (see `stages::standalone`).

use crate::cli::Cli;
use anyhow::{Context, Result};
use stages::pipeline::exec_config;
use stages::standalone::{run_movevm, StandaloneSettings};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub fn run(cli: &Cli) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    watch_signals(stop.clone())?;
    run_movevm(
        StandaloneSettings {
            accounts: cli.accounts,
            duration: (cli.duration > 0).then(|| Duration::from_secs(cli.duration)),
            channel_capacity: cli.channel_capacity,
            prometheus: cli.prometheus,
            profile: cli.profile.clone(),
            vm: cli.vm,
            payload: cli.payload,
            workload: cli.workload,
            workload_arg: cli.workload_arg,
            dest: cli.dest,
            execution: exec_config(
                cli.exec,
                cli.exec_threads,
                cli.fees,
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            )?,
        },
        &stop,
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
