//! The state a `waves` transaction runs against: the store with the writes of the block's
//! earlier waves over it, recording every resource the transaction reads so that the read can
//! be checked against its declaration.

use crate::move_vm::storage::{InMemoryStorage, StateKey};
use bytes::Bytes;
use move_core_types::account_address::AccountAddress;
use move_core_types::language_storage::{ModuleId, StructTag};
use move_core_types::resolver::{ModuleResolver, ResourceResolver};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::convert::Infallible;

/// The writes of the waves run so far: the last one of each key, in index order.
pub(super) type Overlay = FxHashMap<StateKey, Option<Bytes>>;

pub(super) struct RecordingView<'a> {
    storage: &'a InMemoryStorage,
    overlay: &'a Overlay,
    reads: RefCell<Vec<StateKey>>,
}

impl<'a> RecordingView<'a> {
    pub(super) fn new(storage: &'a InMemoryStorage, overlay: &'a Overlay) -> Self {
        RecordingView {
            storage,
            overlay,
            reads: RefCell::new(Vec::new()),
        }
    }

    /// Every resource read, in order (twice if read in two sessions).
    pub(super) fn into_reads(self) -> Vec<StateKey> {
        self.reads.into_inner()
    }
}

impl ModuleResolver for RecordingView<'_> {
    type Error = Infallible;

    fn get_module(&self, id: &ModuleId) -> Result<Option<Vec<u8>>, Infallible> {
        self.storage.get_module(id)
    }
}

impl ResourceResolver for RecordingView<'_> {
    type Error = Infallible;

    fn get_resource(
        &self,
        address: &AccountAddress,
        tag: &StructTag,
    ) -> Result<Option<Vec<u8>>, Infallible> {
        // A type the store has not numbered has no resource, and no transaction of the block
        // can write one (its writes would have no key).
        let Some(key) = self.storage.key(address, tag) else {
            return Ok(None);
        };
        self.reads.borrow_mut().push(key);
        let value = match self.overlay.get(&key) {
            Some(written) => written.as_deref(),
            None => self.storage.get(&key),
        };
        Ok(value.map(<[u8]>::to_vec))
    }
}
