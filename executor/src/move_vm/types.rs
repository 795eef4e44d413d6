//! The resource types the published modules declare: every struct with the `key` ability and no
//! type parameters. The parallel schemes number them in the store before a block runs, so that
//! whatever a transaction reads or writes has a key (a generic resource would have none; the
//! modules declare none, and a write of one sends the block back to sequential execution).

use super::compile::CompiledMove;
use super::error::MoveError;
use move_binary_format::access::ModuleAccess;
use move_binary_format::CompiledModule;
use move_core_types::language_storage::StructTag;

pub(crate) fn resource_tags() -> Result<Vec<StructTag>, MoveError> {
    let compiled = CompiledMove::get()?;
    let mut tags = Vec::new();
    let modules = [&compiled.coin_module, &compiled.account_module]
        .into_iter()
        .chain(compiled.workload_modules.iter());
    for bytes in modules {
        let module = CompiledModule::deserialize(bytes)
            .map_err(|e| MoveError::Publish(format!("cannot read a compiled module: {e:?}")))?;
        let id = module.self_id();
        for definition in module.struct_defs() {
            let handle = module.struct_handle_at(definition.struct_handle);
            if handle.abilities.has_key() && handle.type_parameters.is_empty() {
                tags.push(StructTag {
                    address: *id.address(),
                    module: id.name().to_owned(),
                    name: module.identifier_at(handle.name).to_owned(),
                    type_params: vec![],
                });
            }
        }
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_of_the_modules_is_listed() {
        let mut names: Vec<String> = resource_tags()
            .expect("tags")
            .iter()
            .map(|tag| format!("{}::{}", tag.module, tag.name))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "Account::Account",
                "Coin::Coin",
                "KvStore::Slot",
                "SmallBank::Account"
            ]
        );
    }
}
