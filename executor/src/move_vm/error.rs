//! What can go wrong setting up the Move side: compiling the modules, creating a VM, publishing
//! the modules and minting genesis accounts, naming a Move identifier, starting worker threads.
//! It wraps the compiler's error and sits below every other file of the Move integration, which
//! all return it.

use super::compile::MoveCompileError;
use crate::transaction::Address;
use move_binary_format::errors::VMError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum MoveError {
    #[error(transparent)]
    Compile(#[from] MoveCompileError),
    #[error("cannot create the Move VM: {0}")]
    Vm(String),
    #[error("cannot publish the Move modules: {0}")]
    Publish(String),
    #[error("cannot set up the genesis account {address:?}: {message}")]
    Mint { address: Address, message: String },
    #[error("invalid Move identifier: {0}")]
    Identifier(String),
    #[error("cannot start the executor's thread pool: {0}")]
    Pool(String),
}

/// Start-up errors are rare and fatal: give everything the VM says.
pub(crate) fn describe(error: &VMError) -> String {
    format!("{error:?}")
}
