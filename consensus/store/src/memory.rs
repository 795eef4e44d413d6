//! The in-memory backend ([`MemoryBackend`]), the default.

use crate::backend::Backend;
use crate::column::Column;
use crate::error::StoreError;
use crate::lock::lock;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;

/// One hash map per column. Critical sections are a hash-map operation, so a mutex is cheaper
/// here than an actor round trip per access; values are `Bytes`, so a read is a reference count.
#[derive(Default)]
pub struct MemoryBackend {
    columns: [Mutex<HashMap<Box<[u8]>, Bytes>>; 4],
}

impl Backend for MemoryBackend {
    fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError> {
        Ok(lock(&self.columns[column.index()]).get(key).cloned())
    }

    fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError> {
        lock(&self.columns[column.index()]).insert(key.into(), value);
        Ok(())
    }

    fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError> {
        let mut map = lock(&self.columns[column.index()]);
        for key in keys {
            map.remove(*key);
        }
        Ok(())
    }

    fn contains(&self, column: Column, key: &[u8]) -> Result<bool, StoreError> {
        Ok(lock(&self.columns[column.index()]).contains_key(key))
    }

    fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError> {
        Ok(lock(&self.columns[column.index()])
            .iter()
            .map(|(k, v)| (Bytes::copy_from_slice(k), v.clone()))
            .collect())
    }

    fn len(&self, column: Column) -> usize {
        lock(&self.columns[column.index()]).len()
    }
}
