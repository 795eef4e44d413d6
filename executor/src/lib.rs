//! The application layer of HotMove: the transaction format, the genesis accounts, the native
//! and Move VM executors, the workloads, and the per-sender nonce ledger that sequences
//! transactions for both.
//!
//! Every mode that executes (`hotcrypto`, `hotmove`, `movevm`) goes through [`Ledger`]; the
//! stages that drive it (decoding, verification, execution) live in the `node` crate, which the
//! standalone `movevm` run shares.

mod adapter;
mod codec;
mod dest;
mod executor;
mod gas;
mod genesis;
mod ledger;
mod move_calls;
mod move_compile;
mod move_genesis;
mod move_logic;
mod move_natives;
mod move_state;
mod move_storage;
mod move_types;
mod move_vm;
mod native;
mod opaque;
mod parallel;
mod snapshot;
mod transaction;
mod workload;

pub use adapter::{AdapterExecutor, GasParameters, FEE_ACCOUNT};
pub use dest::{Dest, Payees};
pub use executor::{
    digest_balances, BlockStats, BlockTx, Executor, FailReason, Outcome, RejectReason,
};
pub use gas::{intrinsic_gas, Meter as GasMeter, INTERNAL_UNITS_PER_GAS};
pub use genesis::{Genesis, GenesisAccount, GenesisError};
pub use ledger::{Completed, DropCounts, DropReason, Ledger, LedgerStats};
pub use move_compile::{CompiledMove, MoveCompileError};
pub use move_logic::FeeCredit;
pub use move_storage::InMemoryStorage;
pub use move_vm::{MoveError, MoveExecutor};
pub use native::{NativeError, NativeExecutor};
pub use opaque::{opaque_sample_id, opaque_transaction, OPAQUE_MIN_SIZE};
pub use parallel::{ExecConfig, Scheme};
pub use snapshot::SnapshotError;
pub use transaction::{
    signed_sample_id, Address, Payload, Transaction, TxError, ADDRESS_LEN, MAX_TRANSACTION_SIZE,
    SAMPLE_PERIOD, SIGNING_DOMAIN,
};
pub use workload::{
    Call, CallStyle, Load, Procedure, Workload, KV_KEYSPACE, KV_VALUE_SIZE, MAX_UNMETERED_KEYS,
    MAX_UNMETERED_SORT, MAX_UNMETERED_VALUE_SIZE,
};
