//! Single-thread costs of the executor stage: a native transfer, a Move transfer (new session,
//! execute the script, finish, apply), both through the ledger as a node runs them, the same
//! Move transfer under each VM (`bare`, `adapter`, and the adapter without its gas meter, which
//! tells what metering costs) and each payload kind (script, entry function), every other
//! workload under each VM and payload kind, and the codec.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use crypto::KeyPair;
use executor::{
    AdapterExecutor, Address, CallStyle, Executor, FailReason, GasParameters, Genesis, Ledger,
    Load, MoveExecutor, NativeExecutor, Outcome, Payload, Transaction, Workload,
};

/// The allocator the node and client binaries use, so these figures are the stage's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BALANCE: u64 = 1_000_000_000_000;

/// Two accounts sending 1 back and forth: the sender alternates, each with its own nonce.
struct PingPong {
    keys: [KeyPair; 2],
    addresses: [Address; 2],
    nonces: [u64; 2],
    turn: usize,
}

impl PingPong {
    fn new(genesis: &Genesis) -> Self {
        let key = |i: usize| genesis.accounts[i].keypair().expect("secret");
        PingPong {
            keys: [key(0), key(1)],
            addresses: [genesis.accounts[0].address(), genesis.accounts[1].address()],
            nonces: [0, 0],
            turn: 0,
        }
    }

    fn next(&mut self, payload: impl Fn(Address) -> Payload) -> Transaction {
        let from = self.turn;
        self.turn = 1 - from;
        let nonce = self.nonces[from];
        self.nonces[from] += 1;
        Transaction::unsigned(
            self.keys[from].name,
            nonce,
            payload(self.addresses[1 - from]),
        )
    }
}

fn native_transfer(c: &mut Criterion) {
    let genesis = Genesis::generate(2, BALANCE, 0);
    let executor = || NativeExecutor::from_genesis(&genesis).expect("genesis");
    executor_and_ledger(c, "native", &genesis, executor, |destination| {
        Payload::Native {
            destination,
            amount: 1,
        }
    });
}

fn move_transfer(c: &mut Criterion) {
    let genesis = Genesis::generate(2, BALANCE, 0);
    let script = MoveExecutor::transfer_script().expect("script");
    let executor = || MoveExecutor::from_genesis(&genesis).expect("genesis");
    executor_and_ledger(c, "move", &genesis, executor, |destination| Payload::Move {
        script: script.clone(),
        destination,
        amount: 1,
    });
}

/// In `group`, the ping-pong transfer of `payload` through an executor alone (`execute`), then
/// through a second one behind the ledger, as a node runs it (`ledger`).
fn executor_and_ledger<E: Executor>(
    c: &mut Criterion,
    group: &str,
    genesis: &Genesis,
    executor: impl Fn() -> E,
    payload: impl Fn(Address) -> Payload,
) {
    let mut group = c.benchmark_group(group);
    group.throughput(Throughput::Elements(1));

    let mut alone = executor();
    let mut pair = PingPong::new(genesis);
    group.bench_function("execute", |b| {
        b.iter_batched(
            || pair.next(&payload),
            |tx| {
                let outcome = alone.execute(&tx);
                debug_assert!(outcome.is_executed());
                outcome
            },
            BatchSize::SmallInput,
        )
    });

    let mut ledger = Ledger::from_genesis(executor(), genesis, 1_000);
    let mut pair = PingPong::new(genesis);
    let mut done = Vec::new();
    group.bench_function("ledger", |b| {
        b.iter_batched(
            || pair.next(&payload),
            |tx| {
                done.clear();
                ledger.apply_into(tx, &mut done)
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// The Move transfer under each VM, side by side in one group per payload kind (the transfer
/// script, or the entry function `Coin::transfer_entry`).
fn vm_transfer(c: &mut Criterion) {
    let genesis = Genesis::generate(2, BALANCE, 0);
    let script = MoveExecutor::transfer_script().expect("script");
    for kind in ["script", "entry"] {
        let mut group = c.benchmark_group(format!("vm_transfer_{kind}"));
        group.throughput(Throughput::Elements(1));
        let adapter = || AdapterExecutor::from_genesis(&genesis, GasParameters::default());
        let executors: Vec<(&str, Box<dyn Executor>)> = vec![
            (
                "bare",
                Box::new(MoveExecutor::from_genesis(&genesis).expect("genesis")),
            ),
            ("adapter", Box::new(adapter().expect("genesis"))),
            (
                "adapter_unmetered",
                Box::new(adapter().expect("genesis").without_gas_metering()),
            ),
        ];
        for (name, mut executor) in executors {
            let mut pair = PingPong::new(&genesis);
            group.bench_function(name, |b| {
                b.iter_batched(
                    || {
                        pair.next(|destination| match kind {
                            "script" => Payload::Move {
                                script: script.clone(),
                                destination,
                                amount: 1,
                            },
                            _ => Payload::MoveEntry {
                                destination,
                                amount: 1,
                            },
                        })
                    },
                    |tx| {
                        let outcome = executor.execute(&tx);
                        assert!(outcome.is_executed(), "{outcome:?}");
                        outcome
                    },
                    BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }
}

/// Accounts the workload benches rotate over: enough that kvstore's keys and SmallBank's
/// accounts are spread as in a run, few enough to set up quickly.
const WORKLOAD_ACCOUNTS: usize = 64;

/// Every workload but the transfer (`vm_transfer`), in one group per workload and payload kind,
/// bare and adapter side by side, with the default `--workload-arg`. Each sender in turn sends
/// its next transaction, as the standalone generator does.
fn workloads(c: &mut Criterion) {
    let genesis = Genesis::generate(WORKLOAD_ACCOUNTS, BALANCE, 0);
    let senders: Vec<_> = genesis
        .accounts
        .iter()
        .map(|a| (a.public_key, a.address()))
        .collect();
    for workload in Workload::ALL {
        if workload == Workload::Transfer {
            continue;
        }
        for (style, kind) in [(CallStyle::Script, "script"), (CallStyle::Entry, "entry")] {
            let load = Load::new(workload, None, style).expect("load");
            let mut group = c.benchmark_group(format!("workload_{workload}_{kind}"));
            group.throughput(Throughput::Elements(1));
            let gas = GasParameters::default();
            let executors: Vec<(&str, Box<dyn Executor>)> = vec![
                (
                    "bare",
                    Box::new(MoveExecutor::from_genesis_for(&genesis, workload).expect("genesis")),
                ),
                (
                    "adapter",
                    Box::new(
                        AdapterExecutor::from_genesis_for(&genesis, gas, workload)
                            .expect("genesis"),
                    ),
                ),
            ];
            for (name, mut executor) in executors {
                let mut nonces = vec![0u64; senders.len()];
                let mut turn = 0;
                group.bench_function(name, |b| {
                    b.iter_batched(
                        || {
                            let from = turn;
                            turn = (turn + 1) % senders.len();
                            let (key, sender) = senders[from];
                            let next = senders[turn].1;
                            let nonce = nonces[from];
                            nonces[from] += 1;
                            Transaction::unsigned(key, nonce, load.payload(&sender, next, nonce))
                        },
                        |tx| {
                            let outcome = executor.execute(&tx);
                            assert!(
                                matches!(
                                    outcome,
                                    Outcome::Executed
                                        | Outcome::Failed(FailReason::InsufficientFunds)
                                ),
                                "{outcome:?}"
                            );
                            outcome
                        },
                        BatchSize::SmallInput,
                    )
                });
            }
            group.finish();
        }
    }
}

fn codec(c: &mut Criterion) {
    let genesis = Genesis::generate(2, BALANCE, 0);
    let keys = genesis.accounts[0].keypair().expect("secret");
    let destination = genesis.accounts[1].address();
    let script = MoveExecutor::transfer_script().expect("script");
    let transactions = [
        (
            "native",
            Transaction::sign(
                &keys,
                7,
                Payload::Native {
                    destination,
                    amount: 1,
                },
            ),
        ),
        (
            "move",
            Transaction::sign(
                &keys,
                7,
                Payload::Move {
                    script,
                    destination,
                    amount: 1,
                },
            ),
        ),
    ];
    let mut group = c.benchmark_group("codec");
    group.throughput(Throughput::Elements(1));
    for (name, tx) in &transactions {
        let bytes = tx.encode();
        group.bench_function(format!("encode_{name}_{}B", bytes.len()), |b| {
            b.iter(|| tx.encode())
        });
        group.bench_function(format!("decode_{name}_{}B", bytes.len()), |b| {
            b.iter(|| Transaction::decode(&bytes))
        });
        group.bench_function(format!("signing_bytes_{name}"), |b| {
            b.iter(|| tx.signing_bytes())
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    native_transfer,
    move_transfer,
    vm_transfer,
    workloads,
    codec
);
criterion_main!(benches);
