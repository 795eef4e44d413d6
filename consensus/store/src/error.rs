//! What a store operation fails with.

use crate::column::Column;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("storage backend failed on {column:?}: {message}")]
    Backend { column: Column, message: String },
    #[error("the store stopped tracking the key")]
    Closed,
    #[error("cannot open the store at {path}: {message}")]
    Open { path: String, message: String },
}

impl StoreError {
    /// `column`'s backend failed (an I/O error, a record that does not decode, ...).
    pub fn backend(column: Column, message: impl std::fmt::Display) -> Self {
        StoreError::Backend {
            column,
            message: message.to_string(),
        }
    }

    /// The store, or one of its files, at `path` cannot be opened.
    pub fn open(path: &std::path::Path, message: impl std::fmt::Display) -> Self {
        StoreError::Open {
            path: path.display().to_string(),
            message: message.to_string(),
        }
    }
}
