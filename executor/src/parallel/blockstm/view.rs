//! The state a Block-STM incarnation runs against: the multi-version memory over the store,
//! recording where each read came from. A read that meets an estimate stops the incarnation: the
//! resolver errs (the VM ends the transaction with an invariant error) and the view keeps the
//! transaction to wait for, which the worker looks at before anything else.

use super::mvmemory::{MvMemory, Origin, Read, TxnIndex};
use crate::move_vm::storage::{InMemoryStorage, StateKey};
use move_core_types::account_address::AccountAddress;
use move_core_types::language_storage::{ModuleId, StructTag};
use move_core_types::resolver::{ModuleResolver, ResourceResolver};
use std::cell::{Cell, RefCell};

/// The resolver's error: the incarnation met an estimate and must wait.
#[derive(Debug)]
pub(super) struct Blocked;

pub(super) struct MvView<'a> {
    memory: &'a MvMemory,
    storage: &'a InMemoryStorage,
    txn: TxnIndex,
    reads: RefCell<Vec<(StateKey, Origin)>>,
    blocked_on: Cell<Option<TxnIndex>>,
}

impl<'a> MvView<'a> {
    pub(super) fn new(memory: &'a MvMemory, storage: &'a InMemoryStorage, txn: TxnIndex) -> Self {
        MvView {
            memory,
            storage,
            txn,
            reads: RefCell::new(Vec::new()),
            blocked_on: Cell::new(None),
        }
    }

    /// The transaction whose estimate stopped this incarnation, if one did.
    pub(super) fn blocked_on(&self) -> Option<TxnIndex> {
        self.blocked_on.get()
    }

    pub(super) fn into_reads(self) -> Vec<(StateKey, Origin)> {
        self.reads.into_inner()
    }
}

impl ModuleResolver for MvView<'_> {
    type Error = Blocked;

    /// Modules come from the store: no transaction publishes one.
    fn get_module(&self, id: &ModuleId) -> Result<Option<Vec<u8>>, Blocked> {
        Ok(self
            .storage
            .get_module(id)
            .unwrap_or_else(|never| match never {}))
    }
}

impl ResourceResolver for MvView<'_> {
    type Error = Blocked;

    fn get_resource(
        &self,
        address: &AccountAddress,
        tag: &StructTag,
    ) -> Result<Option<Vec<u8>>, Blocked> {
        if self.blocked_on.get().is_some() {
            return Err(Blocked);
        }
        // A type the store has not numbered has no resource, and no transaction of the block
        // writes one (its writes would have no key, and the block would run sequentially).
        let Some(key) = self.storage.key(address, tag) else {
            return Ok(None);
        };
        let (origin, value) = match self.memory.read(&key, self.txn) {
            Read::Estimate(writer) => {
                self.blocked_on.set(Some(writer));
                return Err(Blocked);
            }
            Read::Value(origin, value) => (origin, value.map(|bytes| bytes.to_vec())),
            Read::Storage => (Origin::Storage, self.storage.get(&key).map(<[u8]>::to_vec)),
        };
        self.reads.borrow_mut().push((key, origin));
        Ok(value)
    }
}
