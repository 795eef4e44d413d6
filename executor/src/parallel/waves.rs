//! `--exec=waves`: the block in levels of transactions that do not conflict by what they
//! declare (`move_vm/declared.rs`), each level run on the worker threads against the state the
//! levels before it left, their writes applied after the level in index order.
//!
//! Levels: a transaction goes after every earlier one that writes a key it reads or writes
//! (it must see that write), and not before an earlier one that reads a key it writes (that one
//! must not see it); within a level every transaction reads the state as it was when the level
//! started, and the writes of one key come from levels in index order. So each transaction sees
//! exactly the writes of the lower-indexed transactions that sequential execution would show
//! it, and the block leaves the state sequential execution leaves.
//!
//! That holds only if the declarations hold: each transaction's reads (a recording resolver) and
//! writes (its change set) are checked against them, and a block with one that read or wrote
//! beyond its declaration is handed back, to run sequentially (counted as a fallback).

use super::effects::Output;
use super::recording::{Overlay, RecordingView};
use super::workers::Workers;
use crate::executor::BlockTx;
use crate::move_vm::declared::{Declared, DeclaredTypes};
use crate::move_vm::logic::{FeeCredit, TransactionLogic};
use crate::move_vm::storage::{InMemoryStorage, StateKey};
use move_vm_runtime::move_vm::MoveVM;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The block's outputs in its order, and how many levels it took; `None` if a transaction broke
/// its declaration.
pub(super) fn run<L: TransactionLogic>(
    logic: &L,
    workers: &Workers,
    vm: &MoveVM,
    storage: &InMemoryStorage,
    block: &[BlockTx<'_>],
    fees: FeeCredit,
) -> Option<(Vec<Output>, usize)> {
    let types = DeclaredTypes::of(storage)?;
    let declared: Vec<Declared> = block
        .iter()
        .map(|entry| logic.declare(entry.tx, &types, fees))
        .collect();
    let waves = levels(&declared);
    let mut overlay = Overlay::default();
    let mut outputs: Vec<Option<Output>> = (0..block.len()).map(|_| None).collect();
    for wave in &waves {
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
    let outputs = outputs.into_iter().collect::<Option<Vec<_>>>()?;
    Some((outputs, waves.len()))
}

/// Whether a transaction read and wrote only what it declared.
fn keeps_to(declared: &Declared, reads: &[StateKey], output: &Output) -> bool {
    reads.iter().all(|key| declared.may_read(key))
        && output.writes.iter().all(|(key, _)| declared.may_write(key))
}

/// The block's transactions by level, each level in index order (see the module documentation).
fn levels(declared: &[Declared]) -> Vec<Vec<usize>> {
    // Per key: the level of its last writer, and the highest level that reads it.
    let mut written: FxHashMap<StateKey, usize> = FxHashMap::default();
    let mut read: FxHashMap<StateKey, usize> = FxHashMap::default();
    let mut waves: Vec<Vec<usize>> = Vec::new();
    for (index, sets) in declared.iter().enumerate() {
        let after_writers = sets
            .reads
            .iter()
            .chain(&sets.writes)
            .filter_map(|key| written.get(key).map(|level| level + 1));
        let not_before_readers = sets.writes.iter().filter_map(|key| read.get(key).copied());
        let level = after_writers.chain(not_before_readers).max().unwrap_or(0);
        for key in &sets.writes {
            written.insert(*key, level);
        }
        for key in &sets.reads {
            let highest = read.entry(*key).or_insert(level);
            *highest = (*highest).max(level);
        }
        if waves.len() <= level {
            waves.resize_with(level + 1, Vec::new);
        }
        waves[level].push(index);
    }
    waves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> StateKey {
        StateKey::for_tests(n)
    }

    fn sets(reads: &[u8], writes: &[u8]) -> Declared {
        Declared {
            reads: reads.iter().map(|n| key(*n)).collect(),
            writes: writes.iter().map(|n| key(*n)).collect(),
        }
    }

    #[test]
    fn independent_transactions_share_a_level() {
        let block = [
            sets(&[], &[1]),
            sets(&[], &[2]),
            sets(&[3], &[]),
            sets(&[3], &[]),
        ];
        assert_eq!(levels(&block), vec![vec![0, 1, 2, 3]]);
    }

    #[test]
    fn a_reader_or_writer_of_a_written_key_goes_after_the_writer() {
        // 1 reads what 0 wrote, 2 writes it again, 3 only touches another key.
        let block = [
            sets(&[], &[1]),
            sets(&[1], &[]),
            sets(&[], &[1]),
            sets(&[], &[9]),
        ];
        assert_eq!(levels(&block), vec![vec![0, 3], vec![1, 2]]);
    }

    #[test]
    fn a_writer_never_goes_before_an_earlier_reader() {
        // 1 must see 0's write of key 1 (level 1); 2 writes key 2, which 1 reads: level 1 too,
        // where 1 reads the state from before it. A chain of writers is a level each.
        let block = [sets(&[], &[1]), sets(&[1, 2], &[]), sets(&[], &[2])];
        assert_eq!(levels(&block), vec![vec![0], vec![1, 2]]);
        let chain = [sets(&[], &[5]), sets(&[], &[5]), sets(&[], &[5])];
        assert_eq!(levels(&chain), vec![vec![0], vec![1], vec![2]]);
    }
}
