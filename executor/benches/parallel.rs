//! The parallel schemes against sequential execution, on pre-generated blocks executed directly
//! through the ledger (no generator or decoder threads competing for the cores): every workload
//! × `--dest` (ring, uniform, hot:1) × block size (what the node's 500 KB batch holds, and 1,000
//! transactions) × `--exec` (sequential; waves and blockstm at 1, 2 and all cores' threads). The
//! adapter runs them (entry functions, fees credited per block), over 10,000 accounts, as a node
//! does by default.
//!
//! Each group runs its configurations alternated block by block (`Alternated`): criterion times
//! an iteration, the next block under every configuration, and each configuration's block times
//! go to the table at the end: transactions per second (the median block) and the speedup over
//! sequential execution of the same blocks. The `one-thread` groups set sequential execution
//! against one worker of each scheme, on more blocks. A filter narrows the run:
//! `cargo bench -p executor --bench parallel -- transfer/uniform`.
//!
//! For `fab experiment parallel`: with `HOTMOVE_BENCH_TABLE=FILE` the table is also written to
//! FILE as JSON (one object per group and configuration), and `HOTMOVE_BENCH_QUICK=1` measures
//! each configuration for a fraction of a second (a check of the machinery, not a measurement).

use crypto::KeyPair;
use executor::{
    AdapterExecutor, CallStyle, Dest, ExecConfig, GasParameters, Genesis, Ledger, Load, Payees,
    Scheme, Transaction, Workload,
};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};

/// The allocator the node and client binaries use, so these figures are the stage's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ACCOUNTS: usize = 10_000;
const BALANCE: u64 = 1_000_000_000_000;
/// The node's default batch size (`batch_size`, bytes).
const BATCH_BYTES: usize = 500_000;
/// Blocks generated ahead per configuration; the ledger starts again from genesis after them.
const BLOCKS: usize = 8;
const DESTS: [Dest; 3] = [Dest::Ring, Dest::Uniform, Dest::Hot(1)];

/// Every run's block size and block times, by (group, configuration): the table at the end.
type Times = BTreeMap<(String, String), (usize, Vec<Duration>)>;
static TIMES: Mutex<Times> = Mutex::new(BTreeMap::new());

/// Blocks of consecutive transactions, account k mod n sending the k-th with its next nonce,
/// as clients cycle over their accounts.
fn blocks(
    genesis: &Genesis,
    keys: &[KeyPair],
    workload: Workload,
    dest: Dest,
    size: usize,
) -> Vec<Vec<Transaction>> {
    let load = Load::new(workload, None, CallStyle::Entry).expect("load");
    let addresses = genesis.addresses();
    let payees = Payees::new(dest, 0, ACCOUNTS);
    let mut nonces = vec![0u64; ACCOUNTS];
    let mut k = 0usize;
    (0..BLOCKS)
        .map(|_| {
            (0..size)
                .map(|_| {
                    let from = k % ACCOUNTS;
                    let payee = payees.payee(k as u64, from, (from + 1) % ACCOUNTS);
                    k += 1;
                    let nonce = nonces[from];
                    nonces[from] += 1;
                    let payload = load.payload(&addresses[from], addresses[payee], nonce);
                    Transaction::unsigned(keys[from].name, nonce, payload)
                })
                .collect()
        })
        .collect()
}

fn ledger(genesis: &Genesis, workload: Workload, config: ExecConfig) -> Ledger<AdapterExecutor> {
    let executor = AdapterExecutor::from_genesis_for(genesis, GasParameters::default(), workload)
        .and_then(|executor| executor.with_execution(config))
        .expect("genesis");
    Ledger::from_genesis(executor, genesis, 1_000)
}

/// `(scheme, threads)` of every configuration: sequential, then each parallel scheme at 1, 2
/// and all cores' threads (one entry when those are the same).
fn configurations() -> Vec<(Scheme, usize)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = vec![1, 2, cores];
    threads.sort_unstable();
    threads.dedup();
    let mut all = vec![(Scheme::Sequential, 1)];
    for scheme in [Scheme::Waves, Scheme::BlockStm] {
        all.extend(threads.iter().map(|t| (scheme, *t)));
    }
    all
}

fn name((scheme, threads): (Scheme, usize)) -> String {
    match scheme {
        Scheme::Sequential => scheme.to_string(),
        _ => format!("{scheme}-{threads}"),
    }
}

fn bench_blocks(c: &mut Criterion) {
    let genesis = Genesis::generate(ACCOUNTS, BALANCE, 0);
    let keys = genesis.keypairs().expect("secret keys");
    for workload in Workload::ALL {
        let tx_size = blocks(&genesis, &keys, workload, Dest::Ring, 1)[0][0].encoded_len();
        let sizes = [("batch", BATCH_BYTES / tx_size), ("1000", 1_000)];
        for dest in DESTS {
            for (size_name, size) in sizes {
                let generated = blocks(&genesis, &keys, workload, dest, size);
                let group = format!("parallel/{workload}/{dest}/{size_name}");
                let alternated = Alternated {
                    genesis: &genesis,
                    workload,
                    blocks: &generated,
                    configurations: &configurations(),
                };
                alternated.bench(c, &group, Duration::from_secs(2 * 5));
            }
        }
    }
}

/// The configurations that run a block on the calling thread alone: sequential execution, and
/// each scheme with one worker.
const ONE_THREAD: [(Scheme, usize); 3] = [
    (Scheme::Sequential, 1),
    (Scheme::Waves, 1),
    (Scheme::BlockStm, 1),
];
/// The workloads whose blocks take longest, so that a group above times each configuration on
/// the fewest blocks.
const ONE_THREAD_WORKLOADS: [Workload; 2] = [Workload::CpuHeavy, Workload::KvStore];

/// Sequential execution against one worker of each scheme, on the workloads where they once
/// seemed apart, with more blocks than a group above: all three run the same transactions on
/// the calling thread, and sequential execution does the least bookkeeping, so none should be
/// ahead of it.
fn bench_one_thread(c: &mut Criterion) {
    let genesis = Genesis::generate(ACCOUNTS, BALANCE, 0);
    let keys = genesis.keypairs().expect("secret keys");
    for workload in ONE_THREAD_WORKLOADS {
        let generated = blocks(&genesis, &keys, workload, Dest::Uniform, 1_000);
        let alternated = Alternated {
            genesis: &genesis,
            workload,
            blocks: &generated,
            configurations: &ONE_THREAD,
        };
        alternated.bench(
            c,
            &format!("one-thread/{workload}/uniform/1000"),
            Duration::from_secs(3 * 6),
        );
    }
}

/// One group: the same blocks under several configurations, alternated block by block. Each
/// iteration runs the next block once under every configuration, each on a ledger of its own,
/// and times each; so whatever the machine does meanwhile (other tenants, clock changes) falls
/// on all of them alike, within a block of each other. Measured one configuration after
/// another instead, on a machine shared with other work, a drift between two measurements (a
/// quarter within minutes is common) reads as a difference between the schemes.
struct Alternated<'a> {
    genesis: &'a Genesis,
    workload: Workload,
    blocks: &'a [Vec<Transaction>],
    configurations: &'a [(Scheme, usize)],
}

impl Alternated<'_> {
    /// Criterion times an iteration (one block under every configuration); the table takes each
    /// configuration's block times. `measurement` is for the whole iteration.
    fn bench(&self, c: &mut Criterion, group: &str, measurement: Duration) {
        let size = self.blocks[0].len();
        let mut bench_group = c.benchmark_group(group);
        let (warm_up, measurement) = if quick() {
            (Duration::from_millis(50), Duration::from_millis(200))
        } else {
            (Duration::from_millis(500), measurement)
        };
        bench_group
            .throughput(Throughput::Elements(
                (size * self.configurations.len()) as u64,
            ))
            .sample_size(10)
            .warm_up_time(warm_up)
            .measurement_time(measurement);
        let configs: Vec<ExecConfig> = self
            .configurations
            .iter()
            .map(|&(scheme, threads)| ExecConfig {
                scheme,
                threads,
                ..ExecConfig::default()
            })
            .collect();
        let fresh = || -> Vec<_> {
            configs
                .iter()
                .map(|config| ledger(self.genesis, self.workload, *config))
                .collect()
        };
        // Kept across criterion's calls: a ledger starts again from genesis only once it ran
        // every block.
        let mut chains = fresh();
        let mut next = 0;
        let mut done = Vec::new();
        bench_group.bench_function(BenchmarkId::from_parameter("alternated"), |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    if next == self.blocks.len() {
                        chains = fresh();
                        next = 0;
                    }
                    for (chain, &configuration) in chains.iter_mut().zip(self.configurations) {
                        let block = self.blocks[next].clone();
                        done.clear();
                        let start = Instant::now();
                        chain.execute_block(block, &mut done);
                        let took = start.elapsed();
                        assert_eq!(done.len(), size, "every transaction ran");
                        total += took;
                        record(group, &name(configuration), size, took);
                    }
                    next += 1;
                }
                total
            });
        });
        bench_group.finish();
    }
}

/// Adds one block's time to the table.
fn record(group: &str, id: &str, size: usize, took: Duration) {
    if let Ok(mut times) = TIMES.lock() {
        times
            .entry((group.to_string(), id.to_string()))
            .or_insert_with(|| (size, Vec::new()))
            .1
            .push(took);
    }
}

/// Whether `HOTMOVE_BENCH_QUICK` asks for short measurements.
fn quick() -> bool {
    std::env::var("HOTMOVE_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// The median block's transactions per second.
fn rate(entry: Option<&mut (usize, Vec<Duration>)>) -> Option<f64> {
    let (size, times) = entry?;
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    Some(*size as f64 / times[times.len() / 2].as_secs_f64())
}

/// The speedup table: each configuration's median block in transactions per second, and over
/// sequential execution's median block.
fn print_table() {
    let Ok(mut times) = TIMES.lock() else { return };
    let names: Vec<String> = configurations().into_iter().map(name).collect();
    let mut groups: Vec<String> = times.keys().map(|(group, _)| group.clone()).collect();
    groups.dedup();
    if groups.is_empty() {
        return;
    }
    if let Ok(path) = std::env::var("HOTMOVE_BENCH_TABLE") {
        let rows: Vec<serde_json::Value> = times
            .iter_mut()
            .map(|((group, id), entry)| {
                serde_json::json!({
                    "group": group.trim_start_matches("parallel/"),
                    "configuration": id,
                    "block": entry.0,
                    "blocks_timed": entry.1.len(),
                    "tps": rate(Some(entry)),
                })
            })
            .collect();
        let written = serde_json::to_vec_pretty(&rows)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&path, bytes));
        if let Err(e) = written {
            eprintln!("cannot write the table to {path}: {e}");
            std::process::exit(1);
        }
    }
    println!();
    println!("| workload / dest / block | {} |", names.join(" | "));
    println!("|---|{}", "---|".repeat(names.len()));
    for group in groups {
        let sequential = rate(times.get_mut(&(group.clone(), names[0].clone())));
        let cells: Vec<String> = names
            .iter()
            .map(|id| {
                match (
                    rate(times.get_mut(&(group.clone(), id.clone()))),
                    sequential,
                ) {
                    (None, _) => "-".to_string(),
                    (Some(tps), Some(base)) if id != &names[0] => {
                        format!("{:.0} ({:.2}x)", tps, tps / base)
                    }
                    (Some(tps), _) => format!("{tps:.0}"),
                }
            })
            .collect();
        let label = group.trim_start_matches("parallel/");
        println!("| {label} | {} |", cells.join(" | "));
    }
    println!();
    println!("transactions per second of the median block (speedup over sequential execution)");
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_blocks(&mut criterion);
    bench_one_thread(&mut criterion);
    criterion.final_summary();
    print_table();
}
