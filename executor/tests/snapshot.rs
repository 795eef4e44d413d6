//! Snapshots of the Move executors (bare VM and adapter): a ledger restored from another's
//! snapshot has its state (same digest, fees and gas), and both then give the same outcomes and
//! the same state for the same transactions. This is what lets a node rejoin from a checkpoint.

mod common;

use executor::{
    AdapterExecutor, Executor, GasParameters, Genesis, Ledger, MoveExecutor, Payload, Transaction,
};

const ACCOUNTS: usize = 4;
const BALANCE: u64 = 100_000_000;

/// Transfers from every account to the next, `rounds` times, starting at nonce `first`; the
/// last one of account 0 skips a nonce so its ledger holds a backlog.
fn transfers(genesis: &Genesis, first: u64, rounds: u64) -> Vec<Transaction> {
    let (keys, addresses) = common::accounts(genesis);
    let mut txs = Vec::new();
    for nonce in first..first + rounds {
        for from in 0..ACCOUNTS {
            let nonce = if from == 0 && nonce == first + rounds - 1 {
                nonce + 1
            } else {
                nonce
            };
            txs.push(Transaction::unsigned(
                keys[from].name,
                nonce,
                Payload::MoveEntry {
                    destination: addresses[(from + 1) % ACCOUNTS],
                    amount: 10 + from as u64,
                },
            ));
        }
    }
    txs
}

fn restores_and_continues<E: Executor>(make: impl Fn(&Genesis) -> E) {
    let genesis = Genesis::generate(ACCOUNTS, BALANCE, 7);
    let mut original = Ledger::from_genesis(make(&genesis), &genesis, 100);
    for tx in transfers(&genesis, 0, 5) {
        let _ = original.apply(tx);
    }
    assert_eq!(original.stats().backlog, 1);
    let snapshot = original.snapshot().expect("encodes");

    let mut restored = Ledger::from_genesis(make(&genesis), &genesis, 100);
    // A different history first: the restore must replace it all.
    for tx in transfers(&genesis, 0, 2) {
        let _ = restored.apply(tx);
    }
    restored.restore(&snapshot).expect("restores");
    assert_eq!(restored.snapshot().expect("encodes"), snapshot);
    assert_eq!(restored.state_digest(), original.state_digest());
    assert_eq!(restored.stats(), original.stats());
    assert_eq!(
        restored.executor().fees_collected(),
        original.executor().fees_collected()
    );
    assert_eq!(
        restored.executor().gas_used(),
        original.executor().gas_used()
    );

    // The skipped nonce 4 of account 0 releases its backlogged 5 on both; the others' nonces 6
    // and 7 wait for their 5 in both backlogs.
    let (keys, addresses) = common::accounts(&genesis);
    let mut next = vec![Transaction::unsigned(
        keys[0].name,
        4,
        Payload::MoveEntry {
            destination: addresses[1],
            amount: 1,
        },
    )];
    next.extend(transfers(&genesis, 6, 2));
    for tx in next {
        assert_eq!(restored.apply(tx.clone()), original.apply(tx));
    }
    assert_eq!(restored.state_digest(), original.state_digest());
    assert_eq!(restored.stats(), original.stats());
}

#[test]
fn the_bare_move_vm_restores_from_a_snapshot_and_continues() {
    restores_and_continues(|genesis| MoveExecutor::from_genesis(genesis).expect("genesis"));
}

#[test]
fn the_adapter_restores_from_a_snapshot_and_continues() {
    restores_and_continues(|genesis| {
        AdapterExecutor::from_genesis(genesis, GasParameters::default()).expect("genesis")
    });
}

/// A checkpoint travels in one consensus message (`wire::MAX_MESSAGE_SIZE`, 4 MB): at the
/// harness's default 10,000 accounts, every one of which has sent a transaction, each executor's
/// snapshot must fit with room to spare.
#[test]
fn a_snapshot_of_ten_thousand_accounts_fits_one_consensus_message() {
    const MESSAGE: usize = 4 * 1024 * 1024;
    let genesis = Genesis::generate(10_000, BALANCE, 7);
    let (keys, addresses) = common::accounts(&genesis);
    let txs: Vec<Transaction> = (0..keys.len())
        .map(|i| {
            Transaction::unsigned(
                keys[i].name,
                0,
                Payload::MoveEntry {
                    destination: addresses[(i + 1) % keys.len()],
                    amount: 1,
                },
            )
        })
        .collect();
    let bare = Ledger::from_genesis(
        MoveExecutor::from_genesis(&genesis).expect("genesis"),
        &genesis,
        100,
    );
    let adapter = Ledger::from_genesis(
        AdapterExecutor::from_genesis(&genesis, GasParameters::default()).expect("genesis"),
        &genesis,
        100,
    );
    for (name, mut ledger) in [
        ("bare", Box::new(bare) as Box<dyn Snapshotting>),
        ("adapter", Box::new(adapter)),
    ] {
        for tx in &txs {
            ledger.apply_one(tx.clone());
        }
        let size = ledger.size();
        eprintln!("{name}: {size} bytes for 10,000 accounts");
        assert!(size < MESSAGE / 2, "{name}: {size} bytes");
    }
}

/// Lets the size test treat both ledgers alike.
trait Snapshotting {
    fn apply_one(&mut self, tx: Transaction);
    fn size(&self) -> usize;
}

impl<E: Executor> Snapshotting for Ledger<E> {
    fn apply_one(&mut self, tx: Transaction) {
        let _ = self.apply(tx);
    }

    fn size(&self) -> usize {
        self.snapshot().expect("encodes").len()
    }
}
