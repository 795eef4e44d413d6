//! The in-memory state the Move VM reads through `ModuleResolver` / `ResourceResolver`, and
//! applies change sets to. (The Move crates publish no such store.)

use crate::snapshot::{self, SnapshotError};
use bytes::Bytes;
use move_core_types::account_address::AccountAddress;
use move_core_types::effects::{ChangeSet, Op};
use move_core_types::language_storage::{ModuleId, StructTag};
use move_core_types::resolver::{ModuleResolver, ResourceResolver};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::convert::Infallible;

/// Modules, and resources in one flat map keyed by address and resource type.
///
/// The layout is for the hot path, two resource reads and two writes per transfer over thousands
/// of accounts whose data is mostly out of cache: a resource type is interned to a small number,
/// so finding a resource is one probe of one table and one read of its bytes. (A map per account
/// keyed by `StructTag` cost three or four cache misses per read, since comparing tags follows
/// pointers to their names; it took 8 % of the executor's time in a node.)
///
/// Why FxHash and not the standard SipHash, here and in the ledger and native executor: every
/// account is a genesis account (no transaction can create one), so an attacker cannot choose
/// keys and SipHash's collision resistance buys nothing, while it cost several percent of a
/// transfer.
#[derive(Clone, Debug, Default)]
pub struct InMemoryStorage {
    modules: BTreeMap<ModuleId, Vec<u8>>,
    /// Every resource type ever stored, numbered in order of first appearance.
    resource_types: FxHashMap<StructTag, ResourceType>,
    resources: FxHashMap<(AccountAddress, ResourceType), Vec<u8>>,
}

/// An interned `StructTag`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ResourceType(u32);

/// One resource of the store: what the parallel schemes track reads and writes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct StateKey {
    pub(crate) address: AccountAddress,
    pub(crate) ty: ResourceType,
}

#[cfg(test)]
impl StateKey {
    /// The key numbered `n` of the parallel schemes' tests: one resource type at the address
    /// of `n` repeated.
    pub(crate) fn for_tests(n: u8) -> Self {
        StateKey {
            address: AccountAddress::new([n; AccountAddress::LENGTH]),
            ty: ResourceType(0),
        }
    }
}

impl InMemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the effects of a finished session. Deleting what is absent is not an error: the
    /// VM only emits deletes for data it read from here.
    pub fn apply(&mut self, changes: ChangeSet) {
        for (address, account_changes) in changes.into_inner() {
            let (modules, resources) = account_changes.into_inner();
            for (name, op) in modules {
                let id = ModuleId::new(address, name);
                match op {
                    Op::New(bytes) | Op::Modify(bytes) => {
                        self.modules.insert(id, bytes);
                    }
                    Op::Delete => {
                        self.modules.remove(&id);
                    }
                }
            }
            for (tag, op) in resources {
                match op {
                    Op::New(bytes) | Op::Modify(bytes) => {
                        let resource_type = self.intern(tag);
                        self.resources.insert((address, resource_type), bytes);
                    }
                    Op::Delete => {
                        if let Some(&resource_type) = self.resource_types.get(&tag) {
                            self.resources.remove(&(address, resource_type));
                        }
                    }
                }
            }
        }
    }

    fn intern(&mut self, tag: StructTag) -> ResourceType {
        let next = ResourceType(self.resource_types.len() as u32);
        *self.resource_types.entry(tag).or_insert(next)
    }

    /// Numbers every type of `tags` not numbered yet: the parallel schemes key what transactions
    /// read and write by number, and can only do so for types the store knows.
    pub(crate) fn intern_all<'a>(&mut self, tags: impl IntoIterator<Item = &'a StructTag>) {
        for tag in tags {
            if !self.resource_types.contains_key(tag) {
                self.intern(tag.clone());
            }
        }
    }

    /// The key of `address`'s resource of type `tag`, if the type is numbered.
    pub(crate) fn key(&self, address: &AccountAddress, tag: &StructTag) -> Option<StateKey> {
        Some(StateKey {
            address: *address,
            ty: *self.resource_types.get(tag)?,
        })
    }

    /// The stored bytes of the resource at `key`.
    pub(crate) fn get(&self, key: &StateKey) -> Option<&[u8]> {
        self.resources
            .get(&(key.address, key.ty))
            .map(Vec::as_slice)
    }

    /// Writes (`Some`) or deletes (`None`) the resource at `key` (the bytes move in without a
    /// copy when nothing else holds them).
    pub(crate) fn put(&mut self, key: StateKey, value: Option<Bytes>) {
        match value {
            Some(bytes) => {
                self.resources
                    .insert((key.address, key.ty), Vec::from(bytes));
            }
            None => {
                self.resources.remove(&(key.address, key.ty));
            }
        }
    }

    /// The number of type `tag`, if numbered.
    #[cfg(test)]
    fn resource_type(&self, tag: &StructTag) -> Option<ResourceType> {
        self.resource_types.get(tag).copied()
    }

    /// Every `(address, bytes)` holding a resource of type `tag`, in no particular order.
    pub fn resources_of<'a>(
        &'a self,
        tag: &StructTag,
    ) -> impl Iterator<Item = (&'a AccountAddress, &'a [u8])> + 'a {
        let wanted = self.resource_types.get(tag).copied();
        self.resources
            .iter()
            .filter(move |((_, resource_type), _)| Some(*resource_type) == wanted)
            .map(|((address, _), bytes)| (address, bytes.as_slice()))
    }

    /// The stored bytes of one resource, without copying.
    pub fn resource(&self, address: &AccountAddress, tag: &StructTag) -> Option<&[u8]> {
        let resource_type = *self.resource_types.get(tag)?;
        self.resources
            .get(&(*address, resource_type))
            .map(Vec::as_slice)
    }

    /// How many resources are stored, all types together.
    pub fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Every resource, in (address, type) order, each type written once in a table: the same
    /// bytes on every node holding the same resources, whatever order they were interned in.
    /// Modules are not in it: they are published at genesis and no transaction changes them.
    /// Only the types some resource has are in the table: a type numbered ahead of use (for
    /// the parallel schemes) changes nothing.
    pub fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        let used: FxHashSet<ResourceType> = self.resources.keys().map(|(_, ty)| *ty).collect();
        let mut tags: Vec<&StructTag> = self
            .resource_types
            .iter()
            .filter(|(_, ty)| used.contains(ty))
            .map(|(tag, _)| tag)
            .collect();
        tags.sort_unstable();
        let index: FxHashMap<ResourceType, u32> = tags
            .iter()
            .enumerate()
            .filter_map(|(i, tag)| Some((*self.resource_types.get(*tag)?, i as u32)))
            .collect();
        let mut resources: Vec<(AccountAddress, u32, &[u8])> = self
            .resources
            .iter()
            .filter_map(|((address, resource_type), bytes)| {
                Some((*address, *index.get(resource_type)?, bytes.as_slice()))
            })
            .collect();
        resources.sort_unstable_by_key(|(address, tag, _)| (*address, *tag));
        snapshot::encode(&(tags, resources))
    }

    /// Replaces every resource with a snapshot's; modules stay.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        type Resources = (Vec<StructTag>, Vec<(AccountAddress, u32, Vec<u8>)>);
        let (tags, resources): Resources = snapshot::decode(bytes)?;
        let mut restored = InMemoryStorage {
            modules: BTreeMap::new(),
            resource_types: FxHashMap::default(),
            resources: FxHashMap::default(),
        };
        let types: Vec<ResourceType> = tags.into_iter().map(|tag| restored.intern(tag)).collect();
        for (address, tag, bytes) in resources {
            let resource_type = *types.get(tag as usize).ok_or_else(|| {
                SnapshotError::Decode(format!("resource type {tag} is not in the table"))
            })?;
            restored.resources.insert((address, resource_type), bytes);
        }
        // Types numbered here before stay numbered (the snapshot only lists types in use).
        restored.intern_all(self.resource_types.keys());
        restored.modules = std::mem::take(&mut self.modules);
        *self = restored;
        Ok(())
    }
}

impl ModuleResolver for InMemoryStorage {
    type Error = Infallible;

    fn get_module(&self, id: &ModuleId) -> Result<Option<Vec<u8>>, Self::Error> {
        Ok(self.modules.get(id).cloned())
    }
}

impl ResourceResolver for InMemoryStorage {
    type Error = Infallible;

    fn get_resource(
        &self,
        address: &AccountAddress,
        tag: &StructTag,
    ) -> Result<Option<Vec<u8>>, Self::Error> {
        Ok(self.resource(address, tag).map(<[u8]>::to_vec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use move_core_types::identifier::Identifier;

    fn tag() -> StructTag {
        tag_named("R")
    }

    fn tag_named(name: &str) -> StructTag {
        StructTag {
            address: AccountAddress::ONE,
            module: Identifier::new("M").expect("identifier"),
            name: Identifier::new(name).expect("identifier"),
            type_params: vec![],
        }
    }

    #[test]
    fn change_sets_insert_modify_and_delete() {
        let mut store = InMemoryStorage::new();
        let address = AccountAddress::new([7; AccountAddress::LENGTH]);
        let mut changes = ChangeSet::new();
        changes
            .add_resource_op(address, tag(), Op::New(vec![1]))
            .expect("op");
        store.apply(changes);
        assert_eq!(store.get_resource(&address, &tag()), Ok(Some(vec![1])));

        let mut changes = ChangeSet::new();
        changes
            .add_resource_op(address, tag(), Op::Modify(vec![2]))
            .expect("op");
        store.apply(changes);
        assert_eq!(store.resources_of(&tag()).count(), 1);
        assert_eq!(store.resource(&address, &tag()), Some(&[2u8][..]));

        let mut changes = ChangeSet::new();
        changes
            .add_resource_op(address, tag(), Op::Delete)
            .expect("op");
        store.apply(changes);
        assert_eq!(store.get_resource(&address, &tag()), Ok(None));
        assert_eq!(store.resource_count(), 0);
    }

    #[test]
    fn resource_types_and_modules_are_kept_apart() {
        let mut store = InMemoryStorage::new();
        let (a, b) = (
            AccountAddress::new([1; AccountAddress::LENGTH]),
            AccountAddress::new([2; AccountAddress::LENGTH]),
        );
        let mut changes = ChangeSet::new();
        changes
            .add_resource_op(a, tag(), Op::New(vec![1]))
            .expect("op");
        changes
            .add_resource_op(a, tag_named("S"), Op::New(vec![2]))
            .expect("op");
        changes
            .add_resource_op(b, tag(), Op::New(vec![3]))
            .expect("op");
        let module = Identifier::new("M").expect("identifier");
        changes
            .add_module_op(ModuleId::new(a, module.clone()), Op::New(vec![9]))
            .expect("op");
        store.apply(changes);

        let mut of_r: Vec<_> = store.resources_of(&tag()).collect();
        of_r.sort();
        assert_eq!(of_r, vec![(&a, &[1u8][..]), (&b, &[3u8][..])]);
        assert_eq!(store.resource(&a, &tag_named("S")), Some(&[2u8][..]));
        assert_eq!(store.resource(&b, &tag_named("S")), None);
        assert_eq!(store.resource(&a, &tag_named("Unknown")), None);
        assert_eq!(
            store.get_module(&ModuleId::new(a, module.clone())),
            Ok(Some(vec![9]))
        );
        assert_eq!(store.get_module(&ModuleId::new(b, module)), Ok(None));
    }

    #[test]
    fn types_numbered_ahead_of_use_change_no_snapshot_and_survive_a_restore() {
        let address = AccountAddress::new([4; AccountAddress::LENGTH]);
        let mut store = InMemoryStorage::new();
        let mut changes = ChangeSet::new();
        changes
            .add_resource_op(address, tag(), Op::New(vec![1]))
            .expect("op");
        store.apply(changes);
        let before = store.snapshot().expect("encodes");
        store.intern_all(&[tag_named("Later")]);
        assert_eq!(store.snapshot().expect("encodes"), before);
        store.restore(&before).expect("restores");
        assert!(store.resource_type(&tag_named("Later")).is_some());
    }

    #[test]
    fn a_snapshot_restores_every_resource_and_ignores_interning_order() {
        let (a, b) = (
            AccountAddress::new([1; AccountAddress::LENGTH]),
            AccountAddress::new([2; AccountAddress::LENGTH]),
        );
        // The same resources, types interned in opposite orders.
        let mut first = InMemoryStorage::new();
        let mut second = InMemoryStorage::new();
        for (store, order) in [(&mut first, ["R", "S"]), (&mut second, ["S", "R"])] {
            let mut changes = ChangeSet::new();
            for name in order {
                changes
                    .add_resource_op(a, tag_named(name), Op::New(name.as_bytes().to_vec()))
                    .expect("op");
            }
            changes
                .add_resource_op(b, tag(), Op::New(vec![3]))
                .expect("op");
            store.apply(changes);
        }
        let bytes = first.snapshot().expect("encodes");
        assert_eq!(bytes, second.snapshot().expect("encodes"));

        let mut restored = InMemoryStorage::new();
        let mut changes = ChangeSet::new();
        changes
            .add_resource_op(b, tag_named("Gone"), Op::New(vec![9]))
            .expect("op");
        restored.apply(changes);
        restored.restore(&bytes).expect("restores");
        assert_eq!(restored.resource(&a, &tag_named("S")), Some(&b"S"[..]));
        assert_eq!(restored.resource(&b, &tag()), Some(&[3u8][..]));
        assert_eq!(restored.resource(&b, &tag_named("Gone")), None);
        assert_eq!(restored.snapshot().expect("encodes"), bytes);
        assert!(restored.restore(&bytes[..bytes.len() - 1]).is_err());
    }
}
