//! A committed batch sequenced whole (`Ledger::execute_block`: planned, run as a block, then
//! sequenced with the block's outcomes) must be exactly the batch sequenced one transaction at a
//! time: the same transactions run with the same outcomes in the same order, the same drops,
//! backlogs and counters, the same state. The streams here are built to break the plan: nonces
//! out of order, stale, duplicated and past the backlog's bound, unknown senders, and senders
//! the adapter's prologue rejects (they cannot pay for gas) who later resend the rejected nonce
//! in the same batch, once someone paid them.

mod common;

use crypto::KeyPair;
use executor::{
    AdapterExecutor, Address, Completed, ExecConfig, FeeCredit, GasParameters, Genesis, Ledger,
    MoveExecutor, Payload, Transaction,
};
use proptest::prelude::*;

const ACCOUNTS: usize = 5;
const MAX_BACKLOG: usize = 3;
/// Gas the prologue asks a sender to be able to pay: a balance under it is rejected.
const GAS: GasParameters = GasParameters {
    max_gas: 400,
    gas_price: 1,
};

/// One transaction of the stream.
#[derive(Clone, Debug)]
struct Step {
    from: usize,
    /// An index past the accounts sends from a key outside the genesis.
    to: usize,
    amount: u64,
    /// How the nonce relates to the sender's next one in the stream: 0 the next, 1 and 2 a gap
    /// (the next is sent later), 3 a copy of the sender's last one.
    nonce: u8,
}

fn step() -> impl Strategy<Value = Step> {
    (0..ACCOUNTS + 1, 0..ACCOUNTS, 0u64..700, 0u8..4).prop_map(|(from, to, amount, nonce)| Step {
        from,
        to,
        amount,
        nonce,
    })
}

struct Stream {
    keys: Vec<KeyPair>,
    addresses: Vec<Address>,
    stranger: KeyPair,
}

impl Stream {
    fn new(genesis: &Genesis) -> Self {
        let (keys, addresses) = common::accounts(genesis);
        Stream {
            keys,
            addresses,
            stranger: KeyPair::from_seed(9_999),
        }
    }

    /// The stream's transactions: each sender's nonces mostly in order, some ahead of a gap
    /// that a later transaction closes, some repeated.
    fn transactions(&self, steps: &[Step]) -> Vec<Transaction> {
        let mut next = [0u64; ACCOUNTS + 1];
        let mut last: Vec<Option<Transaction>> = vec![None; ACCOUNTS + 1];
        let mut txs = Vec::new();
        for s in steps {
            let key = self.keys.get(s.from).unwrap_or(&self.stranger);
            let payload = Payload::Move {
                script: MoveExecutor::transfer_script().expect("script"),
                destination: self.addresses[s.to],
                amount: s.amount,
            };
            let tx = match s.nonce {
                3 => match &last[s.from] {
                    Some(tx) => tx.clone(),
                    None => continue,
                },
                gap => {
                    let tx =
                        Transaction::unsigned(key.name, next[s.from] + u64::from(gap), payload);
                    if gap == 0 {
                        next[s.from] += 1;
                    }
                    tx
                }
            };
            last[s.from] = Some(tx.clone());
            txs.push(tx);
        }
        txs
    }
}

/// The same batches through a ledger one transaction at a time and through one that takes them
/// whole, with fees credited per transaction and per block: identical results.
fn run(steps: &[Step], cuts: &[usize]) -> (u64, u64) {
    // Balances near what the prologue asks for: transfers push senders below it and back.
    let genesis = Genesis::generate(ACCOUNTS, 900, 5);
    let stream = Stream::new(&genesis);
    let txs = stream.transactions(steps);
    let adapter = || AdapterExecutor::from_genesis(&genesis, GAS).expect("genesis");
    let mut one_by_one = Ledger::from_genesis(adapter(), &genesis, MAX_BACKLOG);
    let mut blocks: Vec<Ledger<AdapterExecutor>> = [FeeCredit::PerTransaction, FeeCredit::Block]
        .into_iter()
        .map(|fees| {
            let config = ExecConfig {
                fees,
                ..ExecConfig::default()
            };
            let executor = adapter().with_execution(config).expect("execution");
            Ledger::from_genesis(executor, &genesis, MAX_BACKLOG)
        })
        .collect();
    let mut rest = &txs[..];
    let mut cuts = cuts.iter().cycle();
    while !rest.is_empty() {
        let size = (*cuts.next().unwrap_or(&1)).clamp(1, rest.len());
        let (batch, later) = rest.split_at(size);
        rest = later;
        let mut expected: Vec<Completed> = Vec::new();
        for tx in batch {
            let _ = one_by_one.apply_into(tx.clone(), &mut expected);
        }
        for ledger in &mut blocks {
            let mut done = Vec::new();
            ledger.execute_block(batch.to_vec(), &mut done);
            assert_eq!(done, expected);
            assert_eq!(ledger.stats(), one_by_one.stats());
            assert_eq!(ledger.failed_by_reason(), one_by_one.failed_by_reason());
            // Nonces, backlogs, counters, every resource and the gas: the whole state.
            assert_eq!(
                ledger.snapshot().expect("snapshot"),
                one_by_one.snapshot().expect("snapshot")
            );
        }
    }
    for address in &stream.addresses {
        assert_eq!(
            one_by_one.next_nonce(address),
            one_by_one.executor().sequence_number(address)
        );
    }
    let stats = one_by_one.stats();
    (
        stats.executed + stats.failed,
        stats.dropped.cant_pay_gas_deposit,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_batch_run_whole_is_the_batch_run_one_by_one(
        steps in proptest::collection::vec(step(), 1..90),
        cuts in proptest::collection::vec(1usize..40, 1..6),
    ) {
        run(&steps, &cuts);
    }
}

/// Guards the property against vacuity: a sender drained below what gas may cost is rejected,
/// its later nonces wait, a resend of the rejected nonce in the same batch runs once the sender
/// was paid, and the block ledger agrees all along.
#[test]
fn rejections_and_resends_within_a_batch() {
    let step = |from, to, amount, nonce| Step {
        from,
        to,
        amount,
        nonce,
    };
    let steps = [
        // Account 0 pays 800 of its 900, and is left below the 400 gas may cost: its next
        // transaction is rejected.
        step(0, 1, 800, 0),
        step(0, 1, 1, 0),
        // Account 2 pays account 0, which resends the rejected nonce, then the next.
        step(2, 0, 500, 0),
        step(0, 1, 1, 3),
        step(0, 1, 1, 0),
        // Account 1's nonce 1 waits for its nonce 0.
        step(1, 3, 10, 1),
        step(1, 3, 10, 0),
    ];
    let (ran, rejected) = run(&steps, &[steps.len()]);
    assert_eq!((ran, rejected), (6, 1));
}
