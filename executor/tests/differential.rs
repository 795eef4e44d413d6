//! The native and Move executors must be interchangeable: the same random stream of transfers
//! (including ones that fail, ones to unknown accounts and out-of-order nonces) has to leave both
//! with the same balances, the same state digest and the same outcome for every transaction.

mod common;

use bytes::Bytes;
use crypto::KeyPair;
use executor::{
    AdapterExecutor, Address, Completed, Executor, GasParameters, Genesis, Ledger, LedgerStats,
    MoveExecutor, NativeExecutor, Payload, Transaction,
};
use proptest::prelude::*;

const ACCOUNTS: usize = 6;

/// One step: `from` sends `amount` to `to` (an index past the accounts is an unknown address);
/// `swap` delivers this transaction after the next one of the same sender.
#[derive(Clone, Debug)]
struct Step {
    from: usize,
    to: usize,
    amount: u64,
    swap: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (0..ACCOUNTS, 0..ACCOUNTS + 1, 0u64..150, any::<bool>()).prop_map(|(from, to, amount, swap)| {
        Step {
            from,
            to,
            amount,
            swap,
        }
    })
}

/// Builds each step's transaction in both payload flavours, with per-sender nonces, then
/// reorders some adjacent same-sender pairs to exercise the backlog.
fn transactions(
    steps: &[Step],
    keys: &[KeyPair],
    addresses: &[Address],
    script: &Bytes,
) -> Vec<(Transaction, Transaction)> {
    let unknown = Address::from_public_key(&KeyPair::from_seed(10_000).name);
    let mut nonces = [0u64; ACCOUNTS];
    let mut txs: Vec<(Transaction, Transaction, bool)> = steps
        .iter()
        .map(|s| {
            let destination = addresses.get(s.to).copied().unwrap_or(unknown);
            let nonce = nonces[s.from];
            nonces[s.from] += 1;
            let native = Transaction::unsigned(
                keys[s.from].name,
                nonce,
                Payload::Native {
                    destination,
                    amount: s.amount,
                },
            );
            let moving = Transaction::unsigned(
                keys[s.from].name,
                nonce,
                Payload::Move {
                    script: script.clone(),
                    destination,
                    amount: s.amount,
                },
            );
            (native, moving, s.swap)
        })
        .collect();
    let mut i = 0;
    while i + 1 < txs.len() {
        if txs[i].2 && txs[i].0.sender == txs[i + 1].0.sender {
            txs.swap(i, i + 1);
            i += 2;
        } else {
            i += 1;
        }
    }
    txs.into_iter().map(|(n, m, _)| (n, m)).collect()
}

fn run(steps: Vec<Step>) -> LedgerStats {
    let genesis = Genesis::generate(ACCOUNTS, 300, 77);
    let (keys, addresses) = common::accounts(&genesis);
    let mut native = Ledger::from_genesis(
        NativeExecutor::from_genesis(&genesis).expect("native genesis"),
        &genesis,
        16,
    );
    let mut moving = Ledger::from_genesis(
        MoveExecutor::from_genesis(&genesis).expect("move genesis"),
        &genesis,
        16,
    );
    let script = MoveExecutor::transfer_script().expect("script");
    assert_eq!(native.state_digest(), moving.state_digest());

    let mut native_done: Vec<Completed> = Vec::new();
    let mut move_done: Vec<Completed> = Vec::new();
    for (native_tx, move_tx) in transactions(&steps, &keys, &addresses, &script) {
        let a = native.apply_into(native_tx, &mut native_done);
        let b = moving.apply_into(move_tx, &mut move_done);
        assert_eq!(a, b);
    }
    assert_eq!(native_done, move_done);
    assert_eq!(native.stats(), moving.stats());
    assert_eq!(native_done.len(), steps.len(), "every transaction ran once");
    for address in &addresses {
        assert_eq!(native.balance(address), moving.balance(address));
    }
    assert_eq!(native.state_digest(), moving.state_digest());
    let supply: u128 = addresses
        .iter()
        .map(|a| moving.executor().balance(a).expect("account") as u128)
        .sum();
    assert_eq!(supply, genesis.total_supply());
    *moving.stats()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn native_and_move_executors_agree(steps in proptest::collection::vec(step(), 1..120)) {
        run(steps);
    }
}

#[test]
fn failures_happen_in_the_generated_streams() {
    // Guards the property test against vacuity: a stream that drains an account must produce
    // failed transactions, and both executors must agree on them.
    let steps: Vec<Step> = (0..10)
        .map(|i| Step {
            from: 0,
            to: if i == 9 { ACCOUNTS } else { 1 },
            amount: 100,
            swap: i % 3 == 0,
        })
        .collect();
    let stats = run(steps);
    // 300 buys three transfers of 100; the rest fail for balance, the last for its destination.
    assert_eq!(stats.executed, 3);
    assert_eq!(stats.failed, 7);
}

/// The adapter against the bare VM on the same valid transfers (known accounts, amounts each
/// sender can pay, some delivered out of order): the same outcomes, and the same end balances
/// once each sender's fees are added back. Every fee lands in the fee account, so balances plus
/// fees stay the genesis supply, and the ledger's nonces stay the Move sequence numbers.
fn run_adapter(steps: Vec<Step>) {
    let genesis = Genesis::generate(ACCOUNTS, 1_000_000, 78);
    let (keys, addresses) = common::accounts(&genesis);
    let gas = GasParameters {
        max_gas: 1_000,
        gas_price: 2,
    };
    let mut bare = Ledger::from_genesis(
        MoveExecutor::from_genesis(&genesis).expect("bare genesis"),
        &genesis,
        16,
    );
    let mut adapter = Ledger::from_genesis(
        AdapterExecutor::from_genesis(&genesis, gas).expect("adapter genesis"),
        &genesis,
        16,
    );
    let script = MoveExecutor::transfer_script().expect("script");
    // Valid: the destination is always a known account.
    let steps: Vec<Step> = steps
        .into_iter()
        .map(|s| Step {
            to: s.to % ACCOUNTS,
            ..s
        })
        .collect();
    let mut fees_paid = [0u64; ACCOUNTS];
    let (mut bare_done, mut adapter_done) = (Vec::new(), Vec::new());
    for (_, move_tx) in transactions(&steps, &keys, &addresses, &script) {
        let from = addresses
            .iter()
            .position(|a| *a == move_tx.sender)
            .expect("known sender");
        let fees_before = adapter.executor().fees_collected();
        let a = bare.apply_into(move_tx.clone(), &mut bare_done);
        let b = adapter.apply_into(move_tx, &mut adapter_done);
        assert_eq!(a, b);
        // Everything one apply runs is the same sender's.
        fees_paid[from] += adapter.executor().fees_collected() - fees_before;
    }
    assert_eq!(bare_done, adapter_done);
    assert!(bare_done.iter().all(|c| c.outcome.is_executed()));
    assert_eq!(bare.stats(), adapter.stats());
    for (i, address) in addresses.iter().enumerate() {
        let bare_balance = bare.balance(address).expect("account");
        let adapter_balance = adapter.balance(address).expect("account");
        assert_eq!(adapter_balance + fees_paid[i], bare_balance, "account {i}");
        assert_eq!(
            adapter.next_nonce(address),
            adapter.executor().sequence_number(address)
        );
    }
    let fees = adapter.executor().fees_collected();
    assert_eq!(fees, fees_paid.iter().sum::<u64>());
    assert!(steps.is_empty() || fees > 0);
    let supply: u128 = addresses
        .iter()
        .map(|a| u128::from(adapter.balance(a).expect("account")))
        .sum();
    assert_eq!(supply + u128::from(fees), genesis.total_supply());
}

/// Any stream through the adapter (failures, unknown destinations, reordering): balances plus
/// fees stay the genesis supply, and the ledger's nonces stay the Move sequence numbers.
fn run_adapter_conserves(steps: Vec<Step>) -> LedgerStats {
    let genesis = Genesis::generate(ACCOUNTS, 300, 79);
    let (keys, addresses) = common::accounts(&genesis);
    let gas = GasParameters {
        max_gas: 20,
        gas_price: 1,
    };
    let mut adapter = Ledger::from_genesis(
        AdapterExecutor::from_genesis(&genesis, gas).expect("adapter genesis"),
        &genesis,
        16,
    );
    let script = MoveExecutor::transfer_script().expect("script");
    let mut done = Vec::new();
    for (_, move_tx) in transactions(&steps, &keys, &addresses, &script) {
        let _ = adapter.apply_into(move_tx, &mut done);
    }
    let supply: u128 = addresses
        .iter()
        .map(|a| u128::from(adapter.balance(a).expect("account")))
        .sum();
    let fees = adapter.executor().fees_collected();
    assert_eq!(supply + u128::from(fees), genesis.total_supply());
    for address in &addresses {
        assert_eq!(
            adapter.next_nonce(address),
            adapter.executor().sequence_number(address)
        );
    }
    *adapter.stats()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn bare_and_adapter_agree_on_valid_transfers_fees_aside(
        steps in proptest::collection::vec(step(), 1..80)
    ) {
        run_adapter(steps);
    }

    #[test]
    fn the_adapter_conserves_money_and_sequence_numbers(
        steps in proptest::collection::vec(step(), 1..80)
    ) {
        run_adapter_conserves(steps);
    }
}

#[test]
fn the_adapter_stream_drains_accounts_and_rejects() {
    // Guards the conservation property against vacuity: a drained account fails transfers,
    // then cannot pay for gas and is rejected.
    let steps: Vec<Step> = (0..60)
        .map(|i| Step {
            from: 0,
            to: 1,
            amount: 100,
            swap: i % 3 == 0,
        })
        .collect();
    let stats = run_adapter_conserves(steps);
    assert_eq!(stats.executed, 2);
    assert!(stats.failed >= 1, "{stats:?}");
    assert!(stats.dropped.cant_pay_gas_deposit >= 1, "{stats:?}");
}
