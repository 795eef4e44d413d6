//! The application layer of HotMove: the transaction format, the genesis accounts, the native
//! and Move VM executors, and the per-sender nonce ledger that sequences transactions for both.
//!
//! Every mode that executes (`hotcrypto`, `hotmove`, `movevm`) goes through [`Ledger`], so the
//! standalone `movevm` run measures the same code path as a node's executor stage.

mod codec;
mod executor;
mod genesis;
mod ledger;
mod move_compile;
mod move_storage;
mod move_vm;
mod movevm;
mod native;
mod opaque;
mod transaction;

pub use executor::{digest_balances, Executor, FailReason, Outcome};
pub use genesis::{Genesis, GenesisAccount, GenesisError};
pub use ledger::{Completed, DropCounts, DropReason, Ledger, LedgerStats};
pub use move_compile::{CompiledMove, MoveCompileError};
pub use move_storage::InMemoryStorage;
pub use move_vm::{MoveError, MoveExecutor};
pub use movevm::{run_standalone, run_standalone_until, StandaloneError, StandaloneReport};
pub use native::{NativeError, NativeExecutor};
pub use opaque::{opaque_sample_id, opaque_transaction, OPAQUE_MIN_SIZE};
pub use transaction::{
    Address, Payload, Transaction, TxError, ADDRESS_LEN, MAX_TRANSACTION_SIZE, SIGNING_DOMAIN,
};
