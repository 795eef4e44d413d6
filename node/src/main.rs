//! The HotMove replica: `node keys`, `node genesis`, `node run`, `node recover`, `node describe`.
//!
//! The replica is the one place that knows both halves: `run` starts the mempool and HotStuff
//! and wires their committed batches to the stages of the `stages` crate (with the state-sync
//! link of `checkpoint` between them); `consensus_source` adds consensus's counters to the
//! METRICS line. Everything below consensus is `stages`', which the client links too.

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use crypto::KeyPair;
use run::{NodeConfig, RunArgs};
use serde::Serialize;
use stages::flags::{self, FlagDescription};
use stages::modes::{Description, Mode};
use std::path::PathBuf;

mod attesting;
mod consensus_source;
mod ingress;
mod run;

#[derive(Parser)]
#[command(name = "node", about = "A HotMove replica", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start and matched at once: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
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
    /// Print a mode's pipeline as JSON (stages, when a transaction is done, its counters) and
    /// the flags of `node run` as the mode takes them (defaults, choices, bounds); with
    /// `--modes`, the modes and what each runs.
    Describe {
        #[arg(long, value_enum, required_unless_present = "modes")]
        mode: Option<Mode>,
        /// Print every mode `--mode` takes, in order, with its help line.
        #[arg(long, conflicts_with = "mode")]
        modes: bool,
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

/// What `node describe --mode M` prints.
#[derive(Serialize)]
struct NodeDescription {
    #[serde(flatten)]
    pipeline: Description,
    /// Every flag of `node run`, as this mode takes it.
    flags: Vec<FlagDescription>,
}

/// One mode as `node describe --modes` prints it.
#[derive(Serialize)]
struct ModeName {
    name: &'static str,
    /// The doc comment of its `Mode` variant.
    help: Option<String>,
}

fn described_modes() -> Vec<ModeName> {
    Mode::value_variants()
        .iter()
        .map(|mode| ModeName {
            name: mode.as_str(),
            help: mode
                .to_possible_value()
                .and_then(|value| value.get_help().map(|help| help.to_string())),
        })
        .collect()
}

fn run_command() -> clap::Command {
    Cli::command()
        .find_subcommand("run")
        .cloned()
        .expect("`node run` is a subcommand")
}

fn run_cli() -> Result<()> {
    stages::logging::init();
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
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
        Command::Run(args) => {
            let given = matches
                .subcommand_matches("run")
                .context("`node run` without its arguments")?;
            flags::check(&run_command(), given, run::RULES, args.mode)?;
            run::run(NodeConfig::load(args)?)
        }
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
        Command::Describe { modes: true, .. } => {
            println!("{}", serde_json::to_string_pretty(&described_modes())?);
            Ok(())
        }
        Command::Describe { mode, .. } => {
            let mode = mode.context("`node describe` needs --mode or --modes")?;
            let description = NodeDescription {
                pipeline: mode.describe(),
                flags: flags::describe(&run_command(), run::RULES, mode)?,
            };
            println!("{}", serde_json::to_string_pretty(&description)?);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(line: &[&str]) -> Result<(), flags::FlagError> {
        let base = ["node", "run", "--keys", "k", "--committee", "c"];
        let matches = Cli::command()
            .try_get_matches_from(base.iter().chain(line))
            .expect("the line parses");
        let Command::Run(args) = Cli::from_arg_matches(&matches).expect("fields").command else {
            panic!("a run");
        };
        let given = matches.subcommand_matches("run").expect("run");
        flags::check(&run_command(), given, run::RULES, args.mode)
    }

    #[test]
    fn every_rule_names_a_flag_of_node_run() {
        for mode in Mode::value_variants() {
            assert!(flags::describe(&run_command(), run::RULES, *mode).is_ok());
        }
    }

    #[test]
    fn a_flag_the_mode_cannot_use_is_refused_before_anything_starts() {
        let refused = checked(&["--mode", "hotcrypto", "--vm", "adapter"]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "--vm needs the Move VM: --mode hotcrypto has none"
        );
        assert!(checked(&["--mode", "hotstuff", "--verify", "attested"]).is_err());
        assert!(checked(&["--mode", "hotcrypto", "--verify", "attested"]).is_ok());
        assert!(checked(&["--mode", "hotmove", "--fees", "per-tx"]).is_err());
        assert!(checked(&["--mode", "hotmove", "--exec-threads", "2"]).is_err());
        assert!(checked(&[
            "--mode",
            "hotmove",
            "--exec",
            "waves",
            "--exec-threads",
            "2"
        ])
        .is_ok());
        assert!(checked(&["--mode", "hotstuff", "--genesis", "g"]).is_err());
        assert!(checked(&["--mode", "hotcrypto", "--verifier-threads", "0"]).is_err());
        // A flag at its default is no mistake in any mode.
        assert!(checked(&["--mode", "hotstuff", "--vm", "bare", "--verify", "all"]).is_ok());
    }

    #[test]
    fn the_modes_are_listed_in_order_with_their_help() {
        let modes = described_modes();
        let names: Vec<&str> = modes.iter().map(|mode| mode.name).collect();
        assert_eq!(names, ["hotstuff", "hotcrypto", "hotmove", "movevm"]);
        assert!(modes.iter().all(|mode| mode.help.is_some()));
        assert!(Cli::command()
            .try_get_matches_from(["node", "describe", "--modes", "--mode", "hotstuff"])
            .is_err());
        assert!(Cli::command()
            .try_get_matches_from(["node", "describe"])
            .is_err());
    }

    #[test]
    fn the_description_names_each_flags_default_and_where_it_applies() {
        let hotstuff = flags::describe(&run_command(), run::RULES, Mode::Hotstuff).expect("rules");
        let exec = hotstuff.iter().find(|f| f.name == "exec").expect("--exec");
        assert_eq!(exec.default.as_deref(), Some("sequential"));
        assert_eq!(exec.choices, ["sequential", "waves", "blockstm"]);
        assert!(!exec.applies);
        let store = hotstuff
            .iter()
            .find(|f| f.name == "store")
            .expect("--store");
        assert!(store.applies);
    }
}
