//! Sequencing in front of an executor: each sender's transactions run in nonce order, once each.
//!
//! Consensus may deliver a sender's transactions out of order (two clients' batches, a batch
//! fetched late), so a nonce above the sender's next one waits in that sender's bounded backlog
//! until the gap closes; a nonce below it is a replay and is dropped. A failed transaction (say,
//! insufficient balance) still consumes its nonce, so the sender's later transactions can run.
//!
//! Under the adapter (`--vm=adapter`) the authority on sequence numbers is the `Account` resource
//! in Move, and the ledger's next nonce is its mirror: both advance exactly when a transaction
//! runs (executed or failed: the epilogue consumes the sequence number), and neither advances
//! when the prologue rejects one ([`Outcome::Rejected`]: counted as a drop by its reason, and
//! the sender's later transactions wait in the backlog as for any gap). So the backlog keeps
//! ordering each sender's transactions, and the prologue sees exactly the nonce it expects; a
//! replay never reaches it (the ledger drops it as stale first), which the prologue would
//! reject anyway.

use crate::executor::{Executor, Outcome, RejectReason};
use crate::genesis::Genesis;
use crate::snapshot::{self, SnapshotError};
#[cfg(test)]
use crate::transaction::SAMPLE_PERIOD;
use crate::transaction::{is_sample_nonce, sample_id, Address, Transaction};
use crypto::{Digest, PublicKey};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod plan;

/// Why a transaction was discarded without running (its nonce is not consumed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The nonce was already used.
    StaleNonce,
    /// The sender already has `max_backlog_per_sender` transactions waiting.
    BacklogFull,
    /// A transaction with this nonce is already waiting in the backlog.
    Duplicate,
    /// The sender is not a genesis account.
    UnknownAccount,
    /// The public key is not the sender account's key.
    BadAddress,
    /// The adapter's prologue discarded it.
    Rejected(RejectReason),
}

impl DropReason {
    pub const ALL: [DropReason; 13] = [
        DropReason::StaleNonce,
        DropReason::BacklogFull,
        DropReason::Duplicate,
        DropReason::UnknownAccount,
        DropReason::BadAddress,
        DropReason::Rejected(RejectReason::SequenceNumberTooOld),
        DropReason::Rejected(RejectReason::SequenceNumberTooNew),
        DropReason::Rejected(RejectReason::BadAuthenticationKey),
        DropReason::Rejected(RejectReason::CantPayGasDeposit),
        DropReason::Rejected(RejectReason::NoAccount),
        DropReason::Rejected(RejectReason::PrologueError),
        DropReason::Rejected(RejectReason::ScriptNotAllowed),
        DropReason::Rejected(RejectReason::WrongPayload),
    ];

    /// The key used in METRICS `dropped_by_reason`.
    pub fn as_str(&self) -> &'static str {
        match self {
            DropReason::StaleNonce => "stale_nonce",
            DropReason::BacklogFull => "backlog_full",
            DropReason::Duplicate => "duplicate",
            DropReason::UnknownAccount => "unknown_account",
            DropReason::BadAddress => "bad_address",
            DropReason::Rejected(reason) => reason.as_str(),
        }
    }
}

/// Dropped transactions by reason; serializes to the METRICS `dropped_by_reason` object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts {
    pub stale_nonce: u64,
    pub backlog_full: u64,
    pub duplicate: u64,
    pub unknown_account: u64,
    pub bad_address: u64,
    pub sequence_number_too_old: u64,
    pub sequence_number_too_new: u64,
    pub bad_authentication_key: u64,
    pub cant_pay_gas_deposit: u64,
    pub no_account: u64,
    pub prologue_error: u64,
    pub script_not_allowed: u64,
    pub wrong_payload: u64,
}

impl DropCounts {
    fn slot(&mut self, reason: DropReason) -> &mut u64 {
        match reason {
            DropReason::StaleNonce => &mut self.stale_nonce,
            DropReason::BacklogFull => &mut self.backlog_full,
            DropReason::Duplicate => &mut self.duplicate,
            DropReason::UnknownAccount => &mut self.unknown_account,
            DropReason::BadAddress => &mut self.bad_address,
            DropReason::Rejected(reason) => match reason {
                RejectReason::SequenceNumberTooOld => &mut self.sequence_number_too_old,
                RejectReason::SequenceNumberTooNew => &mut self.sequence_number_too_new,
                RejectReason::BadAuthenticationKey => &mut self.bad_authentication_key,
                RejectReason::CantPayGasDeposit => &mut self.cant_pay_gas_deposit,
                RejectReason::NoAccount => &mut self.no_account,
                RejectReason::PrologueError => &mut self.prologue_error,
                RejectReason::ScriptNotAllowed => &mut self.script_not_allowed,
                RejectReason::WrongPayload => &mut self.wrong_payload,
            },
        }
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        let mut copy = *self;
        *copy.slot(reason)
    }

    pub fn total(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.get(*r)).sum()
    }
}

/// Cumulative counters, plus the current backlog size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LedgerStats {
    /// Transactions that ran and changed the state.
    pub executed: u64,
    /// Transactions that ran and failed (nonce consumed, state unchanged).
    pub failed: u64,
    pub dropped: DropCounts,
    /// Transactions waiting in backlogs right now, all senders together.
    pub backlog: u64,
}

/// A transaction that ran (successfully or not), reported in execution order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    pub sender: Address,
    pub nonce: u64,
    pub outcome: Outcome,
}

impl Completed {
    pub fn is_sample(&self) -> bool {
        is_sample_nonce(&self.sender, self.nonce)
    }

    /// The id METRICS `samples` events use; only meaningful when [`Self::is_sample`].
    pub fn sample_id(&self) -> String {
        sample_id(&self.sender, self.nonce)
    }
}

struct SenderState {
    public_key: PublicKey,
    next_nonce: u64,
    backlog: BTreeMap<u64, Transaction>,
}

/// A ledger's state in a snapshot (see `snapshot.rs`): senders in address order, each backlog in
/// nonce order, the counters (so executed counts, and the audit's heights, continue where the
/// checkpoint's makers were) and the executor's own snapshot.
#[derive(Serialize, Deserialize)]
struct LedgerSnapshot {
    /// Senders with a nonce above zero or a backlog; every other sender is as at genesis.
    senders: Vec<(Address, u64, Vec<Transaction>)>,
    executed: u64,
    failed: u64,
    dropped: DropCounts,
    failed_by_reason: BTreeMap<String, u64>,
    executor: Vec<u8>,
}

pub struct Ledger<E> {
    executor: E,
    sequencer: Sequencer,
}

/// The ledger's own state: every sender's next nonce and backlog, and the counters.
struct Sequencer {
    senders: FxHashMap<Address, SenderState>,
    max_backlog_per_sender: usize,
    stats: LedgerStats,
    /// Failed transactions by [`FailReason::as_str`](crate::FailReason::as_str).
    failed_by_reason: BTreeMap<String, u64>,
}

impl<E: Executor> Ledger<E> {
    /// `accounts` are the keys of the accounts allowed to send (the genesis accounts). Keeping
    /// the key per account turns the address check into a key comparison instead of a hash.
    pub fn new(
        executor: E,
        accounts: impl IntoIterator<Item = PublicKey>,
        max_backlog_per_sender: usize,
    ) -> Self {
        let senders = accounts
            .into_iter()
            .map(|public_key| {
                let state = SenderState {
                    public_key,
                    next_nonce: 0,
                    backlog: BTreeMap::new(),
                };
                (Address::from_public_key(&public_key), state)
            })
            .collect();
        Ledger {
            executor,
            sequencer: Sequencer {
                senders,
                max_backlog_per_sender,
                stats: LedgerStats::default(),
                failed_by_reason: BTreeMap::new(),
            },
        }
    }

    pub fn from_genesis(executor: E, genesis: &Genesis, max_backlog_per_sender: usize) -> Self {
        Self::new(
            executor,
            genesis.accounts.iter().map(|a| a.public_key),
            max_backlog_per_sender,
        )
    }

    /// Sequences `tx`: drops it, queues it, or runs it followed by every backlogged transaction
    /// of the same sender it unblocks. What ran is appended to `done`, in execution order (a
    /// caller reuses `done` across calls so the hot path does not allocate).
    pub fn apply_into(
        &mut self,
        tx: Transaction,
        done: &mut Vec<Completed>,
    ) -> Result<(), DropReason> {
        let executor = &mut self.executor;
        self.sequencer
            .apply(tx, done, &mut |tx| executor.execute(tx))
    }

    /// [`Self::apply_into`] with a fresh vector: `Ok(empty)` means the transaction is waiting.
    pub fn apply(&mut self, tx: Transaction) -> Result<Vec<Completed>, DropReason> {
        let mut done = Vec::new();
        self.apply_into(tx, &mut done)?;
        Ok(done)
    }

    /// Sequences a committed batch in its order, with exactly the result of
    /// [`Self::apply_into`] on each transaction (drops are counted). An executor that runs
    /// blocks ([`Executor::runs_blocks`]) gets the batch whole: the ledger first plans it on its
    /// own state (`plan.rs`: which transactions run and in which order, which wait or are
    /// dropped), so that the executor sees only transactions that run, then sequences the batch
    /// for real, taking each outcome from the executor's result. A rejection (the adapter's
    /// prologue) consumes no nonce, which the plan could not know: the sender's transactions
    /// after it were rejected as too new (no effect) and go back to waiting; if the batch sends
    /// the rejected nonce again, the executor stops there and the rest is planned anew.
    pub fn execute_block(&mut self, mut txs: Vec<Transaction>, done: &mut Vec<Completed>) {
        if !self.executor.runs_blocks() {
            for tx in txs {
                // Drops are counted; nothing else to do with them here.
                let _ = self.apply_into(tx, done);
            }
            return;
        }
        while !txs.is_empty() {
            let (planned, outcomes) = {
                let plan = plan::plan(&self.sequencer, &txs);
                let outcomes = self.executor.execute_block(&plan.entries);
                (plan.identities(), outcomes)
            };
            // A block that ended early settled the arrivals up to the one its last transaction
            // came from; the rest are planned again on the state it left.
            let ran = outcomes.len();
            let stopped = ran > 0
                && planned[ran - 1].stop_if_rejected
                && matches!(outcomes[ran - 1], Outcome::Rejected(_));
            let settled = if stopped {
                planned[ran - 1].arrival + 1
            } else {
                txs.len()
            };
            let mut known: FxHashMap<(Address, u64), Outcome> = planned
                .iter()
                .zip(outcomes)
                .map(|(entry, outcome)| ((entry.sender, entry.nonce), outcome))
                .collect();
            for tx in txs.drain(..settled) {
                // Drops are counted; nothing else to do with them here.
                let _ = self.sequencer.apply(tx, done, &mut |tx| {
                    // What the sequencing runs was planned, and so ran (see `plan.rs`). Were it
                    // not, it did not run: reported as not run, a bug the counters would show.
                    known
                        .remove(&(tx.sender, tx.nonce))
                        .unwrap_or(Outcome::Rejected(RejectReason::PrologueError))
                });
            }
        }
    }

    /// Failed transactions by reason (`FailReason::as_str`), for METRICS `failed_by_reason`.
    pub fn failed_by_reason(&self) -> &BTreeMap<String, u64> {
        &self.sequencer.failed_by_reason
    }

    pub fn stats(&self) -> &LedgerStats {
        &self.sequencer.stats
    }

    pub fn state_digest(&self) -> Digest {
        self.executor.state_digest()
    }

    pub fn executor(&self) -> &E {
        &self.executor
    }

    pub fn balance(&self, address: &Address) -> Option<u64> {
        self.executor.balance(address)
    }

    /// The whole state: sequencing, counters and the executor's state.
    pub fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut senders: Vec<(Address, u64, Vec<Transaction>)> = self
            .sequencer
            .senders
            .iter()
            .filter(|(_, s)| s.next_nonce > 0 || !s.backlog.is_empty())
            .map(|(address, s)| {
                (
                    *address,
                    s.next_nonce,
                    s.backlog.values().cloned().collect(),
                )
            })
            .collect();
        senders.sort_unstable_by_key(|(address, _, _)| *address);
        snapshot::encode(&LedgerSnapshot {
            senders,
            executed: self.sequencer.stats.executed,
            failed: self.sequencer.stats.failed,
            dropped: self.sequencer.stats.dropped,
            failed_by_reason: self.sequencer.failed_by_reason.clone(),
            executor: self.executor.snapshot()?,
        })
    }

    /// Replaces the whole state with a snapshot's, taken by a ledger of the same genesis. On an
    /// error nothing changed.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        let snapshot: LedgerSnapshot = snapshot::decode(bytes)?;
        for (address, _, backlog) in &snapshot.senders {
            let Some(state) = self.sequencer.senders.get(address) else {
                return Err(SnapshotError::UnknownAccount(*address));
            };
            if backlog.iter().any(|tx| tx.public_key != state.public_key) {
                return Err(SnapshotError::Mismatch(format!(
                    "a backlogged transaction of {address:?} is not signed by its key"
                )));
            }
        }
        self.executor.restore(&snapshot.executor)?;
        for state in self.sequencer.senders.values_mut() {
            state.next_nonce = 0;
            state.backlog.clear();
        }
        let mut backlog = 0;
        for (address, next_nonce, txs) in snapshot.senders {
            if let Some(state) = self.sequencer.senders.get_mut(&address) {
                state.next_nonce = next_nonce;
                backlog += txs.len() as u64;
                state.backlog = txs.into_iter().map(|tx| (tx.nonce, tx)).collect();
            }
        }
        self.sequencer.stats = LedgerStats {
            executed: snapshot.executed,
            failed: snapshot.failed,
            dropped: snapshot.dropped,
            backlog,
        };
        self.sequencer.failed_by_reason = snapshot.failed_by_reason;
        Ok(())
    }

    /// The nonce `address` must use next, if it is a known account.
    pub fn next_nonce(&self, address: &Address) -> Option<u64> {
        self.sequencer.senders.get(address).map(|s| s.next_nonce)
    }
}

impl Sequencer {
    /// Sequences `tx`, running what may run with `run`; counts a drop.
    fn apply(
        &mut self,
        tx: Transaction,
        done: &mut Vec<Completed>,
        run: &mut impl FnMut(&Transaction) -> Outcome,
    ) -> Result<(), DropReason> {
        let result = self.sequence(tx, done, run);
        if let Err(reason) = result {
            *self.stats.dropped.slot(reason) += 1;
        }
        result
    }

    fn sequence(
        &mut self,
        tx: Transaction,
        done: &mut Vec<Completed>,
        run: &mut impl FnMut(&Transaction) -> Outcome,
    ) -> Result<(), DropReason> {
        let state = self
            .senders
            .get_mut(&tx.sender)
            .ok_or(DropReason::UnknownAccount)?;
        if state.public_key != tx.public_key {
            return Err(DropReason::BadAddress);
        }
        if tx.nonce < state.next_nonce {
            return Err(DropReason::StaleNonce);
        }
        if tx.nonce > state.next_nonce {
            if state.backlog.contains_key(&tx.nonce) {
                return Err(DropReason::Duplicate);
            }
            if state.backlog.len() >= self.max_backlog_per_sender {
                return Err(DropReason::BacklogFull);
            }
            state.backlog.insert(tx.nonce, tx);
            self.stats.backlog += 1;
            return Ok(());
        }

        let mut next = tx;
        loop {
            let outcome = run(&next);
            match outcome {
                Outcome::Rejected(reason) => {
                    // Not run: the nonce stays, and what waits behind it keeps waiting.
                    *self.stats.dropped.slot(DropReason::Rejected(reason)) += 1;
                    return Ok(());
                }
                Outcome::Executed => self.stats.executed += 1,
                Outcome::Failed(ref reason) => {
                    self.stats.failed += 1;
                    match self.failed_by_reason.get_mut(reason.as_str()) {
                        Some(count) => *count += 1,
                        None => {
                            self.failed_by_reason.insert(reason.as_str().to_string(), 1);
                        }
                    }
                }
            }
            done.push(Completed {
                sender: next.sender,
                nonce: next.nonce,
                outcome,
            });
            // Saturating: reaching 2^64 nonces is out of reach, and wrapping would allow replays.
            state.next_nonce = state.next_nonce.saturating_add(1);
            match state.backlog.first_entry() {
                Some(entry) if *entry.key() == state.next_nonce => {
                    next = entry.remove();
                    self.stats.backlog -= 1;
                }
                _ => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests;
