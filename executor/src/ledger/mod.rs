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
use crate::transaction::{Address, Transaction};
use crypto::{Digest, PublicKey};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod drops;
mod plan;
mod sequencer;

pub use drops::{DropCounts, DropReason};
pub use sequencer::{Completed, LedgerStats};

use sequencer::{SenderState, Sequencer};

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

#[cfg(test)]
mod tests;
