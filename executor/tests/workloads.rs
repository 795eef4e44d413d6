//! Every workload under both VMs and both payload kinds, through the ledger as a node runs them:
//! each call has the effects it should, failures are the expected ones, and the money (coins,
//! SmallBank's checking and savings, and the adapter's fees) stays the genesis supply.

use crypto::KeyPair;
use executor::{
    AdapterExecutor, Address, Call, CallStyle, Executor, FailReason, GasParameters, Ledger,
    MoveExecutor, Outcome, Payload, Procedure, RejectReason, Transaction, Workload,
    MAX_UNMETERED_KEYS, MAX_UNMETERED_SORT,
};

const ACCOUNTS: usize = 3;
const BALANCE: u64 = 100_000_000;

/// What the tests read from either VM beyond the `Executor` trait.
trait MoveState: Executor {
    fn bank(&self, address: &Address) -> Option<(u64, u64)>;
    fn resources(&self) -> usize;
}

impl MoveState for MoveExecutor {
    fn bank(&self, address: &Address) -> Option<(u64, u64)> {
        self.bank_account(address)
    }
    fn resources(&self) -> usize {
        self.storage().resource_count()
    }
}

impl MoveState for AdapterExecutor {
    fn bank(&self, address: &Address) -> Option<(u64, u64)> {
        self.bank_account(address)
    }
    fn resources(&self) -> usize {
        self.storage().resource_count()
    }
}

/// Genesis accounts, a ledger in front of one VM, and each sender's next nonce.
struct Chain<E> {
    ledger: Ledger<E>,
    keys: Vec<KeyPair>,
    addresses: Vec<Address>,
    nonces: Vec<u64>,
    style: CallStyle,
}

fn keys() -> Vec<KeyPair> {
    (0..ACCOUNTS as u64)
        .map(|i| KeyPair::from_seed(50 + i))
        .collect()
}

fn bare(workload: Workload, style: CallStyle) -> Chain<MoveExecutor> {
    let keys = keys();
    let accounts = keys
        .iter()
        .map(|k| (Address::from_public_key(&k.name), BALANCE));
    let executor = MoveExecutor::with_workload(accounts, workload).expect("genesis");
    Chain::new(executor, keys, style)
}

fn adapter(workload: Workload, style: CallStyle, gas: GasParameters) -> Chain<AdapterExecutor> {
    let keys = keys();
    let accounts = keys.iter().map(|k| (k.name, BALANCE));
    let executor = AdapterExecutor::with_workload(accounts, gas, workload).expect("genesis");
    Chain::new(executor, keys, style)
}

impl<E: MoveState> Chain<E> {
    fn new(executor: E, keys: Vec<KeyPair>, style: CallStyle) -> Self {
        let addresses = keys
            .iter()
            .map(|k| Address::from_public_key(&k.name))
            .collect();
        Chain {
            ledger: Ledger::new(executor, keys.iter().map(|k| k.name), 10),
            keys,
            addresses,
            nonces: vec![0; ACCOUNTS],
            style,
        }
    }

    fn payload(&self, call: Call) -> Payload {
        match self.style {
            CallStyle::Script => Payload::WorkloadScript {
                script: call.script().expect("script"),
                call,
            },
            CallStyle::Entry => Payload::WorkloadEntry { call },
        }
    }

    /// Sends `call` from account `from` with its next nonce; the outcome of that transaction.
    fn send(&mut self, from: usize, call: Call) -> Outcome {
        let payload = self.payload(call);
        self.send_payload(from, payload)
    }

    fn send_payload(&mut self, from: usize, payload: Payload) -> Outcome {
        let tx = Transaction::unsigned(self.keys[from].name, self.nonces[from], payload);
        match self.ledger.apply(tx) {
            Ok(done) => {
                assert_eq!(done.len(), 1, "{done:?}");
                self.nonces[from] += 1;
                done[0].outcome.clone()
            }
            Err(reason) => panic!("dropped: {reason:?}"),
        }
    }

    fn executor(&self) -> &E {
        self.ledger.executor()
    }

    fn coin(&self, i: usize) -> u64 {
        self.executor().balance(&self.addresses[i]).expect("coin")
    }

    fn bank(&self, i: usize) -> (u64, u64) {
        self.executor().bank(&self.addresses[i]).expect("bank")
    }

    /// Coins, bank holdings and fees: what no transaction may change.
    fn money(&self) -> u128 {
        let coins: u128 = (0..ACCOUNTS).map(|i| u128::from(self.coin(i))).sum();
        coins + self.executor().bank_holdings() + u128::from(self.executor().fees_collected())
    }

    fn fees(&self) -> u64 {
        self.executor().fees_collected()
    }
}

const STYLES: [CallStyle; 2] = [CallStyle::Script, CallStyle::Entry];

/// Runs `check` on a fresh chain of `workload` under each VM and each payload kind.
fn under_every_vm(workload: Workload, check: impl Fn(&mut dyn Check)) {
    for style in STYLES {
        check(&mut bare(workload, style));
        check(&mut adapter(workload, style, GasParameters::default()));
    }
}

/// The chain operations the checks use, object-safe so one check runs under both VMs.
trait Check {
    fn send(&mut self, from: usize, call: Call) -> Outcome;
    fn coin(&self, i: usize) -> u64;
    fn bank(&self, i: usize) -> (u64, u64);
    fn money(&self) -> u128;
    fn fees(&self) -> u64;
    fn digest(&self) -> crypto::Digest;
    fn resources(&self) -> usize;
    fn address(&self, i: usize) -> Address;
    fn metered(&self) -> bool;
}

impl<E: MoveState> Check for Chain<E> {
    fn send(&mut self, from: usize, call: Call) -> Outcome {
        Chain::send(self, from, call)
    }
    fn coin(&self, i: usize) -> u64 {
        Chain::coin(self, i)
    }
    fn bank(&self, i: usize) -> (u64, u64) {
        Chain::bank(self, i)
    }
    fn money(&self) -> u128 {
        Chain::money(self)
    }
    fn fees(&self) -> u64 {
        Chain::fees(self)
    }
    fn digest(&self) -> crypto::Digest {
        self.executor().state_digest()
    }
    fn resources(&self) -> usize {
        self.executor().resources()
    }
    fn address(&self, i: usize) -> Address {
        self.addresses[i]
    }
    fn metered(&self) -> bool {
        self.executor().gas_used() > 0
    }
}

const SUPPLY: u128 = ACCOUNTS as u128 * BALANCE as u128;

#[test]
fn donothing_changes_nothing_but_the_fee() {
    under_every_vm(Workload::DoNothing, |chain| {
        let digest = chain.digest();
        let coin = chain.coin(0);
        assert_eq!(chain.send(0, Call::DoNothing), Outcome::Executed);
        let fee = chain.fees();
        assert_eq!(chain.coin(0), coin - fee);
        if chain.metered() {
            assert!(fee > 0);
        } else {
            assert_eq!(chain.digest(), digest);
        }
        assert_eq!(chain.money(), SUPPLY);
    });
}

#[test]
fn cpuheavy_sorts_without_storing_anything() {
    under_every_vm(Workload::CpuHeavy, |chain| {
        let resources = chain.resources();
        for length in [0, 1, 2, 3, 128, 1_000] {
            assert_eq!(
                chain.send(0, Call::CpuHeavy { length }),
                Outcome::Executed,
                "{length}"
            );
        }
        assert_eq!(chain.resources(), resources);
        assert_eq!(chain.money(), SUPPLY);
    });
}

#[test]
fn cpuheavy_gas_grows_with_the_length() {
    for style in STYLES {
        let mut chain = adapter(Workload::CpuHeavy, style, GasParameters::default());
        let mut fees = Vec::new();
        for length in [10, 100, 1_000] {
            let before = chain.fees();
            assert_eq!(chain.send(0, Call::CpuHeavy { length }), Outcome::Executed);
            fees.push(chain.fees() - before);
        }
        // Sorting is n log n: from 100 to 1,000 numbers adds ten times or more the gas that
        // going from 10 to 100 added (the intrinsic gas is the same for all three).
        assert!(
            fees[0] < fees[1] && fees[2] - fees[1] > 8 * (fees[1] - fees[0]),
            "{fees:?}"
        );
    }
}

#[test]
fn cpuheavy_beyond_the_gas_limit_runs_out_of_gas_and_pays_for_all_of_it() {
    let gas = GasParameters {
        max_gas: 10_000,
        gas_price: 2,
    };
    for style in STYLES {
        let mut chain = adapter(Workload::CpuHeavy, style, gas);
        let (coin, other) = (chain.coin(0), chain.coin(1));
        let outcome = chain.send(0, Call::CpuHeavy { length: 100_000 });
        assert_eq!(outcome, Outcome::Failed(FailReason::OutOfGas));
        assert_eq!(chain.fees(), gas.max_fee());
        assert_eq!(chain.coin(0), coin - gas.max_fee());
        assert_eq!(chain.coin(1), other);
        // The sequence number is consumed: the next transaction runs.
        assert_eq!(
            chain.executor().sequence_number(&chain.addresses[0]),
            Some(1)
        );
        assert_eq!(
            chain.send(0, Call::CpuHeavy { length: 8 }),
            Outcome::Executed
        );
        assert_eq!(chain.money(), SUPPLY);
    }
}

#[test]
fn the_bare_vm_refuses_calls_it_could_not_bound() {
    for style in STYLES {
        let mut chain = bare(Workload::CpuHeavy, style);
        let digest = chain.executor().state_digest();
        let long = Call::CpuHeavy {
            length: MAX_UNMETERED_SORT + 1,
        };
        assert_eq!(chain.send(0, long), Outcome::Failed(FailReason::Unbounded));
        let many = Call::KvStore {
            first_key: 0,
            keys: MAX_UNMETERED_KEYS + 1,
            value_size: 1,
            version: 0,
        };
        assert_eq!(chain.send(0, many), Outcome::Failed(FailReason::Unbounded));
        assert_eq!(chain.executor().state_digest(), digest);
    }
}

#[test]
fn kvstore_writes_its_keys_once_and_rewrites_them_in_place() {
    under_every_vm(Workload::KvStore, |chain| {
        let write = |first_key, version| Call::KvStore {
            first_key,
            keys: 4,
            value_size: 32,
            version,
        };
        let resources = chain.resources();
        assert_eq!(chain.send(0, write(0, 0)), Outcome::Executed);
        // Four keys, four new slots.
        assert_eq!(chain.resources(), resources + 4);
        let digest = chain.digest();
        // The same keys again with another version: rewritten, not added, and the state changed.
        assert_eq!(chain.send(0, write(0, 1)), Outcome::Executed);
        assert_eq!(chain.resources(), resources + 4);
        assert_ne!(chain.digest(), digest);
        // Overlapping keys of the same owner: two new ones; the same keys of another owner are
        // that owner's own.
        assert_eq!(chain.send(0, write(2, 2)), Outcome::Executed);
        assert_eq!(chain.resources(), resources + 6);
        assert_eq!(chain.send(1, write(0, 0)), Outcome::Executed);
        assert_eq!(chain.resources(), resources + 10);
        assert_eq!(chain.money(), SUPPLY);
    });
}

#[test]
fn smallbank_procedures_move_money_without_creating_any() {
    under_every_vm(Workload::SmallBank, |chain| {
        let open = BALANCE / 4;
        assert_eq!(chain.bank(0), (open, open));
        assert_eq!(chain.money(), SUPPLY);
        let (a, b) = (0, 1);
        let to = chain.address(b);
        let bank = Call::SmallBank;

        let (coin, fees) = (chain.coin(a), chain.fees());
        let outcome = chain.send(a, bank(Procedure::DepositChecking { amount: 10 }));
        assert_eq!(outcome, Outcome::Executed);
        assert_eq!(chain.bank(a), (open + 10, open));
        assert_eq!(chain.coin(a), coin - 10 - (chain.fees() - fees));

        let outcome = chain.send(a, bank(Procedure::TransactSavings { amount: 5 }));
        assert_eq!(outcome, Outcome::Executed);
        assert_eq!(chain.bank(a), (open + 10, open + 5));

        let outcome = chain.send(a, bank(Procedure::SendPayment { to, amount: 7 }));
        assert_eq!(outcome, Outcome::Executed);
        assert_eq!(chain.bank(a), (open + 3, open + 5));
        assert_eq!(chain.bank(b), (open + 7, open));

        // More than checking holds: the rest comes out of savings, into the coin.
        let (coin, fees) = (chain.coin(a), chain.fees());
        let outcome = chain.send(a, bank(Procedure::WriteCheck { amount: open + 4 }));
        assert_eq!(outcome, Outcome::Executed);
        assert_eq!(chain.bank(a), (0, open + 4));
        assert_eq!(chain.coin(a), coin + open + 4 - (chain.fees() - fees));

        let outcome = chain.send(a, bank(Procedure::Balance));
        assert_eq!(outcome, Outcome::Executed);
        assert_eq!(chain.bank(a), (0, open + 4));

        let outcome = chain.send(a, bank(Procedure::Amalgamate { to }));
        assert_eq!(outcome, Outcome::Executed);
        assert_eq!(chain.bank(a), (0, 0));
        assert_eq!(chain.bank(b), (2 * open + 11, open));

        // Nothing left to pay with: the procedures that spend the bank's money abort.
        let outcome = chain.send(a, bank(Procedure::SendPayment { to, amount: 1 }));
        assert_eq!(outcome, Outcome::Failed(FailReason::InsufficientFunds));
        let outcome = chain.send(a, bank(Procedure::WriteCheck { amount: 1 }));
        assert_eq!(outcome, Outcome::Failed(FailReason::InsufficientFunds));
        // A deposit beyond the coin aborts in the coin.
        let outcome = chain.send(a, bank(Procedure::DepositChecking { amount: BALANCE }));
        assert_eq!(outcome, Outcome::Failed(FailReason::InsufficientBalance));
        assert_eq!(chain.bank(a), (0, 0));
        assert_eq!(chain.money(), SUPPLY);
    });
}

#[test]
fn the_transfer_workload_opens_no_bank() {
    let chain = bare(Workload::Transfer, CallStyle::Entry);
    assert_eq!(chain.executor().bank(&chain.addresses[0]), None);
    assert_eq!(chain.executor().bank_holdings(), 0);
    let chain = bare(Workload::SmallBank, CallStyle::Entry);
    assert_eq!(
        chain.executor().bank_holdings(),
        ACCOUNTS as u128 * 2 * u128::from(BALANCE / 4)
    );
}

#[test]
fn a_script_runs_only_its_own_call() {
    let call = Call::SmallBank(Procedure::Balance);
    let wrong = Payload::WorkloadScript {
        script: Call::DoNothing.script().expect("script"),
        call,
    };
    let mut chain = bare(Workload::SmallBank, CallStyle::Script);
    assert_eq!(
        chain.send_payload(0, wrong.clone()),
        Outcome::Failed(FailReason::ScriptNotAllowed)
    );
    let mut chain = adapter(
        Workload::SmallBank,
        CallStyle::Script,
        GasParameters::default(),
    );
    let tx = Transaction::unsigned(chain.keys[0].name, 0, wrong);
    assert_eq!(chain.ledger.apply(tx), Ok(vec![]));
    assert_eq!(
        chain
            .ledger
            .stats()
            .dropped
            .get(executor::DropReason::Rejected(
                RejectReason::ScriptNotAllowed
            )),
        1
    );
}

#[test]
fn scripts_and_entry_calls_reach_the_same_state() {
    for workload in [Workload::KvStore, Workload::SmallBank] {
        let mut digests = Vec::new();
        for style in STYLES {
            let mut chain = bare(workload, style);
            let load = executor::Load::new(workload, None, style).expect("load");
            for nonce in 0..50 {
                for from in 0..ACCOUNTS {
                    let (sender, next) = (
                        chain.addresses[from],
                        chain.addresses[(from + 1) % ACCOUNTS],
                    );
                    let payload = load.payload(&sender, next, nonce);
                    let outcome = chain.send_payload(from, payload);
                    assert!(
                        matches!(
                            outcome,
                            Outcome::Executed | Outcome::Failed(FailReason::InsufficientFunds)
                        ),
                        "{outcome:?}"
                    );
                }
            }
            assert_eq!(chain.money(), SUPPLY);
            digests.push(chain.executor().state_digest());
        }
        assert_eq!(digests[0], digests[1], "{workload}");
    }
}
