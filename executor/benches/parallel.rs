//! The parallel schemes against sequential execution, on pre-generated blocks executed directly
//! through the ledger (no generator or decoder threads competing for the cores): every workload
//! × `--dest` (ring, uniform, hot:1) × block size (what the node's 500 KB batch holds, and 1,000
//! transactions) × `--exec` (sequential; waves and blockstm at 1, 2 and all cores' threads). The
//! adapter runs them (entry functions, fees credited per block), over 10,000 accounts, as a node
//! does by default.
//!
//! Criterion measures each; at the end a table gives transactions per second (the median block)
//! and the speedup over sequential execution of the same blocks. A filter narrows the run:
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
                let group_name = format!("parallel/{workload}/{dest}/{size_name}");
                let mut group = c.benchmark_group(&group_name);
                let (warm_up, measurement) = if quick() {
                    (Duration::from_millis(50), Duration::from_millis(200))
                } else {
                    (Duration::from_millis(500), Duration::from_secs(2))
                };
                group
                    .throughput(Throughput::Elements(size as u64))
                    .sample_size(10)
                    .warm_up_time(warm_up)
                    .measurement_time(measurement);
                let generated = blocks(&genesis, &keys, workload, dest, size);
                for configuration in configurations() {
                    let config = ExecConfig {
                        scheme: configuration.0,
                        threads: configuration.1,
                        ..ExecConfig::default()
                    };
                    let id = name(configuration);
                    group.bench_function(BenchmarkId::from_parameter(&id), |b| {
                        let mut chain = ledger(&genesis, workload, config);
                        let mut next = 0;
                        let mut done = Vec::new();
                        b.iter_custom(|iterations| {
                            let mut total = Duration::ZERO;
                            for _ in 0..iterations {
                                if next == generated.len() {
                                    chain = ledger(&genesis, workload, config);
                                    next = 0;
                                }
                                let block = generated[next].clone();
                                next += 1;
                                done.clear();
                                let start = Instant::now();
                                chain.execute_block(block, &mut done);
                                let took = start.elapsed();
                                assert_eq!(done.len(), size, "every transaction ran");
                                total += took;
                                if let Ok(mut times) = TIMES.lock() {
                                    times
                                        .entry((group_name.clone(), id.clone()))
                                        .or_insert_with(|| (size, Vec::new()))
                                        .1
                                        .push(took);
                                }
                            }
                            total
                        });
                    });
                }
                group.finish();
            }
        }
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
    criterion.final_summary();
    print_table();
}
