//! The HotMove load generator: open-loop transactions at a fixed rate to one node, and the
//! standalone `movevm` benchmark.

mod cli;
mod failover;
mod load;
mod metrics;
mod movevm;
mod opaque;
mod pacing;
mod signed;

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, RULES};
use plumbing::clock;
use stages::flags;
use stages::Mode;

/// What `client --describe --mode M` prints.
#[derive(serde::Serialize)]
struct ClientDescription {
    mode: &'static str,
    process: &'static str,
    flags: Vec<flags::FlagDescription>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    stages::logging::init();
    let command = Cli::command();
    let matches = command.clone().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if cli.describe {
        let description = ClientDescription {
            mode: cli.mode.as_str(),
            process: "client",
            flags: flags::describe(&command, RULES, cli.mode)?,
        };
        println!("{}", serde_json::to_string_pretty(&description)?);
        return Ok(());
    }
    flags::check(&command, &matches, RULES, cli.mode)?;
    if cli.client_index >= cli.clients {
        bail!("--client-index must be below --clients");
    }
    // Before anything reads the clock: the rate and the duration are then in dilated time.
    cli.dilation.apply()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    match cli.mode {
        Mode::Hotstuff => {
            let target = cli.target.context("--target is required")?;
            let source = opaque::OpaqueSource::new(cli.size, cli.client_index);
            runtime.block_on(load::run(&cli, target, source))
        }
        Mode::Hotcrypto | Mode::Hotmove => {
            let target = cli.target.context("--target is required")?;
            let path = cli.genesis.as_ref().context("--genesis is required")?;
            let genesis = executor::Genesis::load(path)?;
            if cli.duration == 0 {
                bail!(
                    "--mode {} signs its transactions ahead: give --duration",
                    cli.mode.as_str()
                );
            }
            let count = usize::try_from(cli.rate.saturating_mul(cli.duration))
                .context("--rate × --duration is too large")?;
            let started = clock::Instant::now();
            let source = signed::SignedSource::new(signed::SignedConfig {
                genesis: &genesis,
                client_index: cli.client_index as usize,
                clients: cli.clients as usize,
                count,
                invalid_share: cli.invalid_share,
                move_load: (cli.mode == Mode::Hotmove)
                    .then(|| {
                        executor::Load::new(cli.workload, cli.workload_arg, cli.payload.style())
                    })
                    .transpose()
                    .context("compiling the workload's Move code")?,
                dest: cli.dest,
            })?;
            tracing::info!(
                "signed {} transactions in {:.1} s",
                source.len(),
                started.elapsed().as_secs_f64()
            );
            runtime.block_on(load::run(&cli, target, source))
        }
        Mode::Movevm => movevm::run(&cli),
    }
}
