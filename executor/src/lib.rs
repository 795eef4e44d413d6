//! The application layer of HotMove: the transaction format, the genesis accounts, the native
//! and Move VM executors, the workloads, and the per-sender nonce ledger that sequences
//! transactions for both.
//!
//! Every mode that executes (`hotcrypto`, `hotmove`, `movevm`) goes through [`Ledger`]; the
//! stages that drive it (decoding, verification, execution) live in the `stages` crate
//! (`node/stages`), which the replica and the standalone `movevm` run share.

mod adapter;
mod bare;
mod codec;
mod dest;
mod executor;
mod genesis;
mod ledger;
mod load;
mod move_vm;
mod native;
mod opaque;
mod parallel;
mod snapshot;
mod transaction;
mod workload;

pub use adapter::{AdapterExecutor, GasParameters, FEE_ACCOUNT};
pub use bare::MoveExecutor;
pub use codec::signed_sample_id;
pub use dest::{Dest, Payees};
pub use executor::{
    digest_balances, BlockStats, BlockTx, Executor, FailReason, Outcome, RejectReason,
};
pub use genesis::{Genesis, GenesisAccount, GenesisError};
pub use ledger::{Completed, DropCounts, DropReason, Ledger, LedgerStats};
pub use load::{CallStyle, Load};
pub use move_vm::compile::{CompiledMove, MoveCompileError};
pub use move_vm::error::MoveError;
pub use move_vm::gas::{intrinsic_gas, Meter as GasMeter, INTERNAL_UNITS_PER_GAS};
pub use move_vm::logic::FeeCredit;
pub use move_vm::storage::InMemoryStorage;
pub use native::{NativeError, NativeExecutor};
pub use opaque::{opaque_sample_id, opaque_transaction, OPAQUE_MIN_SIZE};
pub use parallel::{ExecConfig, Scheme};
pub use snapshot::SnapshotError;
pub use transaction::{
    Address, Call, Payload, Procedure, Transaction, TxError, ADDRESS_LEN, MAX_TRANSACTION_SIZE,
    MAX_UNMETERED_KEYS, MAX_UNMETERED_SORT, MAX_UNMETERED_VALUE_SIZE, SAMPLE_PERIOD,
    SIGNING_DOMAIN,
};
pub use workload::{Workload, KV_KEYSPACE, KV_VALUE_SIZE};
