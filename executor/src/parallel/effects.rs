//! A transaction's effects as the parallel schemes hold them until the block commits: its
//! writes by key, and committing a block's outputs in index order.

use crate::executor::{BlockTx, Outcome};
use crate::move_vm::logic::Effects;
use crate::move_vm::storage::{InMemoryStorage, StateKey};
use bytes::Bytes;
use move_core_types::effects::{ChangeSet, Op};

/// What a block's run left: the outcomes of the transactions that ran (the block, or its prefix
/// up to a rejection that ends it) and the gas they used.
pub(crate) struct BlockResult {
    pub(crate) outcomes: Vec<Outcome>,
    pub(crate) gas_used: u64,
}

/// A block's result, counted as its transactions commit in their order, and the fees they leave
/// to credit to the fee account after it.
pub(super) struct BlockTally {
    result: BlockResult,
    deferred_fees: u64,
}

impl BlockTally {
    pub(super) fn new(block: &[BlockTx<'_>]) -> Self {
        BlockTally {
            result: BlockResult {
                outcomes: Vec::with_capacity(block.len()),
                gas_used: 0,
            },
            deferred_fees: 0,
        }
    }

    /// Counts `entry`, the block's next transaction, committed; whether the block ends with it.
    pub(super) fn count(
        &mut self,
        entry: &BlockTx<'_>,
        outcome: Outcome,
        gas_used: u64,
        deferred_fee: u64,
    ) -> bool {
        self.result.gas_used = self.result.gas_used.saturating_add(gas_used);
        self.deferred_fees = self.deferred_fees.saturating_add(deferred_fee);
        let ends = entry.ends_block(&outcome);
        self.result.outcomes.push(outcome);
        ends
    }

    /// The block's result and the fees left to credit.
    pub(super) fn finish(self) -> (BlockResult, u64) {
        (self.result, self.deferred_fees)
    }
}

/// Resources written (`Some`) or deleted (`None`).
pub(super) type Writes = Vec<(StateKey, Option<Bytes>)>;

/// One transaction's result, not applied.
#[derive(Clone, Debug)]
pub(super) struct Output {
    pub(super) outcome: Outcome,
    pub(super) writes: Writes,
    pub(super) gas_used: u64,
    pub(super) deferred_fee: u64,
}

impl Output {
    /// `None` if the effects write what has no key: a resource type the store has not numbered,
    /// or a module (no transaction publishes one). The scheme then runs the block sequentially.
    pub(super) fn of(effects: Effects, storage: &InMemoryStorage) -> Option<Output> {
        Some(Output {
            writes: keyed(effects.changes, storage)?,
            outcome: effects.outcome,
            gas_used: effects.gas_used,
            deferred_fee: effects.deferred_fee,
        })
    }
}

fn keyed(changes: ChangeSet, storage: &InMemoryStorage) -> Option<Writes> {
    let mut writes = Writes::new();
    for (address, account) in changes.into_inner() {
        let (modules, resources) = account.into_inner();
        if !modules.is_empty() {
            return None;
        }
        for (tag, op) in resources {
            let key = storage.key(&address, &tag)?;
            let value = match op {
                Op::New(bytes) | Op::Modify(bytes) => Some(Bytes::from(bytes)),
                Op::Delete => None,
            };
            writes.push((key, value));
        }
    }
    Some(writes)
}

/// Applies `outputs` (one per entry of `block`, in its order) to `storage` in index order, up
/// to and including the first rejected entry that ends the block; returns the block's result
/// and the fees left to credit.
pub(super) fn commit(
    storage: &mut InMemoryStorage,
    block: &[BlockTx<'_>],
    outputs: impl IntoIterator<Item = Output>,
) -> (BlockResult, u64) {
    let mut tally = BlockTally::new(block);
    for (entry, output) in block.iter().zip(outputs) {
        for (key, value) in output.writes {
            storage.put(key, value);
        }
        if tally.count(entry, output.outcome, output.gas_used, output.deferred_fee) {
            break;
        }
    }
    tally.finish()
}
