//! The client's command line ([`Cli`]), and the flags that only some modes take ([`RULES`]).

use clap::Parser;
use executor::{Dest, FeeCredit, Scheme, Workload};
use stages::dilation::DilationArgs;
use stages::flags::{one_of, FlagRule, Needs};
use stages::{Mode, PayloadKind, Vm};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "client", about = "HotMove load generator", version)]
pub struct Cli {
    /// The transactions address of the node to load.
    #[arg(long)]
    pub(crate) target: Option<SocketAddr>,
    /// Transactions addresses of every node to wait for before sending.
    #[arg(long, value_delimiter = ',')]
    pub(crate) nodes: Vec<SocketAddr>,
    /// Transactions per second.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) rate: u64,
    /// Seconds to run (0: until SIGINT/SIGTERM).
    #[arg(long, default_value_t = 10)]
    pub(crate) duration: u64,
    /// Transaction size in bytes (hotstuff mode; signed transactions have their own size). The
    /// default is the size of a signed transfer, so the modes compare like for like.
    #[arg(long, default_value_t = 197)]
    pub(crate) size: usize,
    #[arg(long, value_enum)]
    pub(crate) mode: Mode,
    /// `--mode movevm`: what runs the Move transactions, the bare VM or the VM behind Diem's
    /// adapter (nodes take `node run --vm`; the transactions are the same).
    #[arg(long, value_enum, default_value_t = Vm::Bare)]
    pub(crate) vm: Vm,
    /// `--mode movevm`: how the executor runs each batch, `sequential`, `waves` or `blockstm`
    /// (nodes take `node run --exec`).
    #[arg(long, default_value_t = Scheme::Sequential, value_parser = one_of(&Scheme::ALL, Scheme::as_str))]
    pub(crate) exec: Scheme,
    /// `--mode movevm --exec waves|blockstm`: the executor's worker threads (default: all
    /// cores).
    #[arg(long)]
    pub(crate) exec_threads: Option<usize>,
    /// `--mode movevm --vm adapter`: when fees reach the fee account, `block` (together, after
    /// each batch) or `per-tx` (each transaction credits it: a hotspot). Nodes take
    /// `node run --fees`.
    #[arg(long, default_value_t = FeeCredit::Block, value_parser = one_of(&FeeCredit::ALL, FeeCredit::as_str))]
    pub(crate) fees: FeeCredit,
    /// `--mode hotmove|movevm`: Move calls as scripts or as entry function calls
    /// (`Coin::transfer_entry`, the workload's function).
    #[arg(long, value_enum, default_value_t = PayloadKind::Script)]
    pub(crate) payload: PayloadKind,
    /// `--mode hotmove|movevm`: what the transactions call: transfer, donothing, cpuheavy,
    /// kvstore or smallbank (nodes take `node run --workload`, for smallbank's genesis).
    #[arg(long, default_value_t = Workload::Transfer, value_parser = one_of(&Workload::ALL, Workload::as_str))]
    pub(crate) workload: Workload,
    /// cpuheavy: how many numbers each transaction sorts (default 128); kvstore: how many keys
    /// it writes then reads (default 4, of 32 bytes each).
    #[arg(long)]
    pub(crate) workload_arg: Option<u64>,
    /// Whom transfers and SmallBank's payments pay (hotcrypto, hotmove, movevm): `ring` (the
    /// next of this client's accounts), `uniform` (any other genesis account, drawn from a
    /// generator seeded by the client index) or `hot:K` (one of the first K genesis accounts).
    #[arg(long, default_value_t = Dest::Ring)]
    pub(crate) dest: Dest,
    /// Genesis accounts file (hotcrypto, hotmove).
    #[arg(long)]
    pub(crate) genesis: Option<PathBuf>,
    /// This client's index among `--clients`; it uses accounts index, index+clients, ...
    #[arg(long, default_value_t = 0)]
    pub(crate) client_index: u64,
    #[arg(long, default_value_t = 1)]
    pub(crate) clients: u64,
    /// Share of transactions sent with a bad signature (hotcrypto, hotmove).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) invalid_share: f64,
    /// Accounts in the standalone movevm run.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) accounts: usize,
    /// Capacity of each channel between stages in the standalone movevm run, in transactions.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) channel_capacity: usize,
    /// Serve Prometheus metrics on this address (`GET /metrics`).
    #[arg(long, value_name = "ADDR")]
    pub(crate) prometheus: Option<SocketAddr>,
    /// `--mode movevm`: sample the process with a profiler; at exit write DIR/flamegraph.svg
    /// and DIR/profile.folded.
    #[arg(long, value_name = "DIR")]
    pub(crate) profile: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) dilation: DilationArgs,
    /// Print this command's flags as `--mode` takes them (defaults, choices, bounds) as JSON,
    /// and exit.
    #[arg(long)]
    pub(crate) describe: bool,
}

/// The flags that only some modes take, or only within bounds (the others apply to every
/// mode): `stages::flags` checks a command line against them and `--describe` prints them.
pub(crate) const RULES: &[FlagRule] = &[
    FlagRule::new("target", Needs::Consensus),
    FlagRule::new("nodes", Needs::Consensus),
    FlagRule::new("rate", Needs::Consensus).at_least(1.0),
    FlagRule::new("client-index", Needs::Consensus),
    FlagRule::new("clients", Needs::Consensus).at_least(1.0),
    FlagRule::new("size", Needs::Opaque).at_least(executor::OPAQUE_MIN_SIZE as f64),
    FlagRule::new("genesis", Needs::Signatures),
    FlagRule::new("invalid-share", Needs::Signatures).between(0.0, 1.0),
    FlagRule::new("dest", Needs::Execution),
    FlagRule::new("payload", Needs::Move),
    FlagRule::new("workload", Needs::Move),
    FlagRule::new("workload-arg", Needs::Move)
        .with("workload", SIZED_WORKLOADS)
        .at_least(1.0),
    FlagRule::new("vm", Needs::Standalone),
    FlagRule::new("exec", Needs::Standalone),
    FlagRule::new("exec-threads", Needs::Standalone)
        .with("exec", &["waves", "blockstm"])
        .at_least(1.0),
    FlagRule::new("fees", Needs::Standalone).with("vm", &["adapter"]),
    FlagRule::new("accounts", Needs::Standalone).at_least(1.0),
    FlagRule::new("channel-capacity", Needs::Standalone).at_least(1.0),
    FlagRule::new("profile", Needs::Standalone),
];

/// The workloads `--workload-arg` sizes (`Workload::takes_arg`).
const SIZED_WORKLOADS: &[&str] = &["cpuheavy", "kvstore"];

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, ValueEnum};
    use stages::flags;

    fn checked(line: &[&str]) -> Result<(), flags::FlagError> {
        let command = Cli::command();
        let matches = command
            .clone()
            .try_get_matches_from(std::iter::once("client").chain(line.iter().copied()))
            .expect("the line parses");
        let cli = Cli::from_arg_matches(&matches).expect("fields");
        flags::check(&command, &matches, RULES, cli.mode)
    }

    #[test]
    fn every_rule_names_a_flag_of_the_client() {
        for mode in Mode::value_variants() {
            assert!(flags::describe(&Cli::command(), RULES, *mode).is_ok());
        }
    }

    #[test]
    fn the_sized_workloads_are_those_that_take_an_argument() {
        let sized: Vec<&str> = Workload::ALL
            .iter()
            .filter(|workload| workload.takes_arg())
            .map(Workload::as_str)
            .collect();
        assert_eq!(sized, SIZED_WORKLOADS);
    }

    #[test]
    fn settings_of_the_standalone_stages_are_refused_beside_a_committee() {
        let refused = checked(&["--mode", "hotmove", "--vm", "adapter"]).unwrap_err();
        assert!(refused.to_string().contains("nodes take it"), "{refused}");
        assert!(checked(&["--mode", "movevm", "--vm", "adapter", "--fees", "per-tx"]).is_ok());
        assert!(checked(&["--mode", "movevm", "--fees", "per-tx"]).is_err());
        assert!(checked(&["--mode", "hotcrypto", "--payload", "entry"]).is_err());
        assert!(checked(&["--mode", "hotstuff", "--dest", "uniform"]).is_err());
        assert!(checked(&["--mode", "hotstuff", "--size", "8"]).is_err());
        assert!(checked(&["--mode", "hotmove", "--workload-arg", "4"]).is_err());
        assert!(checked(&[
            "--mode",
            "hotmove",
            "--workload",
            "kvstore",
            "--workload-arg",
            "4"
        ])
        .is_ok());
        assert!(checked(&["--mode", "hotcrypto", "--invalid-share", "1.5"]).is_err());
    }

    #[test]
    fn an_unknown_workload_is_refused_by_the_parser_with_the_choices() {
        let error = Cli::command()
            .try_get_matches_from(["client", "--mode", "hotmove", "--workload", "sort"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("kvstore"), "{error}");
    }
}
