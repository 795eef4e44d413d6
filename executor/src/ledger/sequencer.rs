//! The ledger's sequencing: every sender's next nonce and backlog, what runs when a transaction
//! arrives ([`Sequencer::sequence`]), and what it reports: the transactions that ran
//! ([`Completed`]) and the counters ([`LedgerStats`]).

use super::drops::{DropCounts, DropReason};
use crate::executor::Outcome;
use crate::transaction::{is_sample_nonce, sample_id, Address, Transaction};
use crypto::PublicKey;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

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

pub(super) struct SenderState {
    pub(super) public_key: PublicKey,
    pub(super) next_nonce: u64,
    pub(super) backlog: BTreeMap<u64, Transaction>,
}

/// The ledger's own state: every sender's next nonce and backlog, and the counters.
pub(super) struct Sequencer {
    pub(super) senders: FxHashMap<Address, SenderState>,
    pub(super) max_backlog_per_sender: usize,
    pub(super) stats: LedgerStats,
    /// Failed transactions by [`FailReason::as_str`](crate::FailReason::as_str).
    pub(super) failed_by_reason: BTreeMap<String, u64>,
}

impl Sequencer {
    /// Sequences `tx`, running what may run with `run`; counts a drop.
    pub(super) fn apply(
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

    pub(super) fn sequence(
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
