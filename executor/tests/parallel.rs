//! The parallel schemes must be invisible: random blocks of every workload under every `--dest`,
//! through the ledger as a node runs them, leave the same state digest, the same outcomes, fees
//! and gas under `sequential`, `waves` and `blockstm` at 1 to 4 threads, with fees credited per
//! block or per transaction, and the same whole state (every resource, nonces, backlogs,
//! counters) as the reference: sequential execution crediting fees per transaction, the adapter
//! as it always ran.

mod common;

use executor::{
    AdapterExecutor, BlockStats, CallStyle, Completed, Dest, ExecConfig, Executor, FeeCredit,
    GasParameters, Genesis, Ledger, Load, MoveExecutor, Payees, Payload, Scheme, Transaction,
    Workload,
};
use proptest::prelude::*;

const ACCOUNTS: usize = 12;
/// Ten times the adapter's largest fee (SmallBank's genesis banks half of it).
const BALANCE: u64 = 10_000_000;
const MAX_BACKLOG: usize = 64;

#[derive(Clone, Copy, Debug)]
enum Vm {
    Bare,
    Adapter,
}

/// One random load: what it calls, whom it pays, how its blocks are cut.
#[derive(Clone, Debug)]
struct Case {
    vm: Vm,
    workload: Workload,
    style: CallStyle,
    dest: Dest,
    seed: u64,
    /// Transactions of each block, cycled over.
    blocks: Vec<usize>,
    transactions: usize,
    /// Transfers of a random amount mixed in (they may fail for balance).
    large_transfers: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(Vm::Bare), Just(Vm::Adapter)],
        proptest::sample::select(Workload::ALL.to_vec()),
        prop_oneof![Just(CallStyle::Script), Just(CallStyle::Entry)],
        prop_oneof![
            Just(Dest::Ring),
            Just(Dest::Uniform),
            Just(Dest::Hot(1)),
            Just(Dest::Hot(3))
        ],
        any::<u64>(),
        proptest::collection::vec(1usize..48, 1..4),
        1usize..120,
        any::<bool>(),
    )
        .prop_map(
            |(vm, workload, style, dest, seed, blocks, transactions, large_transfers)| Case {
                vm,
                workload,
                style,
                dest,
                seed,
                blocks,
                transactions,
                large_transfers,
            },
        )
}

/// A scheme, its threads and when it credits fees.
type Setting = (Scheme, usize, FeeCredit);

/// Every setting the case runs under.
fn schemes() -> Vec<Setting> {
    let mut all = vec![(Scheme::Sequential, 1, FeeCredit::Block)];
    for threads in 1..=4 {
        all.push((Scheme::Waves, threads, FeeCredit::Block));
        all.push((Scheme::BlockStm, threads, FeeCredit::Block));
    }
    // The fee hotspot: every transaction writes the fee account.
    all.push((Scheme::Waves, 2, FeeCredit::PerTransaction));
    all.push((Scheme::BlockStm, 3, FeeCredit::PerTransaction));
    all
}

/// The case's transactions, as a generator of the load sends them: account k mod n with its
/// next nonce, paying whom `dest` says.
fn transactions(case: &Case, genesis: &Genesis) -> Vec<Transaction> {
    let (keys, addresses) = common::accounts(genesis);
    let load = Load::new(case.workload, None, case.style).expect("load");
    let payees = Payees::new(case.dest, case.seed, ACCOUNTS);
    let mut nonces = [0u64; ACCOUNTS];
    // Senders in an order of the case's own, so blocks mix them differently.
    let offset = (case.seed % ACCOUNTS as u64) as usize;
    (0..case.transactions)
        .map(|k| {
            let from = (k + offset) % ACCOUNTS;
            let payee = addresses[payees.payee(k as u64, from, (from + 1) % ACCOUNTS)];
            let nonce = nonces[from];
            nonces[from] += 1;
            let payload = if case.large_transfers && k % 5 == 2 {
                // Up to more than a sender has: some fail, and some leave the sender unable to
                // pay for gas, so that the adapter's prologue rejects its next transactions.
                let amount = (case.seed ^ k as u64) % (BALANCE + BALANCE / 5);
                Payload::MoveEntry {
                    destination: payee,
                    amount,
                }
            } else {
                load.payload(&addresses[from], payee, nonce)
            };
            Transaction::unsigned(keys[from].name, nonce, payload)
        })
        .collect()
}

/// What the tests compare after every block.
#[derive(Debug, PartialEq)]
struct Observed {
    done: Vec<Completed>,
    digest: crypto::Digest,
    fees: u64,
    gas: u64,
    snapshot: Vec<u8>,
}

trait Chain {
    fn run(&mut self, block: &[Transaction]) -> Observed;
    fn stats(&self) -> BlockStats;
}

impl<E: Executor> Chain for Ledger<E> {
    fn run(&mut self, block: &[Transaction]) -> Observed {
        let mut done = Vec::new();
        self.execute_block(block.to_vec(), &mut done);
        Observed {
            done,
            digest: self.state_digest(),
            fees: self.executor().fees_collected(),
            gas: self.executor().gas_used(),
            snapshot: self.snapshot().expect("snapshot"),
        }
    }

    fn stats(&self) -> BlockStats {
        self.executor().block_stats()
    }
}

/// A chain of `case`'s VM from `genesis` running blocks under `config`.
fn chain(case: &Case, genesis: &Genesis, config: ExecConfig) -> Box<dyn Chain> {
    match case.vm {
        Vm::Bare => Box::new(Ledger::from_genesis(
            MoveExecutor::from_genesis_for(genesis, case.workload)
                .and_then(|vm| vm.with_execution(config))
                .expect("bare genesis"),
            genesis,
            MAX_BACKLOG,
        )),
        Vm::Adapter => Box::new(Ledger::from_genesis(
            AdapterExecutor::from_genesis_for(genesis, GasParameters::default(), case.workload)
                .and_then(|vm| vm.with_execution(config))
                .expect("adapter genesis"),
            genesis,
            MAX_BACKLOG,
        )),
    }
}

/// Runs the case under every scheme and the reference; returns each scheme's statistics.
fn run(case: &Case) -> Vec<(Setting, BlockStats)> {
    let genesis = Genesis::generate(ACCOUNTS, BALANCE, 31);
    let txs = transactions(case, &genesis);
    let reference_config = ExecConfig {
        fees: FeeCredit::PerTransaction,
        ..ExecConfig::default()
    };
    let mut reference = chain(case, &genesis, reference_config);
    let mut chains: Vec<(Setting, Box<dyn Chain>)> = schemes()
        .into_iter()
        .map(|(scheme, threads, fees)| {
            let config = ExecConfig {
                scheme,
                threads,
                fees,
                on_thread_exit: None,
                contention_gate: false,
            };
            ((scheme, threads, fees), chain(case, &genesis, config))
        })
        .collect();
    let mut rest = &txs[..];
    for size in case.blocks.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (block, later) = rest.split_at((*size).min(rest.len()));
        rest = later;
        let expected = reference.run(block);
        for (name, chain) in &mut chains {
            assert_eq!(chain.run(block), expected, "{name:?} on {case:?}");
        }
    }
    chains
        .iter()
        .map(|(name, chain)| (*name, chain.stats()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn every_scheme_leaves_what_sequential_execution_leaves(case in case()) {
        run(&case);
    }
}

fn fixed(vm: Vm, workload: Workload, dest: Dest, blocks: usize) -> Case {
    Case {
        vm,
        workload,
        style: CallStyle::Entry,
        dest,
        seed: 7,
        blocks: vec![blocks],
        transactions: 4 * blocks,
        large_transfers: false,
    }
}

fn stats_of(all: &[(Setting, BlockStats)], scheme: Scheme, threads: usize) -> BlockStats {
    all.iter()
        .find(|((s, t, fees), _)| *s == scheme && *t == threads && *fees == FeeCredit::Block)
        .map(|(_, stats)| *stats)
        .expect("scheme ran")
}

/// Guards the property against vacuity on the `waves` side (its levels are deterministic):
/// senders that only touch their own state form one level per block, transfers to one hot
/// account a level per transaction, and the schemes agree all the same.
#[test]
fn waves_level_by_conflicts() {
    let kv = run(&fixed(Vm::Adapter, Workload::KvStore, Dest::Ring, ACCOUNTS));
    let waves = stats_of(&kv, Scheme::Waves, 2);
    assert_eq!((waves.blocks, waves.waves), (4, 4), "{waves:?}");
    assert_eq!(waves.threads, 2);
    let hot = run(&fixed(Vm::Bare, Workload::Transfer, Dest::Hot(1), ACCOUNTS));
    let waves = stats_of(&hot, Scheme::Waves, 2);
    assert_eq!(
        (waves.blocks, waves.waves),
        (4, 4 * ACCOUNTS as u64),
        "{waves:?}"
    );
    assert_eq!(waves.sequential_fallbacks, 0);
    assert_eq!(stats_of(&hot, Scheme::Sequential, 1).threads, 0);
}

/// A transaction that writes beyond its declaration (a kvstore call of more keys than the
/// declarations cover) sends its block back to sequential execution, with the same result.
#[test]
fn a_broken_declaration_runs_the_block_sequentially() {
    let genesis = Genesis::generate(ACCOUNTS, BALANCE, 31);
    let key = genesis.accounts[0].keypair().expect("secret");
    let call = |nonce, keys| Payload::WorkloadEntry {
        call: executor::Call::KvStore {
            first_key: 0,
            keys,
            value_size: 8,
            version: nonce,
        },
    };
    let block = vec![
        Transaction::unsigned(key.name, 0, call(0, 2)),
        Transaction::unsigned(key.name, 1, call(1, executor::MAX_UNMETERED_KEYS + 3)),
    ];
    let case = fixed(Vm::Adapter, Workload::KvStore, Dest::Ring, 2);
    let mut reference = chain(&case, &genesis, ExecConfig::default());
    // One sender's two transactions are a chain: without the gate, so that waves run them.
    let config = ExecConfig {
        scheme: Scheme::Waves,
        threads: 2,
        contention_gate: false,
        ..ExecConfig::default()
    };
    let mut waves = chain(&case, &genesis, config);
    let expected = reference.run(&block);
    assert!(expected.done.iter().all(|c| c.outcome.is_executed()));
    assert_eq!(waves.run(&block), expected);
    assert_eq!(waves.stats().sequential_fallbacks, 1);
    // A block that keeps to its declarations runs in waves again.
    let next = vec![Transaction::unsigned(key.name, 2, call(2, 2))];
    assert_eq!(waves.run(&next), reference.run(&next));
    assert_eq!(waves.stats().sequential_fallbacks, 1);
    assert_eq!(waves.stats().waves, 1);
}

/// Under the contention gate (on by default), a block of transfers to one account, a chain of
/// conflicts, runs sequentially under either scheme, counted, with sequential execution's
/// result; blocks of senders that touch only their own state run in parallel.
#[test]
fn a_block_too_contended_runs_sequentially_under_the_gate() {
    let genesis = Genesis::generate(ACCOUNTS, BALANCE, 31);
    for scheme in [Scheme::Waves, Scheme::BlockStm] {
        let config = ExecConfig {
            scheme,
            threads: 2,
            ..ExecConfig::default()
        };
        for (workload, dest, contended) in [
            (Workload::Transfer, Dest::Hot(1), true),
            (Workload::KvStore, Dest::Ring, false),
        ] {
            let case = fixed(Vm::Adapter, workload, dest, ACCOUNTS);
            let mut reference = chain(&case, &genesis, ExecConfig::default());
            let mut gated = chain(&case, &genesis, config);
            for block in transactions(&case, &genesis).chunks(ACCOUNTS) {
                assert_eq!(
                    gated.run(block),
                    reference.run(block),
                    "{scheme} {workload}"
                );
            }
            let stats = gated.stats();
            assert_eq!(stats.blocks, 4, "{stats:?}");
            let expected = if contended { stats.blocks } else { 0 };
            assert_eq!(
                stats.contended_blocks, expected,
                "{scheme} {workload}: {stats:?}"
            );
            if contended {
                assert_eq!((stats.waves, stats.reexecutions), (0, 0), "{stats:?}");
            } else if scheme == Scheme::Waves {
                assert_eq!(stats.waves, 4, "{stats:?}");
            }
        }
    }
}
