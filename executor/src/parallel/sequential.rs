//! `--exec=sequential`: each transaction runs against the store with every earlier one's effects
//! applied, on the executor's thread, as the Move executors always ran. The reference the
//! parallel schemes must match.

use super::effects::BlockResult;
use crate::executor::{BlockTx, Outcome};
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
    let mut result = BlockResult {
        outcomes: Vec::with_capacity(block.len()),
        gas_used: 0,
    };
    let mut deferred_fees = 0u64;
    for entry in block {
        let effects = logic.run(vm, &*storage, entry.tx, fees);
        storage.apply(effects.changes);
        result.gas_used = result.gas_used.saturating_add(effects.gas_used);
        deferred_fees = deferred_fees.saturating_add(effects.deferred_fee);
        let stop = entry.stop_if_rejected && matches!(effects.outcome, Outcome::Rejected(_));
        result.outcomes.push(effects.outcome);
        if stop {
            break;
        }
    }
    (result, deferred_fees)
}
