//! What a block's transactions declare they read and write (`move_vm/declared.rs`), levelled by
//! their conflicts: the plan `waves` runs, and how much of the block could run at once at all.
//!
//! Levels: a transaction goes after every earlier one that writes a key it reads or writes
//! (it must see that write), and not before an earlier one that reads a key it writes (that one
//! must not see it); within a level every transaction reads the state as it was when the level
//! started, and the writes of one key come from levels in index order. So each transaction sees
//! exactly the writes of the lower-indexed transactions that sequential execution would show
//! it, and the block leaves the state sequential execution leaves.
//!
//! The number of levels is the block's critical path: no scheme runs it in fewer steps than
//! that, whatever its threads. A block whose levels hold fewer than [`MIN_WIDTH`] transactions
//! on average (every transfer paying one hot account is a level of its own) has nothing to gain
//! from workers, and a parallel scheme only adds its bookkeeping: Block-STM executes nearly
//! every transaction again after an abort, waves record every read. The runner leaves such a
//! block to sequential execution (`contended_blocks`). Declarations decide only that choice
//! there; Block-STM's result never depends on them.

use crate::executor::BlockTx;
use crate::move_vm::declared::{Declared, DeclaredTypes};
use crate::move_vm::logic::{FeeCredit, TransactionLogic};
use crate::move_vm::storage::{InMemoryStorage, StateKey};
use rustc_hash::FxHashMap;

/// Transactions per level below which a block runs sequentially under any parallel scheme: at
/// fewer than two, at most one transaction in two could run beside another.
pub(super) const MIN_WIDTH: usize = 2;

/// A block's declarations and its levels.
pub(super) struct Conflicts {
    pub(super) declared: Vec<Declared>,
    pub(super) levels: Vec<Vec<usize>>,
}

impl Conflicts {
    /// `None` if the store has not numbered the types declarations name.
    pub(super) fn of<L: TransactionLogic>(
        logic: &L,
        storage: &InMemoryStorage,
        block: &[BlockTx<'_>],
        fees: FeeCredit,
    ) -> Option<Self> {
        let types = DeclaredTypes::of(storage)?;
        let declared: Vec<Declared> = block
            .iter()
            .map(|entry| logic.declare(entry.tx, &types, fees))
            .collect();
        let levels = levels(&declared);
        Some(Conflicts { declared, levels })
    }

    /// Whether the block is too contended to gain from running in parallel.
    pub(super) fn too_contended(&self) -> bool {
        self.declared.len() < MIN_WIDTH * self.levels.len()
    }
}

/// The block's transactions by level, each level in index order (see the module documentation).
pub(super) fn levels(declared: &[Declared]) -> Vec<Vec<usize>> {
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

    fn conflicts(block: &[Declared]) -> Conflicts {
        Conflicts {
            declared: block.to_vec(),
            levels: levels(block),
        }
    }

    #[test]
    fn a_chain_of_writers_of_one_key_is_too_contended_and_independent_ones_are_not() {
        let hot: Vec<Declared> = (0..8).map(|n| sets(&[], &[1, 10 + n])).collect();
        assert!(conflicts(&hot).too_contended());
        let independent: Vec<Declared> = (0..8).map(|n| sets(&[], &[10 + n])).collect();
        assert!(!conflicts(&independent).too_contended());
        // Two transactions a level on average is enough: half of them pay the hot key.
        let half: Vec<Declared> = (0..8)
            .map(|n| {
                if n % 2 == 0 {
                    sets(&[], &[1])
                } else {
                    sets(&[], &[10 + n])
                }
            })
            .collect();
        assert_eq!(levels(&half).len(), 4);
        assert!(!conflicts(&half).too_contended());
        assert!(!conflicts(&[]).too_contended());
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
