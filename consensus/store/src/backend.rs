//! Where the bytes live ([`Backend`]): what every backend, in memory or on disk, implements.

use crate::column::Column;
use crate::error::StoreError;
use bytes::Bytes;

/// Where the bytes live. Keys are raw bytes so a disk store takes them as they are; each call
/// names its column. Implementations must be safe to call from many tasks at once.
pub trait Backend: Send + Sync + 'static {
    fn get(&self, column: Column, key: &[u8]) -> Result<Option<Bytes>, StoreError>;
    fn put(&self, column: Column, key: &[u8], value: Bytes) -> Result<(), StoreError>;
    fn delete(&self, column: Column, keys: &[&[u8]]) -> Result<(), StoreError>;
    fn contains(&self, column: Column, key: &[u8]) -> Result<bool, StoreError> {
        self.get(column, key).map(|v| v.is_some())
    }
    /// Every entry of `column` (what a node restarted on a durable store reads back).
    fn scan(&self, column: Column) -> Result<Vec<(Bytes, Bytes)>, StoreError>;
    /// Number of keys in `column` (approximate is fine: it feeds metrics and tests).
    fn len(&self, column: Column) -> usize;
}
