//! The in-memory state the Move VM reads through `ModuleResolver` / `ResourceResolver`, and
//! applies change sets to. (The Move crates publish no such store.)

use crate::address_hash::AddressMap;
use move_core_types::account_address::AccountAddress;
use move_core_types::effects::{ChangeSet, Op};
use move_core_types::identifier::Identifier;
use move_core_types::language_storage::{ModuleId, StructTag};
use move_core_types::resolver::{ModuleResolver, ResourceResolver};
use std::collections::BTreeMap;
use std::convert::Infallible;

/// Per account, its modules and resources. Accounts are hashed (the hot path is two resource
/// reads and two writes per transfer); the few entries per account stay in ordered maps.
#[derive(Clone, Debug, Default)]
pub struct InMemoryStorage {
    accounts: AddressMap<AccountAddress, AccountState>,
}

#[derive(Clone, Debug, Default)]
struct AccountState {
    modules: BTreeMap<Identifier, Vec<u8>>,
    resources: BTreeMap<StructTag, Vec<u8>>,
}

impl InMemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the effects of a finished session. Deleting what is absent is not an error: the
    /// VM only emits deletes for data it read from here.
    pub fn apply(&mut self, changes: ChangeSet) {
        for (address, account_changes) in changes.into_inner() {
            let account = self.accounts.entry(address).or_default();
            let (modules, resources) = account_changes.into_inner();
            apply_ops(&mut account.modules, modules);
            apply_ops(&mut account.resources, resources);
            if account.modules.is_empty() && account.resources.is_empty() {
                self.accounts.remove(&address);
            }
        }
    }

    /// Every `(address, bytes)` holding a resource of type `tag`, in no particular order.
    pub fn resources_of<'a>(
        &'a self,
        tag: &'a StructTag,
    ) -> impl Iterator<Item = (&'a AccountAddress, &'a [u8])> + 'a {
        self.accounts.iter().filter_map(move |(address, account)| {
            account
                .resources
                .get(tag)
                .map(|bytes| (address, bytes.as_slice()))
        })
    }

    /// The stored bytes of one resource, without copying.
    pub fn resource(&self, address: &AccountAddress, tag: &StructTag) -> Option<&[u8]> {
        self.accounts
            .get(address)?
            .resources
            .get(tag)
            .map(Vec::as_slice)
    }
}

fn apply_ops<K: Ord>(map: &mut BTreeMap<K, Vec<u8>>, ops: BTreeMap<K, Op<Vec<u8>>>) {
    for (key, op) in ops {
        match op {
            Op::New(bytes) | Op::Modify(bytes) => {
                map.insert(key, bytes);
            }
            Op::Delete => {
                map.remove(&key);
            }
        }
    }
}

impl ModuleResolver for InMemoryStorage {
    type Error = Infallible;

    fn get_module(&self, id: &ModuleId) -> Result<Option<Vec<u8>>, Self::Error> {
        Ok(self
            .accounts
            .get(id.address())
            .and_then(|account| account.modules.get(id.name()))
            .cloned())
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

    fn tag() -> StructTag {
        StructTag {
            address: AccountAddress::ONE,
            module: Identifier::new("M").expect("identifier"),
            name: Identifier::new("R").expect("identifier"),
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
        assert!(store.accounts.is_empty());
    }
}
