//! `--exec=sequential`: each transaction runs against the store with every earlier one's effects
//! applied, on the executor's thread, as the Move executors always ran. The reference the
//! parallel schemes must match.

use super::effects::{BlockResult, BlockTally};
use crate::executor::BlockTx;
use crate::move_vm::logic::{FeeCredit, TransactionLogic};
use crate::move_vm::storage::InMemoryStorage;
use move_vm_runtime::move_vm::MoveVM;

/// Runs `block` and applies its effects; returns the result and the fees left to credit.
pub(super) fn run<L: TransactionLogic>(
    logic: &L,
    vm: &MoveVM,
    storage: &mut InMemoryStorage,
    block: &[BlockTx<'_>],
    fees: FeeCredit,
) -> (BlockResult, u64) {
    let mut tally = BlockTally::new(block);
    for entry in block {
        let effects = logic.run(vm, &*storage, entry.tx, fees);
        storage.apply(effects.changes);
        if tally.count(
            entry,
            effects.outcome,
            effects.gas_used,
            effects.deferred_fee,
        ) {
            break;
        }
    }
    tally.finish()
}
