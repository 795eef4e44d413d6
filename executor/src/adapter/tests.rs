//! The adapter against its rules: fees, sequence numbers, the prologue's rejections, gas.

use super::executor::AdapterExecutor;
use super::rules::GasParameters;
use crate::bare::MoveExecutor;
use crate::executor::{Executor, FailReason, Outcome, RejectReason};
use crate::ledger::{DropReason, Ledger};
use crate::move_vm::gas::INTERNAL_UNITS_PER_GAS;
use crate::transaction::{Address, Payload, Transaction};
use bytes::Bytes;
use crypto::KeyPair;

const BALANCE: u64 = 10_000_000;

struct Fixture {
    ex: AdapterExecutor,
    keys: Vec<KeyPair>,
    addresses: Vec<Address>,
}

fn fixture(balances: &[u64], gas: GasParameters) -> Fixture {
    let keys: Vec<KeyPair> = (0..balances.len() as u64)
        .map(|i| KeyPair::from_seed(100 + i))
        .collect();
    let addresses = keys
        .iter()
        .map(|k| Address::from_public_key(&k.name))
        .collect();
    let ex = AdapterExecutor::new(
        keys.iter().map(|k| k.name).zip(balances.iter().copied()),
        gas,
    )
    .expect("genesis");
    Fixture {
        ex,
        keys,
        addresses,
    }
}

impl Fixture {
    fn transfer(&self, from: usize, nonce: u64, to: usize, amount: u64) -> Transaction {
        Transaction::unsigned(
            self.keys[from].name,
            nonce,
            Payload::Move {
                script: MoveExecutor::transfer_script().expect("script"),
                destination: self.addresses[to],
                amount,
            },
        )
    }

    fn balance(&self, i: usize) -> u64 {
        self.ex.balance(&self.addresses[i]).expect("account")
    }

    fn sequence_number(&self, i: usize) -> u64 {
        self.ex
            .sequence_number(&self.addresses[i])
            .expect("account")
    }

    /// Balances plus fees: what no transaction may change.
    fn money(&self) -> u128 {
        (0..self.addresses.len())
            .map(|i| u128::from(self.balance(i)))
            .sum::<u128>()
            + u128::from(self.ex.fees_collected())
    }
}

#[test]
fn a_transfer_pays_its_gas_and_consumes_its_sequence_number() {
    let gas = GasParameters {
        max_gas: 1_000,
        gas_price: 3,
    };
    let mut f = fixture(&[BALANCE, BALANCE], gas);
    assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
    let used = f.ex.gas_used();
    assert!(used > 0 && used < gas.max_gas, "{used}");
    let fee = used * gas.gas_price;
    assert_eq!(f.balance(0), BALANCE - 5 - fee);
    assert_eq!(f.balance(1), BALANCE + 5);
    assert_eq!(f.ex.fees_collected(), fee);
    assert_eq!(f.sequence_number(0), 1);
    assert_eq!(f.sequence_number(1), 0);
    assert_eq!(f.money(), 2 * u128::from(BALANCE));
    // The same transfer costs the same gas again.
    assert_eq!(f.ex.execute(&f.transfer(0, 1, 1, 5)), Outcome::Executed);
    assert_eq!(f.ex.gas_used(), 2 * used);
}

#[test]
fn out_of_gas_discards_the_payload_charges_the_fee_and_consumes_the_sequence_number() {
    let gas = GasParameters {
        max_gas: 1_000,
        gas_price: 2,
    };
    let mut f = fixture(&[BALANCE, BALANCE], gas);
    assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
    // What the transfer needs, in internal units (the meter counts those): the fee of the
    // first transfer, in gas units, bounds it from above.
    let needed = f.ex.gas_used() * INTERNAL_UNITS_PER_GAS;
    // Stop the same transfer at every instruction boundary below what it needs: every cut,
    // including the ones after the debit of the sender and before the credit, must leave
    // both balances as they were but for the fee of the gas used (all of it).
    let mut nonce = 1;
    let mut stopped = 0;
    for limit in (0..needed).step_by(3) {
        let (before_sender, before_receiver) = (f.balance(0), f.balance(1));
        let fees = f.ex.fees_collected();
        f.ex.rules.meter_limit = limit;
        let outcome = f.ex.execute(&f.transfer(0, nonce, 1, 5));
        nonce += 1;
        if outcome == Outcome::Executed {
            // The first transfer paid for whole gas units: the last few hundred internal
            // units below that bound are enough.
            assert!(
                limit > needed - INTERNAL_UNITS_PER_GAS,
                "{limit} of {needed}"
            );
            break;
        }
        assert_eq!(
            outcome,
            Outcome::Failed(FailReason::OutOfGas),
            "limit {limit}"
        );
        stopped += 1;
        let fee = limit.div_ceil(INTERNAL_UNITS_PER_GAS) * gas.gas_price;
        assert_eq!(f.balance(0), before_sender - fee, "limit {limit}");
        assert_eq!(f.balance(1), before_receiver, "limit {limit}");
        assert_eq!(f.ex.fees_collected(), fees + fee);
        assert_eq!(f.sequence_number(0), nonce);
    }
    assert!(stopped > 1_000, "{stopped}");
    assert_eq!(f.money(), 2 * u128::from(BALANCE));
}

#[test]
fn an_abort_charges_the_fee_and_keeps_the_sequence_going() {
    let gas = GasParameters {
        max_gas: 100,
        gas_price: 1,
    };
    let mut f = fixture(&[1_000, 50], gas);
    assert_eq!(
        f.ex.execute(&f.transfer(0, 0, 1, 1_001)),
        Outcome::Failed(FailReason::InsufficientBalance)
    );
    let fee = f.ex.gas_used();
    assert!(fee > 0);
    assert_eq!(f.balance(0), 1_000 - fee);
    assert_eq!(f.balance(1), 50);
    assert_eq!(f.sequence_number(0), 1);
    // The payload may spend what the fee needs: then the epilogue fails, the payload is
    // discarded and the fee charged from the balance the prologue checked.
    let all = f.balance(0);
    let outcome = f.ex.execute(&f.transfer(0, 1, 1, all));
    assert!(
        matches!(&outcome, Outcome::Failed(FailReason::Vm(s)) if s.starts_with("epilogue")),
        "{outcome:?}"
    );
    assert_eq!(f.balance(1), 50);
    assert_eq!(f.sequence_number(0), 2);
    assert_eq!(f.money(), 1_050);
}

#[test]
fn the_prologue_rejects_replays_gaps_foreign_keys_and_senders_who_cannot_pay() {
    let gas = GasParameters {
        max_gas: 1_000,
        gas_price: 10,
    };
    // Account 2 holds less than max gas × price.
    let mut f = fixture(&[BALANCE, BALANCE, gas.max_fee() - 1], gas);
    assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
    let digest = f.ex.state_digest();
    let used = f.ex.gas_used();
    let rejected = [
        (f.transfer(0, 0, 1, 5), RejectReason::SequenceNumberTooOld),
        (f.transfer(0, 7, 1, 5), RejectReason::SequenceNumberTooNew),
        (f.transfer(2, 0, 1, 5), RejectReason::CantPayGasDeposit),
    ];
    for (tx, reason) in rejected {
        assert_eq!(f.ex.execute(&tx), Outcome::Rejected(reason));
    }
    // Signed with another key for account 0's address.
    let mut foreign = f.transfer(0, 1, 1, 5);
    foreign.public_key = f.keys[1].name;
    assert_eq!(
        f.ex.execute(&foreign),
        Outcome::Rejected(RejectReason::BadAuthenticationKey)
    );
    let stranger = KeyPair::from_seed(7);
    let mut unknown = f.transfer(0, 0, 1, 5);
    unknown.public_key = stranger.name;
    unknown.sender = Address::from_public_key(&stranger.name);
    assert_eq!(
        f.ex.execute(&unknown),
        Outcome::Rejected(RejectReason::NoAccount)
    );
    // Nothing rejected changed anything: no fee, no sequence number, no gas.
    assert_eq!(f.ex.state_digest(), digest);
    assert_eq!(f.ex.gas_used(), used);
    assert_eq!(f.sequence_number(0), 1);
    assert_eq!(f.sequence_number(2), 0);
}

#[test]
fn through_the_ledger_a_rejected_nonce_is_not_consumed() {
    let gas = GasParameters {
        max_gas: 1_000,
        gas_price: 1,
    };
    let f = fixture(&[BALANCE, gas.max_fee() - 1], gas);
    let keys: Vec<_> = f.keys.iter().map(|k| k.name).collect();
    let txs = [
        f.transfer(1, 0, 0, 1),
        f.transfer(1, 1, 0, 1),
        f.transfer(0, 0, 1, 100),
        f.transfer(0, 0, 1, 100),
        f.transfer(1, 0, 0, 1),
    ];
    let mut ledger = Ledger::new(f.ex, keys, 10);
    // Account 1 cannot pay for gas: nonce 0 is rejected, nonce 1 waits behind it.
    assert_eq!(ledger.apply(txs[0].clone()), Ok(vec![]));
    assert_eq!(ledger.apply(txs[1].clone()), Ok(vec![]));
    assert_eq!(ledger.next_nonce(&f.addresses[1]), Some(0));
    let stats = *ledger.stats();
    let rejected = DropReason::Rejected(RejectReason::CantPayGasDeposit);
    assert_eq!(stats.dropped.get(rejected), 1);
    assert_eq!(stats.backlog, 1);
    // Once funded, nonce 0 sent again runs, and unblocks nonce 1.
    assert_eq!(ledger.apply(txs[2].clone()).expect("apply").len(), 1);
    // A replay never reaches the prologue: the ledger drops it first.
    assert_eq!(ledger.apply(txs[3].clone()), Err(DropReason::StaleNonce));
    let done = ledger.apply(txs[4].clone()).expect("apply");
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|c| c.outcome == Outcome::Executed));
    for address in &f.addresses {
        assert_eq!(
            ledger.next_nonce(address),
            ledger.executor().sequence_number(address)
        );
    }
}

#[test]
fn an_entry_function_call_runs_under_the_same_prologue_gas_and_epilogue() {
    let gas = GasParameters::default();
    let mut f = fixture(&[BALANCE, BALANCE], gas);
    let mut tx = f.transfer(0, 0, 1, 5);
    tx.payload = Payload::MoveEntry {
        destination: f.addresses[1],
        amount: 5,
    };
    assert_eq!(f.ex.execute(&tx), Outcome::Executed);
    let fee = f.ex.gas_used();
    assert!(fee > 1, "the payload is metered: {fee}");
    assert_eq!(f.balance(0), BALANCE - 5 - fee);
    assert_eq!(f.balance(1), BALANCE + 5);
    assert_eq!(f.sequence_number(0), 1);
    assert_eq!(
        f.ex.execute(&tx),
        Outcome::Rejected(RejectReason::SequenceNumberTooOld)
    );
}

#[test]
fn without_metering_only_the_intrinsic_gas_is_charged() {
    let gas = GasParameters::default();
    let mut f = fixture(&[BALANCE, BALANCE], gas);
    f.ex = f.ex.without_gas_metering();
    assert_eq!(f.ex.execute(&f.transfer(0, 0, 1, 5)), Outcome::Executed);
    // 600 internal units: one started gas unit.
    assert_eq!(f.ex.gas_used(), 1);
    assert_eq!(f.balance(0), BALANCE - 5 - 1);
}

#[test]
fn other_payloads_are_rejected_without_a_fee() {
    let mut f = fixture(&[BALANCE, BALANCE], GasParameters::default());
    let mut tx = f.transfer(0, 0, 1, 1);
    tx.payload = Payload::Move {
        script: Bytes::from_static(b"not a script"),
        destination: f.addresses[1],
        amount: 1,
    };
    assert_eq!(
        f.ex.execute(&tx),
        Outcome::Rejected(RejectReason::ScriptNotAllowed)
    );
    tx.payload = Payload::Native {
        destination: f.addresses[1],
        amount: 1,
    };
    assert_eq!(
        f.ex.execute(&tx),
        Outcome::Rejected(RejectReason::WrongPayload)
    );
    assert_eq!(f.ex.fees_collected(), 0);
    assert_eq!(f.sequence_number(0), 0);
}
