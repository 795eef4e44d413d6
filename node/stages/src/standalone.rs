//! Standalone `movevm`: the Move VM with no consensus, network or signatures in the way. A
//! generator thread encodes the workload's Move transactions into batches, as a mempool would deliver them, and
//! feeds the pipeline of [`Mode::Movevm`]: the node's verifier stage with signature checks off
//! (so every transaction is decoded, as in a node) and the node's executor stage. The generator
//! blocked on a full channel means the stages behind it are saturated.

use crate::metrics::{serve_prometheus, ProcessSource, Registry};
use crate::modes::{Mode, PayloadKind, Vm};
use crate::pipeline::StageSettings;
use crate::profile::Profiler;
use crate::stage::StageMetrics;
use anyhow::{Context, Result};
use batch::BatchBuilder;
use batch::CommittedBatch;
use crypto::PublicKey;
use executor::{Address, Dest, ExecConfig, Genesis, Load, Payees, Transaction, Workload};
use plumbing::clock::{self, Instant};
use plumbing::metered::{self, MeteredSender};
use plumbing::now_ms;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Every account starts with this much; transfers of 1 go round the ring of accounts, so no
/// balance ever runs out (and SmallBank's amounts are as small).
const BALANCE: u64 = 1_000_000_000;
const GENESIS_SEED: u64 = 0;
/// Transactions arrive in nonce order here, so the backlog stays empty; any bound will do.
const MAX_BACKLOG: usize = 1_000;
/// Transactions per batch: a block's worth, as the node's stages get them. One handoff per
/// transaction would measure the channel instead of the VM.
pub const BATCH: usize = 256;
const REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// How often the reporter looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

pub struct StandaloneSettings {
    pub accounts: usize,
    /// How long the generator sends; `None`: until `stop`.
    pub duration: Option<Duration>,
    /// Capacity of each channel, in transactions (rounded up to whole batches).
    pub channel_capacity: usize,
    pub prometheus: Option<SocketAddr>,
    /// Where `--profile` writes its flame graph and folded stacks.
    pub profile: Option<PathBuf>,
    /// What runs the Move transactions.
    pub vm: Vm,
    /// How the calls enter the VM.
    pub payload: PayloadKind,
    pub workload: Workload,
    /// `--workload-arg` (`None`: the workload's default).
    pub workload_arg: Option<u64>,
    /// Whom transfers and SmallBank's payments pay.
    pub dest: Dest,
    /// How the executor runs each batch.
    pub execution: ExecConfig,
}

/// Runs until the duration is over or `stop` is set, printing a METRICS line every second and
/// a final one after the stages have drained; returns the registry for a last look.
pub fn run_movevm(settings: StandaloneSettings, stop: &AtomicBool) -> Result<Arc<Registry>> {
    if settings.accounts == 0 {
        anyhow::bail!("the movevm mode needs at least one account");
    }
    let profiler = settings
        .profile
        .as_deref()
        .map(Profiler::start)
        .transpose()?;
    settings
        .dest
        .check(settings.accounts)
        .map_err(anyhow::Error::msg)?;
    let genesis = Genesis::generate(settings.accounts, BALANCE, GENESIS_SEED);
    let load = Load::new(
        settings.workload,
        settings.workload_arg,
        settings.payload.style(),
    )
    .context("compiling the workload's Move code")?;
    let generator = Generator::new(&genesis, load, settings.dest);
    let capacity = settings.channel_capacity.div_ceil(BATCH).max(1);

    let mut registry = Registry::new("movevm", "movevm", Mode::Movevm.as_str());
    let generator_metrics = Arc::new(StageMetrics::new("generator"));
    registry.add(generator_metrics.clone());
    let (tx, rx, channel) = metered::channel(capacity);
    let stages = Mode::Movevm
        .pipeline()
        .spawn_stages(
            "generator",
            (rx, channel),
            StageSettings {
                genesis: Some(genesis),
                verifier_threads: 1,
                channel_capacity: capacity,
                channel_budget_bytes: config::Parameters::default().pipeline_budget_bytes(),
                max_backlog_per_sender: MAX_BACKLOG,
                samples: None,
                sample_index: None,
                hops: false,
                executor_delay: Duration::ZERO,
                vm: settings.vm,
                checkpointing: None,
                workload: settings.workload,
                execution: settings.execution,
                known: None,
            },
            &mut registry,
        )
        .context("starting the stages")?;
    let mut stage_names = vec!["generator".to_string()];
    stage_names.extend(Mode::Movevm.pipeline().stage_names());
    registry.add(ProcessSource::new(stage_names, false));
    let registry = Arc::new(registry);
    if let Some(address) = settings.prometheus {
        serve_prometheus(address, registry.clone())?;
    }

    let stopping = Arc::new(AtomicBool::new(false));
    let sender = std::thread::Builder::new()
        .name("generator".into())
        .spawn({
            let stopping = stopping.clone();
            let metrics = generator_metrics.clone();
            move || {
                generator.run(tx, &stopping, &metrics);
                crate::metrics::cpu::record_ending_thread();
            }
        })?;
    let start = Instant::now();
    let deadline = settings.duration.map(|d| start + d);
    let mut next_report = start + REPORT_INTERVAL;
    loop {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) || stop.load(Ordering::Relaxed) {
            break;
        }
        if now >= next_report {
            registry.emit(false);
            next_report += REPORT_INTERVAL;
            continue;
        }
        let mut wait = next_report.duration_since(now).min(STOP_POLL);
        if let Some(deadline) = deadline {
            wait = wait.min(deadline.duration_since(now));
        }
        clock::sleep_blocking(wait);
    }
    // The generator stops after its current batch and closes its channel; each stage then
    // drains what is queued, and the executor publishes its final state as it ends.
    stopping.store(true, Ordering::Relaxed);
    let mut panicked = sender.join().is_err();
    for stage in stages {
        panicked |= stage.join().is_err();
    }
    if let Some(profiler) = profiler {
        profiler.finish()?;
    }
    registry.emit(true);
    if panicked {
        anyhow::bail!("a thread of the movevm run panicked");
    }
    Ok(registry)
}

/// Account `i` sends its workload's call (a transfer: 1 to its payee, account `i + 1` mod n
/// under `--dest=ring`) round after round, with sequential nonces. Transactions are unsigned:
/// this mode measures the Move executor, not ed25519.
struct Generator {
    senders: Vec<(PublicKey, Address)>,
    nonces: Vec<u64>,
    load: Load,
    payees: Payees,
    next: usize,
    /// Transactions generated so far: what the payees are drawn by.
    count: u64,
}

impl Generator {
    fn new(genesis: &Genesis, load: Load, dest: Dest) -> Self {
        let senders: Vec<(PublicKey, Address)> = genesis
            .accounts
            .iter()
            .map(|a| (a.public_key, a.address()))
            .collect();
        Generator {
            nonces: vec![0; senders.len()],
            payees: Payees::new(dest, GENESIS_SEED, senders.len()),
            senders,
            load,
            next: 0,
            count: 0,
        }
    }

    /// The next batch, encoded exactly as clients send transactions and a mempool seals them.
    fn batch(&mut self, builder: &mut BatchBuilder) -> CommittedBatch {
        let mut encoded = Vec::new();
        for _ in 0..BATCH {
            let from = self.next;
            let to = (from + 1) % self.senders.len();
            let payee = self.payees.payee(self.count, from, to);
            self.count += 1;
            let (key, sender) = self.senders[from];
            let nonce = self.nonces[from];
            let payload = self.load.payload(&sender, self.senders[payee].1, nonce);
            let tx = Transaction::unsigned(key, nonce, payload);
            encoded.clear();
            encoded.extend_from_slice(&tx.encode());
            builder.push(&encoded);
            self.nonces[from] += 1;
            self.next = to;
        }
        let batch = builder.seal(now_ms(), builder.payload_len());
        // No consensus, so no blocks and no checkpoints.
        CommittedBatch {
            round: 0,
            block: Default::default(),
            last_of_block: false,
            batch,
            committed_at_ms: now_ms(),
        }
    }

    fn run(
        mut self,
        channel: MeteredSender<CommittedBatch>,
        stopping: &AtomicBool,
        metrics: &StageMetrics,
    ) {
        let mut builder = BatchBuilder::with_capacity(BATCH * 256);
        while !stopping.load(Ordering::Relaxed) {
            let start = Instant::now();
            let batch = self.batch(&mut builder);
            metrics.record_batch(BATCH as u64, start.elapsed());
            if channel.blocking_send(batch).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use executor::{FeeCredit, Scheme};
    use serde_json::Value as Json;

    fn stage(line: &Json, name: &str, field: &str) -> u64 {
        line["stages"][name][field]
            .as_u64()
            .unwrap_or_else(|| panic!("no stages.{name}.{field} in {line}"))
    }

    fn last_line(registry: &Registry) -> Json {
        let line = registry.line(true);
        serde_json::from_str(line.strip_prefix("METRICS ").expect("prefix")).expect("json")
    }

    #[test]
    fn every_generated_transaction_is_decoded_then_executed() {
        for vm in [Vm::Bare, Vm::Adapter] {
            for payload in [PayloadKind::Script, PayloadKind::Entry] {
                every_generated_transaction_is_decoded_then_executed_by(
                    vm,
                    payload,
                    Workload::Transfer,
                );
            }
        }
    }

    /// Every workload but SmallBank executes every transaction; SmallBank's procedures may
    /// abort (a payment beyond checking), and those count as failed, never as lost.
    #[test]
    fn every_workload_runs_under_both_vms() {
        for workload in Workload::ALL {
            for vm in [Vm::Bare, Vm::Adapter] {
                every_generated_transaction_is_decoded_then_executed_by(
                    vm,
                    PayloadKind::Entry,
                    workload,
                );
            }
        }
        every_generated_transaction_is_decoded_then_executed_by(
            Vm::Adapter,
            PayloadKind::Script,
            Workload::SmallBank,
        );
    }

    /// Waves and Block-STM on a pool of two beside the stage's thread, under contention and
    /// without: the same checks as sequential execution, and the pool's threads and what it did
    /// in the executor's row, on the METRICS line and for Prometheus.
    #[test]
    fn the_parallel_schemes_run_every_workload_through_the_stages() {
        for scheme in [Scheme::Waves, Scheme::BlockStm] {
            for workload in Workload::ALL {
                for dest in [Dest::Uniform, Dest::Hot(1)] {
                    let config = crate::pipeline::exec_config(scheme, Some(2), FeeCredit::Block, 2)
                        .expect("config");
                    let registry =
                        run_with(Vm::Adapter, PayloadKind::Entry, workload, dest, config);
                    let line = last_line(&registry);
                    let executor = &line["stages"]["executor"];
                    assert_eq!(executor["exec_threads"], 2, "{line}");
                    for counter in [
                        "reexecutions",
                        "validation_aborts",
                        "dependency_waits",
                        "sequential_fallbacks",
                        "contended_blocks",
                        "waves",
                    ] {
                        assert!(executor[counter].is_u64(), "{counter}: {line}");
                    }
                    assert_eq!(executor["sequential_fallbacks"], 0, "{line}");
                    // Transfers to one account are a chain: its blocks run sequentially,
                    // counted (among 8 accounts, uniform payees may make a block one too).
                    let contended = stage(&line, "executor", "contended_blocks");
                    if workload == Workload::Transfer && dest == Dest::Hot(1) {
                        assert!(contended > 0, "{line}");
                    }
                    if scheme == Scheme::Waves {
                        let waves = stage(&line, "executor", "waves");
                        assert!(waves > 0 || contended > 0, "{line}");
                    }
                    let mut scrape = String::new();
                    crate::metrics::render_prometheus(&registry, &mut scrape).expect("render");
                    assert!(
                        scrape.contains("stage_reexecutions")
                            && scrape.contains("stage_exec_threads"),
                        "{scrape}"
                    );
                }
            }
        }
    }

    fn every_generated_transaction_is_decoded_then_executed_by(
        vm: Vm,
        payload: PayloadKind,
        workload: Workload,
    ) {
        run_with(vm, payload, workload, Dest::Ring, ExecConfig::default());
    }

    /// A short movevm run, checked: every transaction generated was decoded and executed, the
    /// supply kept, fees charged for the gas. Returns the registry for more checks.
    fn run_with(
        vm: Vm,
        payload: PayloadKind,
        workload: Workload,
        dest: Dest,
        execution: ExecConfig,
    ) -> Arc<Registry> {
        let stop = AtomicBool::new(false);
        let registry = run_movevm(
            StandaloneSettings {
                accounts: 8,
                duration: Some(Duration::from_millis(300)),
                channel_capacity: 1_000,
                prometheus: None,
                profile: None,
                vm,
                payload,
                workload,
                workload_arg: None,
                dest,
                execution,
            },
            &stop,
        )
        .expect("run");
        let line = last_line(&registry);
        let generated = stage(&line, "generator", "items");
        assert!(generated > 0, "{line}");
        // The stages' threads have ended: their CPU is still in the final line.
        assert!(
            line["stages"]["executor"]["cpu_ms"].as_f64() > Some(0.0),
            "{line}"
        );
        // The executor gets its transactions from the decoder stage only, which parsed every
        // one of them from the batch bytes the generator sealed.
        assert_eq!(stage(&line, "decoder", "items"), generated);
        assert_eq!(stage(&line, "decoder", "invalid"), 0);
        assert_eq!(stage(&line, "executor", "items"), generated);
        let (executed, failed) = (
            stage(&line, "executor", "executed"),
            stage(&line, "executor", "failed"),
        );
        assert_eq!(executed + failed, generated, "{line}");
        let failures = &line["stages"]["executor"]["failed_by_reason"];
        if workload == Workload::SmallBank {
            // Only payments and checks beyond what the bank holds may fail.
            let expected = failures["insufficient_funds"].as_u64().unwrap_or(0);
            assert_eq!(failed, expected, "{line}");
            assert!(executed > failed, "{line}");
        } else {
            assert_eq!(failed, 0, "{workload}: {line}");
        }
        assert_eq!(stage(&line, "executor", "state_executed"), generated);
        assert_eq!(
            line["channels"]["generator->decoder"]["sent"],
            line["channels"]["decoder->executor"]["sent"]
        );
        // Balances plus fees: the adapter's fees left the accounts but not the system.
        assert_eq!(
            line["stages"]["executor"]["total_supply"],
            (8 * u128::from(BALANCE)).to_string()
        );
        let fees: u64 = line["stages"]["executor"]["fees_collected"]
            .as_str()
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("no fees_collected in {line}"));
        let gas = line["stages"]["executor"]["gas_used"].as_u64().unwrap_or(0);
        match vm {
            Vm::Bare => assert_eq!((fees, gas), (0, 0), "{line}"),
            // Every transaction pays for its gas at the default price of one coin per unit.
            Vm::Adapter => assert!(fees == gas && fees >= generated, "{line}"),
        }
        let bank: u128 = line["stages"]["executor"]["bank_holdings"]
            .as_str()
            .and_then(|b| b.parse().ok())
            .unwrap_or_else(|| panic!("no bank_holdings in {line}"));
        assert_eq!(bank > 0, workload == Workload::SmallBank, "{line}");
        registry
    }

    /// The payees of one generated batch under each `--dest`.
    fn payees_of(dest: Dest, accounts: usize) -> Vec<(Address, Address)> {
        let genesis = Genesis::generate(accounts, BALANCE, GENESIS_SEED);
        let load = Load::new(Workload::Transfer, None, PayloadKind::Entry.style()).expect("load");
        let mut generator = Generator::new(&genesis, load, dest);
        let mut builder = BatchBuilder::with_capacity(BATCH * 256);
        let batch = generator.batch(&mut builder);
        batch
            .batch
            .transactions()
            .map(|bytes| {
                let tx = Transaction::decode(&bytes).expect("decodes");
                match tx.payload {
                    executor::Payload::MoveEntry { destination, .. } => (tx.sender, destination),
                    other => panic!("{other:?}"),
                }
            })
            .collect()
    }

    #[test]
    fn the_generator_pays_whom_dest_says() {
        let genesis = Genesis::generate(8, BALANCE, GENESIS_SEED);
        let address = |i: usize| genesis.accounts[i].address();
        let ring = payees_of(Dest::Ring, 8);
        for (k, (sender, payee)) in ring.iter().enumerate() {
            assert_eq!((*sender, *payee), (address(k % 8), address((k + 1) % 8)));
        }
        let hot = payees_of(Dest::Hot(1), 8);
        assert!(hot.iter().all(|(_, payee)| *payee == address(0)));
        let uniform = payees_of(Dest::Uniform, 8);
        assert!(uniform.iter().all(|(sender, payee)| sender != payee));
        let distinct: std::collections::HashSet<_> = uniform.iter().map(|(_, p)| *p).collect();
        assert_eq!(distinct.len(), 8, "{BATCH} draws reach every account");
    }

    #[test]
    fn the_movevm_pipeline_decodes_what_it_executes() {
        // A batch as the generator makes it, with one transaction cut short: only decoding can
        // tell, and the executor must never see it.
        let genesis = Genesis::generate(4, BALANCE, GENESIS_SEED);
        let load = Load::new(Workload::Transfer, None, PayloadKind::Script.style()).expect("load");
        let mut generator = Generator::new(&genesis, load, Dest::Ring);
        let mut builder = BatchBuilder::with_capacity(BATCH * 256);
        let good = generator.batch(&mut builder);
        let mut txs: Vec<Bytes> = good.batch.transactions().collect();
        let cut = txs.pop().expect("a transaction");
        for tx in &txs {
            builder.push(tx);
        }
        builder.push(&cut[..cut.len() / 2]);
        let batch = CommittedBatch {
            round: 0,
            block: Default::default(),
            last_of_block: false,
            batch: builder.seal(0, 0),
            committed_at_ms: 0,
        };
        let mut registry = Registry::new("test", "t", "movevm");
        let (tx, rx, channel) = metered::channel(1);
        let stages = Mode::Movevm
            .pipeline()
            .spawn_stages(
                "test",
                (rx, channel),
                StageSettings {
                    genesis: Some(genesis),
                    verifier_threads: 1,
                    channel_capacity: 1,
                    channel_budget_bytes: usize::MAX,
                    max_backlog_per_sender: MAX_BACKLOG,
                    samples: None,
                    sample_index: None,
                    hops: false,
                    executor_delay: Duration::ZERO,
                    vm: Vm::Bare,
                    checkpointing: None,
                    workload: Workload::Transfer,
                    execution: ExecConfig::default(),
                    known: None,
                },
                &mut registry,
            )
            .expect("stages");
        tx.blocking_send(batch).expect("send");
        drop(tx);
        for stage in stages {
            stage.join().expect("stage");
        }
        let line = last_line(&registry);
        assert_eq!(stage(&line, "decoder", "items"), BATCH as u64);
        assert_eq!(stage(&line, "decoder", "invalid"), 1);
        assert_eq!(
            line["stages"]["decoder"]["invalid_by_reason"]["malformed"],
            1
        );
        assert_eq!(stage(&line, "executor", "executed"), BATCH as u64 - 1);
    }
}
