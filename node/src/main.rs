//! The HotMove replica: `node keys`, `node genesis`, `node run`, `node recover`, `node describe`.
//!
//! The replica is the one place that knows both halves: `run` starts the mempool and HotStuff
//! and wires their committed batches to the stages of the `stages` crate (with the state-sync
//! link of `checkpoint` between them); `consensus_source` adds consensus's counters to the
//! METRICS line. Everything below consensus is `stages`', which the client links too.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use crypto::KeyPair;
use run::{NodeConfig, RunArgs};
use stages::pipeline::Mode;
use std::path::PathBuf;

mod attesting;
mod consensus_source;
mod run;

/// mimalloc instead of glibc malloc: the Move VM allocates and frees several small objects per
/// transaction (values, frames, change sets), and glibc's allocator took about 12 % of a Move
/// transfer in profiles; mimalloc's thread-local free lists make those calls cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "node", about = "A HotMove replica", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a new key pair to a file.
    Keys {
        #[arg(long)]
        filename: PathBuf,
    },
    /// Write a genesis accounts file (keys and balances; clients sign with its secret keys).
    Genesis {
        #[arg(long)]
        accounts: usize,
        #[arg(long, default_value_t = 1_000_000_000)]
        balance: u64,
        #[arg(long)]
        filename: PathBuf,
        /// Account i gets the deterministic key of seed + i.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Run a replica.
    Run(RunArgs),
    /// Delete a durable store's blocks, batches and checkpoints, keeping its safety state (the
    /// node's vote record): after a machine crash took batches the node needs and its peers no
    /// longer hold. Started again on the same path, the node rejoins from its peers, voting
    /// only where its record lets it (docs/store.md).
    Recover {
        #[arg(long)]
        store: PathBuf,
    },
    /// Print a mode's pipeline as JSON (stages, when a transaction is done, its counters).
    Describe {
        #[arg(long, value_enum)]
        mode: Mode,
    },
}

/// The exit code of a node that panicked.
const PANIC_EXIT: i32 = 101;

fn main() {
    // A panic is a bug, and it must end the node: a panicked stage thread would otherwise leave
    // a node that still runs consensus but no longer verifies or executes, and whose METRICS
    // would quietly report a stalled stage as if it were a measurement.
    let report_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report_panic(info);
        std::process::exit(PANIC_EXIT);
    }));
    if let Err(e) = run_cli() {
        // One clear line, then a non-zero exit.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run_cli() -> Result<()> {
    stages::logging::init();
    match Cli::parse().command {
        Command::Keys { filename } => {
            let (name, secret) = crypto::generate_production_keypair();
            let keys = KeyPair { name, secret };
            config::write_json(&filename, &keys)
                .with_context(|| format!("writing {}", filename.display()))?;
            Ok(())
        }
        Command::Genesis {
            accounts,
            balance,
            filename,
            seed,
        } => {
            executor::Genesis::generate(accounts, balance, seed)
                .save(&filename)
                .with_context(|| format!("writing {}", filename.display()))?;
            Ok(())
        }
        Command::Run(args) => run::run(NodeConfig::load(args)?),
        Command::Recover { store } => {
            let recovered = store::disk::recover(&store)
                .with_context(|| format!("recovering {}", store.display()))?;
            for part in &recovered.deleted {
                println!("deleted {}", part.display());
            }
            println!(
                "kept {}: start the node on {} to rejoin from its peers",
                recovered.kept.display(),
                store.display()
            );
            Ok(())
        }
        Command::Describe { mode } => {
            println!("{}", serde_json::to_string_pretty(&mode.describe())?);
            Ok(())
        }
    }
}
