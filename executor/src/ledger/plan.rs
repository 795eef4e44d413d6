//! The plan of a batch: what the ledger's sequencing would run, in which order, if nothing were
//! rejected, worked out on the ledger's state without changing it. An executor that runs blocks
//! gets the planned transactions as one block, and a parallel scheme sees only transactions that
//! run, in the order sequential execution would run them.
//!
//! The plan follows the sequencing rule for rule (`Sequencer::sequence`): a nonce below the
//! sender's next is stale, above it waits (unless a duplicate or the backlog is full), at it
//! runs and releases what waits behind it. Each sender's next nonce and backlog are tracked in
//! an overlay that starts from the ledger's: the sender's planned next nonce, and what the batch
//! itself queued.
//!
//! Why running the plan and then sequencing for real with its outcomes is exact: the two
//! diverge only after a rejection, which consumes no nonce. The rejected sender's later planned
//! transactions then meet a sequence number that did not advance and are rejected as too new
//! (no effect); sequencing keeps them waiting instead. Only a copy of the rejected nonce sent
//! later in the batch would run where the plan saw a stale nonce: the plan marks the rejected
//! transaction `stop_if_rejected`, the executor ends the block there, and the rest of the batch
//! is planned again.

use super::sequencer::{SenderState, Sequencer};
use crate::executor::BlockTx;
use crate::transaction::{Address, Transaction};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

pub(super) struct Plan<'a> {
    /// The block, in execution order.
    pub(super) entries: Vec<BlockTx<'a>>,
    /// For each entry, the index in the batch of the transaction whose arrival ran it.
    arrivals: Vec<usize>,
}

/// Who an entry of the plan is, once the plan (which borrows the batch and the backlogs) is gone.
pub(super) struct Planned {
    pub(super) sender: Address,
    pub(super) nonce: u64,
    pub(super) arrival: usize,
    pub(super) stop_if_rejected: bool,
}

impl Plan<'_> {
    pub(super) fn identities(&self) -> Vec<Planned> {
        self.entries
            .iter()
            .zip(&self.arrivals)
            .map(|(entry, arrival)| Planned {
                sender: entry.tx.sender,
                nonce: entry.tx.nonce,
                arrival: *arrival,
                stop_if_rejected: entry.stop_if_rejected,
            })
            .collect()
    }
}

/// A sender as the plan has it so far.
struct Overlay<'a> {
    state: &'a SenderState,
    /// The next nonce once everything planned so far has run.
    next_nonce: u64,
    /// What the batch put in the backlog and is still waiting there.
    queued: BTreeMap<u64, &'a Transaction>,
    /// The plan's entries of this sender: nonce `state.next_nonce + i` is `entries[planned[i]]`.
    planned: Vec<usize>,
}

impl<'a> Overlay<'a> {
    fn new(state: &'a SenderState) -> Self {
        Overlay {
            state,
            next_nonce: state.next_nonce,
            queued: BTreeMap::new(),
            planned: Vec::new(),
        }
    }

    /// Whether `nonce` (above the next one) already waits.
    fn waiting(&self, nonce: u64) -> bool {
        self.queued.contains_key(&nonce) || self.state.backlog.contains_key(&nonce)
    }

    /// How many wait: the ledger's backlog that was not released, and what the batch queued.
    fn backlog(&self) -> usize {
        self.state.backlog.range(self.next_nonce..).count() + self.queued.len()
    }

    /// Takes the transaction waiting for the next nonce, if any.
    fn release(&mut self) -> Option<&'a Transaction> {
        if let Some(tx) = self.queued.remove(&self.next_nonce) {
            return Some(tx);
        }
        self.state.backlog.get(&self.next_nonce)
    }
}

pub(super) fn plan<'a>(sequencer: &'a Sequencer, batch: &'a [Transaction]) -> Plan<'a> {
    let mut plan = Plan {
        entries: Vec::with_capacity(batch.len()),
        arrivals: Vec::with_capacity(batch.len()),
    };
    let mut senders: FxHashMap<Address, Overlay<'a>> = FxHashMap::default();
    for (arrival, tx) in batch.iter().enumerate() {
        let Some(state) = sequencer.senders.get(&tx.sender) else {
            continue;
        };
        if state.public_key != tx.public_key {
            continue;
        }
        let sender = senders
            .entry(tx.sender)
            .or_insert_with(|| Overlay::new(state));
        if tx.nonce < sender.next_nonce {
            // Stale; if only since a planned transaction took the nonce, that one must end the
            // block should it be rejected, as this copy would then run.
            if let Some(index) = tx
                .nonce
                .checked_sub(state.next_nonce)
                .and_then(|i| sender.planned.get(i as usize))
            {
                plan.entries[*index].stop_if_rejected = true;
            }
            continue;
        }
        if tx.nonce > sender.next_nonce {
            if !sender.waiting(tx.nonce) && sender.backlog() < sequencer.max_backlog_per_sender {
                sender.queued.insert(tx.nonce, tx);
            }
            continue;
        }
        let mut next = tx;
        loop {
            sender.planned.push(plan.entries.len());
            plan.entries.push(BlockTx {
                tx: next,
                stop_if_rejected: false,
            });
            plan.arrivals.push(arrival);
            sender.next_nonce = sender.next_nonce.saturating_add(1);
            match sender.release() {
                Some(waiting) => next = waiting,
                None => break,
            }
        }
    }
    plan
}
