//! The HotMove load generator: open-loop transactions at a fixed rate to one node, and the
//! standalone `movevm` benchmark.

mod failover;
mod load;
mod metrics;
mod movevm;
mod opaque;
mod signed;

use anyhow::{bail, Context, Result};
use clap::Parser;
use executor::{Dest, FeeCredit, Scheme, Workload};
use stages::{Mode, PayloadKind, Vm};
use std::net::SocketAddr;
use std::path::PathBuf;

/// mimalloc instead of glibc malloc: the Move VM allocates and frees several small objects per
/// transaction (values, frames, change sets), and glibc's allocator took about 12 % of a Move
/// transfer in profiles; mimalloc's thread-local free lists make those calls cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "client", about = "HotMove load generator", version)]
pub struct Cli {
    /// The transactions address of the node to load.
    #[arg(long)]
    target: Option<SocketAddr>,
    /// Transactions addresses of every node to wait for before sending.
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<SocketAddr>,
    /// Transactions per second.
    #[arg(long, default_value_t = 1_000)]
    rate: u64,
    /// Seconds to run (0: until SIGINT/SIGTERM).
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Transaction size in bytes (hotstuff mode; signed transactions have their own size).
    #[arg(long, default_value_t = 200)]
    size: usize,
    #[arg(long, value_enum)]
    mode: Mode,
    /// `--mode movevm`: what runs the Move transactions, the bare VM or the VM behind Diem's
    /// adapter (nodes take `node run --vm`; the transactions are the same).
    #[arg(long, value_enum, default_value_t = Vm::Bare)]
    vm: Vm,
    /// `--mode movevm`: how the executor runs each batch, `sequential`, `waves` or `blockstm`
    /// (nodes take `node run --exec`).
    #[arg(long, default_value_t = Scheme::Sequential)]
    exec: Scheme,
    /// `--mode movevm --exec waves|blockstm`: the executor's worker threads (default: all
    /// cores).
    #[arg(long)]
    exec_threads: Option<usize>,
    /// `--mode movevm --vm adapter`: when fees reach the fee account, `block` (together, after
    /// each batch) or `per-tx` (each transaction credits it: a hotspot). Nodes take
    /// `node run --fees`.
    #[arg(long, default_value_t = FeeCredit::Block)]
    fees: FeeCredit,
    /// `--mode hotmove|movevm`: Move calls as scripts or as entry function calls
    /// (`Coin::transfer_entry`, the workload's function).
    #[arg(long, value_enum, default_value_t = PayloadKind::Script)]
    payload: PayloadKind,
    /// `--mode hotmove|movevm`: what the transactions call: transfer, donothing, cpuheavy,
    /// kvstore or smallbank (nodes take `node run --workload`, for smallbank's genesis).
    #[arg(long, default_value_t = Workload::Transfer)]
    workload: Workload,
    /// cpuheavy: how many numbers each transaction sorts (default 128); kvstore: how many keys
    /// it writes then reads (default 4, of 32 bytes each).
    #[arg(long)]
    workload_arg: Option<u64>,
    /// Whom transfers and SmallBank's payments pay (hotcrypto, hotmove, movevm): `ring` (the
    /// next of this client's accounts), `uniform` (any other genesis account, drawn from a
    /// generator seeded by the client index) or `hot:K` (one of the first K genesis accounts).
    #[arg(long, default_value_t = Dest::Ring)]
    dest: Dest,
    /// Genesis accounts file (hotcrypto, hotmove).
    #[arg(long)]
    genesis: Option<PathBuf>,
    /// This client's index among `--clients`; it uses accounts index, index+clients, ...
    #[arg(long, default_value_t = 0)]
    client_index: u64,
    #[arg(long, default_value_t = 1)]
    clients: u64,
    /// Share of transactions sent with a bad signature (hotcrypto, hotmove).
    #[arg(long, default_value_t = 0.0)]
    invalid_share: f64,
    /// Accounts in the standalone movevm run.
    #[arg(long, default_value_t = 1_000)]
    accounts: usize,
    /// Capacity of each channel between stages in the standalone movevm run, in transactions.
    #[arg(long, default_value_t = 10_000)]
    channel_capacity: usize,
    /// Serve Prometheus metrics on this address (`GET /metrics`).
    #[arg(long, value_name = "ADDR")]
    prometheus: Option<SocketAddr>,
    /// `--mode movevm`: sample the process with a profiler; at exit write DIR/flamegraph.svg
    /// and DIR/profile.folded.
    #[arg(long, value_name = "DIR")]
    profile: Option<PathBuf>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    stages::logging::init();
    let cli = Cli::parse();
    if cli.clients == 0 || cli.client_index >= cli.clients {
        bail!("--client-index must be below --clients");
    }
    if !(0.0..=1.0).contains(&cli.invalid_share) {
        bail!("--invalid-share must be between 0 and 1");
    }
    if cli.vm != Vm::Bare && cli.mode != Mode::Movevm {
        bail!("--vm is for --mode movevm (nodes take `node run --vm`)");
    }
    if (cli.exec != Scheme::Sequential || cli.exec_threads.is_some()) && cli.mode != Mode::Movevm {
        bail!("--exec and --exec-threads are for --mode movevm (nodes take `node run --exec`)");
    }
    if cli.fees != FeeCredit::Block && (cli.mode != Mode::Movevm || cli.vm != Vm::Adapter) {
        bail!("--fees is for --mode movevm --vm adapter (nodes take `node run --fees`)");
    }
    let move_mode = matches!(cli.mode, Mode::Hotmove | Mode::Movevm);
    if cli.payload != PayloadKind::Script && !move_mode {
        bail!("--payload is for the Move modes (hotmove, movevm)");
    }
    if cli.workload != Workload::Transfer && !move_mode {
        bail!("--workload is for the Move modes (hotmove, movevm)");
    }
    if cli.workload_arg.is_some() && !cli.workload.takes_arg() {
        bail!(
            "--workload-arg is for cpuheavy and kvstore, not {}",
            cli.workload
        );
    }
    if cli.dest != Dest::Ring && cli.mode == Mode::Hotstuff {
        bail!("--dest is for the modes that execute (hotcrypto, hotmove, movevm)");
    }
    if cli.profile.is_some() && cli.mode != Mode::Movevm {
        bail!("--profile is for --mode movevm (nodes take `node run --profile`)");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    match cli.mode {
        Mode::Hotstuff => {
            let target = cli.target.context("--target is required")?;
            if cli.size < executor::OPAQUE_MIN_SIZE {
                bail!(
                    "--size must be at least {} bytes",
                    executor::OPAQUE_MIN_SIZE
                );
            }
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
            let started = std::time::Instant::now();
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
