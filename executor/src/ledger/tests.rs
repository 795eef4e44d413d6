use super::*;
use crate::executor::FailReason;
use crate::native::NativeExecutor;
use crate::transaction::Payload;
use crypto::KeyPair;

struct Fixture {
    ledger: Ledger<NativeExecutor>,
    keys: Vec<KeyPair>,
    addresses: Vec<Address>,
}

fn fixture(balance: u64, max_backlog: usize) -> Fixture {
    let genesis = Genesis::generate(3, balance, 0);
    let ledger = Ledger::from_genesis(
        NativeExecutor::from_genesis(&genesis).expect("genesis"),
        &genesis,
        max_backlog,
    );
    Fixture {
        ledger,
        keys: genesis.keypairs().expect("secret keys"),
        addresses: genesis.addresses(),
    }
}

impl Fixture {
    fn tx(&self, from: usize, nonce: u64, to: usize, amount: u64) -> Transaction {
        Transaction::unsigned(
            self.keys[from].name,
            nonce,
            Payload::Native {
                destination: self.addresses[to],
                amount,
            },
        )
    }

    fn nonces(done: &[Completed]) -> Vec<u64> {
        done.iter().map(|c| c.nonce).collect()
    }
}

#[test]
fn in_order_nonces_run_at_once() {
    let mut f = fixture(100, 10);
    for nonce in 0..3 {
        let done = f.ledger.apply(f.tx(0, nonce, 1, 1)).expect("apply");
        assert_eq!(Fixture::nonces(&done), vec![nonce]);
    }
    assert_eq!(f.ledger.stats().executed, 3);
    assert_eq!(f.ledger.balance(&f.addresses[1]), Some(103));
    assert_eq!(f.ledger.next_nonce(&f.addresses[0]), Some(3));
}

#[test]
fn out_of_order_nonces_run_fifo_per_sender() {
    let mut f = fixture(100, 10);
    for nonce in [3, 1, 4, 2] {
        assert_eq!(f.ledger.apply(f.tx(0, nonce, 1, 1)), Ok(vec![]));
    }
    // Another sender is not held up by sender 0's gap.
    let other = f.ledger.apply(f.tx(2, 0, 1, 1)).expect("apply");
    assert_eq!(Fixture::nonces(&other), vec![0]);
    assert_eq!(f.ledger.stats().backlog, 4);
    let done = f.ledger.apply(f.tx(0, 0, 1, 1)).expect("apply");
    assert_eq!(Fixture::nonces(&done), vec![0, 1, 2, 3, 4]);
    assert!(done.iter().all(|c| c.sender == f.addresses[0]));
    assert_eq!(f.ledger.stats().backlog, 0);
    assert_eq!(f.ledger.stats().executed, 6);
    // A gap left open keeps the rest waiting.
    assert_eq!(f.ledger.apply(f.tx(0, 7, 1, 1)), Ok(vec![]));
    let done = f.ledger.apply(f.tx(0, 5, 1, 1)).expect("apply");
    assert_eq!(Fixture::nonces(&done), vec![5]);
    assert_eq!(f.ledger.stats().backlog, 1);
}

#[test]
fn insufficient_balance_fails_but_consumes_the_nonce() {
    let mut f = fixture(10, 10);
    let done = f.ledger.apply(f.tx(0, 0, 1, 11)).expect("apply");
    assert_eq!(
        done[0].outcome,
        Outcome::Failed(FailReason::InsufficientBalance)
    );
    assert_eq!(f.ledger.next_nonce(&f.addresses[0]), Some(1));
    assert_eq!(
        f.ledger.apply(f.tx(0, 0, 1, 1)),
        Err(DropReason::StaleNonce)
    );
    let done = f.ledger.apply(f.tx(0, 1, 1, 10)).expect("apply");
    assert_eq!(done[0].outcome, Outcome::Executed);
    assert_eq!(f.ledger.stats().failed, 1);
    assert_eq!(f.ledger.stats().executed, 1);
    assert_eq!(f.ledger.balance(&f.addresses[0]), Some(0));
}

#[test]
fn every_drop_reason() {
    let mut f = fixture(100, 2);
    f.ledger.apply(f.tx(0, 0, 1, 1)).expect("apply");
    assert_eq!(
        f.ledger.apply(f.tx(0, 0, 1, 1)),
        Err(DropReason::StaleNonce)
    );

    assert_eq!(f.ledger.apply(f.tx(0, 5, 1, 1)), Ok(vec![]));
    assert_eq!(f.ledger.apply(f.tx(0, 5, 1, 2)), Err(DropReason::Duplicate));
    assert_eq!(f.ledger.apply(f.tx(0, 6, 1, 1)), Ok(vec![]));
    assert_eq!(
        f.ledger.apply(f.tx(0, 7, 1, 1)),
        Err(DropReason::BacklogFull)
    );

    let stranger = KeyPair::from_seed(1_000);
    let unknown = Transaction::unsigned(
        stranger.name,
        0,
        Payload::Native {
            destination: f.addresses[0],
            amount: 1,
        },
    );
    assert_eq!(f.ledger.apply(unknown), Err(DropReason::UnknownAccount));

    let mut impostor = f.tx(1, 0, 0, 1);
    impostor.public_key = stranger.name;
    assert_eq!(f.ledger.apply(impostor), Err(DropReason::BadAddress));

    let dropped = f.ledger.stats().dropped;
    // Every reason the ledger itself drops for once; no prologue ran (native executor).
    for reason in DropReason::ALL {
        let expected = u64::from(!matches!(reason, DropReason::Rejected(_)));
        assert_eq!(dropped.get(reason), expected, "{}", reason.as_str());
    }
    assert_eq!(dropped.total(), 5);
    let json = serde_json::to_value(dropped).expect("json");
    assert_eq!(json["backlog_full"], 1);
    // Nothing dropped consumed a nonce or touched a balance.
    assert_eq!(f.ledger.next_nonce(&f.addresses[0]), Some(1));
    assert_eq!(f.ledger.next_nonce(&f.addresses[1]), Some(0));
    assert_eq!(f.ledger.balance(&f.addresses[1]), Some(101));
}

#[test]
fn completed_samples_carry_their_id() {
    let mut f = fixture(1_000, 2 * SAMPLE_PERIOD as usize);
    for nonce in (1..2 * SAMPLE_PERIOD).rev() {
        f.ledger.apply(f.tx(0, nonce, 1, 1)).expect("apply");
    }
    let done = f.ledger.apply(f.tx(0, 0, 1, 1)).expect("apply");
    let samples: Vec<String> = done
        .iter()
        .filter(|c| c.is_sample())
        .map(Completed::sample_id)
        .collect();
    let prefix = &f.addresses[0].to_hex()[..8];
    let phase = (SAMPLE_PERIOD - f.addresses[0].0[0] as u64 % SAMPLE_PERIOD) % SAMPLE_PERIOD;
    assert_eq!(
        samples,
        vec![
            format!("{prefix}:{phase}"),
            format!("{prefix}:{}", phase + SAMPLE_PERIOD)
        ]
    );
}

/// A ledger restored from another's snapshot is that ledger: same digest, counters and
/// backlog, and the same outcomes for whatever comes next.
#[test]
fn a_restored_ledger_continues_as_the_one_it_was_taken_from() {
    let mut f = fixture(100, 10);
    for tx in [
        f.tx(0, 0, 1, 5),
        f.tx(0, 2, 1, 5),
        f.tx(1, 0, 2, 500),
        f.tx(2, 0, 0, 7),
    ] {
        let _ = f.ledger.apply(tx);
    }
    let snapshot = f.ledger.snapshot().expect("encodes");
    let mut g = fixture(100, 10);
    g.ledger.apply(g.tx(1, 0, 0, 1)).expect("diverges first");
    g.ledger.restore(&snapshot).expect("restores");
    assert_eq!(g.ledger.snapshot().expect("encodes"), snapshot);
    assert_eq!(g.ledger.stats(), f.ledger.stats());
    assert_eq!(g.ledger.stats().backlog, 1);
    assert_eq!(g.ledger.state_digest(), f.ledger.state_digest());
    // Nonce 1 releases the backlogged nonce 2 on both.
    let next = f.tx(0, 1, 2, 1);
    assert_eq!(
        g.ledger.apply(next.clone()).expect("apply"),
        f.ledger.apply(next).expect("apply")
    );
    assert_eq!(g.ledger.state_digest(), f.ledger.state_digest());
    // Two before the snapshot, two after; the 500 that sender 1 lacked failed.
    assert_eq!((g.ledger.stats().executed, g.ledger.stats().failed), (4, 1));
    assert_eq!(g.ledger.stats(), f.ledger.stats());
}

#[test]
fn a_damaged_snapshot_is_an_error_and_changes_nothing() {
    let mut f = fixture(100, 10);
    f.ledger.apply(f.tx(0, 0, 1, 5)).expect("apply");
    let snapshot = f.ledger.snapshot().expect("encodes");
    let mut g = fixture(100, 10);
    let before = g.ledger.snapshot().expect("encodes");
    assert!(g.ledger.restore(&snapshot[..snapshot.len() - 3]).is_err());
    assert!(g.ledger.restore(b"garbage").is_err());
    // A snapshot of another genesis names accounts this one does not have.
    let other = Genesis::generate(3, 100, 1);
    let mut stranger = Ledger::from_genesis(
        NativeExecutor::from_genesis(&other).expect("genesis"),
        &other,
        10,
    );
    let key = other.accounts[0].keypair().expect("secret");
    let to = other.accounts[1].address();
    stranger
        .apply(Transaction::unsigned(
            key.name,
            0,
            Payload::Native {
                destination: to,
                amount: 1,
            },
        ))
        .expect("apply");
    assert!(matches!(
        g.ledger.restore(&stranger.snapshot().expect("encodes")),
        Err(SnapshotError::UnknownAccount(_))
    ));
    assert_eq!(g.ledger.snapshot().expect("encodes"), before);
}
