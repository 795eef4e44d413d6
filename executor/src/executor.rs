//! What every executor offers the ledger: run one already-sequenced transaction or a block of
//! them, read a balance, and digest the whole state so replicas (and the two executors) can be
//! compared.

use crate::snapshot::SnapshotError;
use crate::transaction::{Address, Transaction};
use crypto::Digest;
use serde::Serialize;

/// Why a sequenced transaction changed nothing. The sender's nonce is consumed all the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailReason {
    InsufficientBalance,
    UnknownDestination,
    UnknownSender,
    /// The credit would overflow the destination's balance.
    Overflow,
    /// A native transaction sent to the Move executor or the other way round.
    WrongPayload,
    /// A Move transaction whose script is not the transfer script or its call's script.
    /// Executing arbitrary scripts without gas metering would let one transaction stall the
    /// executor forever.
    ScriptNotAllowed,
    /// A workload call larger than the bare VM runs unmetered (`workload::MAX_UNMETERED_SORT`
    /// and the like).
    Unbounded,
    /// SmallBank: checking (or checking and savings) below the amount.
    InsufficientFunds,
    /// A workload's own check failed (CpuHeavy's order, KvStore's read-back): a bug in the VM or
    /// the store, which the audit requires never to happen.
    InvariantViolated,
    /// The adapter's gas meter ran out: the payload's effects are discarded, the fee for all
    /// the gas is charged and the sequence number consumed.
    OutOfGas,
    /// Any other Move VM error (status code name).
    Vm(String),
}

impl FailReason {
    pub fn as_str(&self) -> &str {
        match self {
            FailReason::InsufficientBalance => "insufficient_balance",
            FailReason::UnknownDestination => "unknown_destination",
            FailReason::UnknownSender => "unknown_sender",
            FailReason::Overflow => "overflow",
            FailReason::WrongPayload => "wrong_payload",
            FailReason::ScriptNotAllowed => "script_not_allowed",
            FailReason::Unbounded => "unbounded",
            FailReason::InsufficientFunds => "insufficient_funds",
            FailReason::InvariantViolated => "invariant_violated",
            FailReason::OutOfGas => "out_of_gas",
            FailReason::Vm(status) => status,
        }
    }
}

/// Why the adapter's prologue discarded a transaction: it did not run, paid nothing and did not
/// consume its sequence number (Diem's "discarded" status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The sequence number was already used.
    SequenceNumberTooOld,
    /// The sequence number is ahead of the account's.
    SequenceNumberTooNew,
    /// The public key does not hash to the account's authentication key.
    BadAuthenticationKey,
    /// The balance does not cover max gas × gas price.
    CantPayGasDeposit,
    /// The sender has no `Account` resource.
    NoAccount,
    /// The script is not one the adapter runs (Diem: an unknown script is discarded).
    ScriptNotAllowed,
    /// A native transfer sent to the adapter.
    WrongPayload,
    /// The prologue failed some other way (a bug; counted so it shows).
    PrologueError,
}

impl RejectReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::SequenceNumberTooOld => "sequence_number_too_old",
            RejectReason::SequenceNumberTooNew => "sequence_number_too_new",
            RejectReason::BadAuthenticationKey => "bad_authentication_key",
            RejectReason::CantPayGasDeposit => "cant_pay_gas_deposit",
            RejectReason::NoAccount => "no_account",
            RejectReason::ScriptNotAllowed => "script_not_allowed",
            RejectReason::WrongPayload => "wrong_payload",
            RejectReason::PrologueError => "prologue_error",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Executed,
    /// Ran and failed: the nonce is consumed (and, under the adapter, the fee charged).
    Failed(FailReason),
    /// Did not run: the nonce is not consumed (the adapter's prologue only).
    Rejected(RejectReason),
}

impl Outcome {
    pub fn is_executed(&self) -> bool {
        matches!(self, Outcome::Executed)
    }
}

/// One transaction of a block, in the order the ledger sequenced the block.
#[derive(Clone, Copy, Debug)]
pub struct BlockTx<'a> {
    pub tx: &'a Transaction,
    /// The same block sends this transaction's nonce again later: if this one is rejected
    /// (it then consumed no nonce), that later copy runs in its own place, which the ledger's
    /// plan did not foresee, so the block must end here and the ledger plans the rest again.
    pub stop_if_rejected: bool,
}

impl BlockTx<'_> {
    /// Whether the block ends with this transaction, given what it did: it was rejected and
    /// must stop the block.
    pub fn ends_block(&self, outcome: &Outcome) -> bool {
        self.stop_if_rejected && matches!(outcome, Outcome::Rejected(_))
    }
}

/// What the parallel schemes did, cumulative (zero under sequential execution).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BlockStats {
    /// The scheme's worker threads (none under sequential execution).
    pub threads: u64,
    /// Blocks run, by any scheme.
    pub blocks: u64,
    /// Block-STM's executions beyond one per transaction: incarnations after an abort.
    pub reexecutions: u64,
    /// Block-STM validations that found a read changed and aborted the transaction.
    pub validation_aborts: u64,
    /// Block-STM executions that stopped on an estimate of a lower transaction and waited for it.
    pub dependency_waits: u64,
    /// Blocks a parallel scheme handed back to sequential execution (which ran them again from
    /// the start): under `waves`, a transaction read or wrote beyond its declared sets.
    pub sequential_fallbacks: u64,
    /// `waves`: conflict-free levels run (a block of independent transactions is one).
    pub waves: u64,
    /// Blocks a parallel scheme left to sequential execution from the start: their declared
    /// conflicts allowed fewer than two transactions a level (every transfer paying one account).
    pub contended_blocks: u64,
}

pub trait Executor {
    /// Runs `tx` against the state. The ledger has already checked the sender and the nonce;
    /// signatures are the verifier's business.
    fn execute(&mut self, tx: &Transaction) -> Outcome;

    /// Whether the ledger should hand this executor whole blocks ([`Executor::execute_block`],
    /// after planning them) rather than one transaction at a time. The ledger's plan assumes
    /// that a sender's transactions after one of theirs that was rejected are rejected too (the
    /// adapter's prologue finds the sequence number unchanged) and change nothing.
    fn runs_blocks(&self) -> bool {
        false
    }

    /// Runs `block` as if one transaction after another in its order, and returns the outcomes
    /// of those that ran: all of them, or up to and including the first one rejected that has
    /// `stop_if_rejected` (the rest must leave the state untouched).
    fn execute_block(&mut self, block: &[BlockTx<'_>]) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(block.len());
        for entry in block {
            let outcome = self.execute(entry.tx);
            let stop = entry.ends_block(&outcome);
            outcomes.push(outcome);
            if stop {
                break;
            }
        }
        outcomes
    }

    /// What the parallel schemes did so far.
    fn block_stats(&self) -> BlockStats {
        BlockStats::default()
    }

    /// The balance of `address`, or `None` if the account does not exist.
    fn balance(&self, address: &Address) -> Option<u64>;

    /// A digest of every balance in address order; equal states give equal digests whatever
    /// the executor.
    fn state_digest(&self) -> Digest;

    /// Fees collected so far (the adapter's fee account): the money that left the accounts
    /// without reaching another account, so balances plus fees stay the genesis supply.
    fn fees_collected(&self) -> u64 {
        0
    }

    /// Gas units used so far, all transactions together (zero without a gas meter).
    fn gas_used(&self) -> u64 {
        0
    }

    /// The whole state as bytes, equal on every node with an equal state (see `snapshot.rs`);
    /// what an executor built from the same genesis takes back with [`Executor::restore`].
    fn snapshot(&self) -> Result<Vec<u8>, SnapshotError>;

    /// Replaces the state with a snapshot's. On an error the state is unchanged.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotError>;

    /// Money held outside the coins (SmallBank's checking and savings), which counts in the
    /// supply: it came out of the coins and goes back into them.
    fn bank_holdings(&self) -> u128 {
        0
    }
}

/// The state digest both executors use: SHA-256 over `address || balance (u64 LE)` for every
/// account, sorted by address.
pub fn digest_balances(mut balances: Vec<(Address, u64)>) -> Digest {
    balances.sort_unstable_by_key(|(address, _)| *address);
    let amounts: Vec<[u8; 8]> = balances.iter().map(|(_, b)| b.to_le_bytes()).collect();
    Digest::of_parts(
        balances
            .iter()
            .zip(&amounts)
            .flat_map(|((address, _), amount)| [&address.0[..], &amount[..]]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_input_order_but_not_values() {
        let a = (Address([1; crate::transaction::ADDRESS_LEN]), 5);
        let b = (Address([2; crate::transaction::ADDRESS_LEN]), 6);
        assert_eq!(digest_balances(vec![a, b]), digest_balances(vec![b, a]));
        assert_ne!(
            digest_balances(vec![a, b]),
            digest_balances(vec![a, (b.0, 7)])
        );
    }
}
