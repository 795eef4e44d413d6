//! `--exec=waves`: the block in levels of transactions that do not conflict by what they
//! declare (`conflicts.rs`), each level run on the worker threads against the state the levels
//! before it left, their writes applied after the level in index order; so the block leaves the
//! state sequential execution leaves.
//!
//! That holds only if the declarations hold: each transaction's reads (a recording resolver) and
//! writes (its change set) are checked against them, and a block with one that read or wrote
//! beyond its declaration is handed back, to run sequentially (counted as a fallback).

use super::conflicts::Conflicts;
use super::effects::Output;
use super::recording::{Overlay, RecordingView};
use super::workers::Workers;
use crate::executor::BlockTx;
use crate::move_vm::declared::Declared;
use crate::move_vm::logic::{FeeCredit, TransactionLogic};
use crate::move_vm::storage::{InMemoryStorage, StateKey};
use move_vm_runtime::move_vm::MoveVM;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The block's outputs in its order, levelled as `conflicts` says; `None` if a transaction broke
/// its declaration.
pub(super) fn run<L: TransactionLogic>(
    logic: &L,
    workers: &Workers,
    vm: &MoveVM,
    storage: &InMemoryStorage,
    block: &[BlockTx<'_>],
    fees: FeeCredit,
    conflicts: &Conflicts,
) -> Option<Vec<Output>> {
    let Conflicts { declared, levels } = conflicts;
    let mut overlay = Overlay::default();
    let mut outputs: Vec<Option<Output>> = (0..block.len()).map(|_| None).collect();
    for wave in levels {
        let ran: Vec<OnceLock<Option<Output>>> = wave.iter().map(|_| OnceLock::new()).collect();
        let run_one = |slot: usize, vm: &MoveVM| {
            let index = wave[slot];
            let view = RecordingView::new(storage, &overlay);
            let effects = logic.run(vm, &view, block[index].tx, fees);
            let reads = view.into_reads();
            let output = Output::of(effects, storage)
                .filter(|output| keeps_to(&declared[index], &reads, output));
            let _ = ran[slot].set(output);
        };
        if wave.len() == 1 || workers.threads() == 1 {
            // Nothing to run beside it: no reason to wake the workers.
            for slot in 0..wave.len() {
                run_one(slot, vm);
            }
        } else {
            let next = AtomicUsize::new(0);
            workers.broadcast(|_, vm| loop {
                let slot = next.fetch_add(1, Ordering::Relaxed);
                if slot >= wave.len() {
                    break;
                }
                run_one(slot, vm);
            });
        }
        for (&index, slot) in wave.iter().zip(ran) {
            let output = slot.into_inner().flatten()?;
            overlay.extend(output.writes.iter().cloned());
            outputs[index] = Some(output);
        }
    }
    outputs.into_iter().collect()
}

/// Whether a transaction read and wrote only what it declared.
fn keeps_to(declared: &Declared, reads: &[StateKey], output: &Output) -> bool {
    reads.iter().all(|key| declared.may_read(key))
        && output.writes.iter().all(|(key, _)| declared.may_write(key))
}
