//! Block-STM's multi-version memory (the paper's Algorithm 2): for every key, the value each
//! transaction of the block wrote to it, or an estimate where an aborted incarnation wrote and
//! the next one probably will. A transaction reads the value of the highest transaction below
//! it that wrote the key, or the store when none did; it records where each read came from, and
//! a validation reads again and compares.
//!
//! The keys are spread over a [`DashMap`]'s shards (read-write locks), each key's versions in a
//! vector sorted by transaction (most keys have one or two writers in a block, where a tree
//! would cost a node allocation per key): a read takes a shard's read lock, a write its write
//! lock, so threads touching different keys rarely meet, and a hot key serialises only its own
//! readers and writers. One memory serves block after block, cleared in between, so its tables
//! and per-transaction sets keep their allocations.

use crate::move_vm::storage::StateKey;
use bytes::Bytes;
use dashmap::DashMap;
use rustc_hash::FxBuildHasher;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A transaction's position in the block.
pub(super) type TxnIndex = u32;
/// How many times a transaction started executing before this run (0 for the first).
pub(super) type Incarnation = u32;

/// Where a read's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// No transaction below wrote the key: the store.
    Storage,
    /// What this incarnation of that transaction wrote.
    Written(TxnIndex, Incarnation),
}

/// What a read finds.
#[derive(Debug)]
pub(super) enum Read {
    Value(Origin, Option<Bytes>),
    /// Nothing below wrote it: read the store.
    Storage,
    /// A transaction below was aborted and will probably write the key again: wait for it.
    Estimate(TxnIndex),
}

#[derive(Clone, Debug)]
enum Entry {
    Written {
        incarnation: Incarnation,
        value: Option<Bytes>,
    },
    Estimate,
}

/// The versions of one key, by transaction.
#[derive(Debug, Default)]
struct Versions(Vec<(TxnIndex, Entry)>);

impl Versions {
    fn insert(&mut self, txn: TxnIndex, entry: Entry) {
        match self.0.binary_search_by_key(&txn, |(writer, _)| *writer) {
            Ok(at) => self.0[at].1 = entry,
            Err(at) => self.0.insert(at, (txn, entry)),
        }
    }

    fn remove(&mut self, txn: TxnIndex) {
        if let Ok(at) = self.0.binary_search_by_key(&txn, |(writer, _)| *writer) {
            self.0.remove(at);
        }
    }

    /// The entry of the highest transaction below `txn`.
    fn below(&self, txn: TxnIndex) -> Option<&(TxnIndex, Entry)> {
        let at = self.0.partition_point(|(writer, _)| *writer < txn);
        at.checked_sub(1).map(|at| &self.0[at])
    }
}

pub(super) struct MvMemory {
    data: DashMap<StateKey, Versions, FxBuildHasher>,
    /// The keys each transaction's last incarnation wrote.
    written: Vec<Mutex<Vec<StateKey>>>,
    /// What each transaction's last incarnation read, and from where.
    reads: Vec<Mutex<Vec<(StateKey, Origin)>>>,
}

impl MvMemory {
    pub(super) fn new(size: usize) -> Self {
        let mut memory = MvMemory {
            data: DashMap::with_hasher(FxBuildHasher),
            written: Vec::new(),
            reads: Vec::new(),
        };
        memory.reset(size);
        memory
    }

    /// Empties the memory for a block of `size` transactions.
    pub(super) fn reset(&mut self, size: usize) {
        self.data.clear();
        for sets in &mut self.written {
            lock_mut(sets).clear();
        }
        for sets in &mut self.reads {
            lock_mut(sets).clear();
        }
        self.written
            .resize_with(size.max(self.written.len()), Default::default);
        self.reads
            .resize_with(size.max(self.reads.len()), Default::default);
    }

    /// Stores what an incarnation read and wrote, and removes what its previous incarnation
    /// wrote that this one did not; returns whether it wrote a key the previous one did not
    /// (a transaction above may have read that key from below this one: validate them again).
    pub(super) fn record(
        &self,
        txn: TxnIndex,
        incarnation: Incarnation,
        reads: Vec<(StateKey, Origin)>,
        writes: &[(StateKey, Option<Bytes>)],
    ) -> bool {
        for (key, value) in writes {
            self.data.entry(*key).or_default().insert(
                txn,
                Entry::Written {
                    incarnation,
                    value: value.clone(),
                },
            );
        }
        let mut written = lock(&self.written[txn as usize]);
        for stale in written
            .iter()
            .filter(|key| !writes.iter().any(|(written, _)| written == *key))
        {
            if let Some(mut versions) = self.data.get_mut(stale) {
                versions.remove(txn);
            }
        }
        let wrote_new_key = writes.iter().any(|(key, _)| !written.contains(key));
        written.clear();
        written.extend(writes.iter().map(|(key, _)| *key));
        *lock(&self.reads[txn as usize]) = reads;
        wrote_new_key
    }

    /// After an abort: what the aborted incarnation wrote becomes estimates, so that readers
    /// wait for the next incarnation instead of reading values that are probably wrong.
    pub(super) fn convert_writes_to_estimates(&self, txn: TxnIndex) {
        for key in lock(&self.written[txn as usize]).iter() {
            if let Some(mut versions) = self.data.get_mut(key) {
                versions.insert(txn, Entry::Estimate);
            }
        }
    }

    /// What `txn` reads at `key`: the write of the highest transaction below it.
    pub(super) fn read(&self, key: &StateKey, txn: TxnIndex) -> Read {
        let Some(versions) = self.data.get(key) else {
            return Read::Storage;
        };
        match versions.below(txn) {
            None => Read::Storage,
            Some((writer, Entry::Estimate)) => Read::Estimate(*writer),
            Some((writer, Entry::Written { incarnation, value })) => {
                Read::Value(Origin::Written(*writer, *incarnation), value.clone())
            }
        }
    }

    /// Whether every read of `txn`'s last incarnation would still find what it found.
    pub(super) fn validate_read_set(&self, txn: TxnIndex) -> bool {
        lock(&self.reads[txn as usize])
            .iter()
            .all(|(key, origin)| match self.read(key, txn) {
                Read::Storage => *origin == Origin::Storage,
                Read::Value(now, _) => now == *origin,
                Read::Estimate(_) => false,
            })
    }
}

/// A lock whose holder panicked still holds consistent sets: take it anyway.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lock_mut<T>(mutex: &mut Mutex<T>) -> &mut T {
    mutex.get_mut().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> StateKey {
        StateKey::for_tests(n)
    }

    fn value(n: u8) -> Option<Bytes> {
        Some(Bytes::from(vec![n]))
    }

    #[test]
    fn a_read_finds_the_highest_write_below_or_the_store() {
        let memory = MvMemory::new(4);
        memory.record(1, 0, vec![], &[(key(1), value(10))]);
        memory.record(2, 0, vec![], &[(key(1), value(20))]);
        assert!(matches!(memory.read(&key(1), 0), Read::Storage));
        assert!(matches!(memory.read(&key(1), 1), Read::Storage));
        match memory.read(&key(1), 2) {
            Read::Value(Origin::Written(1, 0), Some(v)) => assert_eq!(&v[..], &[10]),
            other => panic!("{other:?}"),
        }
        match memory.read(&key(1), 3) {
            Read::Value(Origin::Written(2, 0), Some(v)) => assert_eq!(&v[..], &[20]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(memory.read(&key(2), 3), Read::Storage));
    }

    #[test]
    fn estimates_block_readers_and_a_new_incarnation_replaces_them() {
        let memory = MvMemory::new(3);
        assert!(memory.record(0, 0, vec![], &[(key(1), value(1)), (key(2), value(2))]));
        memory.convert_writes_to_estimates(0);
        assert!(matches!(memory.read(&key(1), 2), Read::Estimate(0)));
        // The next incarnation writes key 1 only: key 2's estimate goes, and no new key.
        assert!(!memory.record(0, 1, vec![], &[(key(1), value(3))]));
        assert!(matches!(memory.read(&key(2), 2), Read::Storage));
        assert!(matches!(
            memory.read(&key(1), 2),
            Read::Value(Origin::Written(0, 1), _)
        ));
        assert!(memory.record(0, 2, vec![], &[(key(3), None)]));
    }

    #[test]
    fn validation_fails_once_a_read_would_find_something_else() {
        let memory = MvMemory::new(3);
        memory.record(0, 0, vec![], &[(key(1), value(1))]);
        memory.record(
            2,
            0,
            vec![(key(1), Origin::Written(0, 0)), (key(2), Origin::Storage)],
            &[],
        );
        assert!(memory.validate_read_set(2));
        // Transaction 1 writes key 2, which 2 read from the store.
        memory.record(1, 0, vec![], &[(key(2), value(5))]);
        assert!(!memory.validate_read_set(2));
        // And an estimate fails it too.
        memory.record(2, 1, vec![(key(1), Origin::Written(0, 0))], &[]);
        assert!(memory.validate_read_set(2));
        memory.convert_writes_to_estimates(0);
        assert!(!memory.validate_read_set(2));
    }
}
