//! How the Move executors run a block the ledger planned (`--exec`): one transaction after
//! another, or in parallel, with the same result.
//!
//! - `sequential` (`sequential.rs`): each transaction's effects applied before the next runs.
//! - `waves` (`waves.rs`): levels of transactions whose declared reads and writes
//!   (`conflicts.rs`, over `move_vm/declared.rs`) do not conflict, each level on the worker
//!   threads; a block whose transactions read or write beyond their declarations runs
//!   sequentially instead.
//! - `blockstm` (`blockstm/`): Block-STM, optimistic execution on the worker threads with a
//!   multi-version memory, validation and re-execution.
//!
//! `config.rs` says which scheme runs and on how many threads; `runner.rs` holds the scheme
//! between blocks and runs each block, sequentially where the block's declared conflicts leave
//! nothing to run side by side (`conflicts.rs`). The parallel schemes run on `workers.rs`'s threads, each
//! with its own VM, and commit what the block's transactions wrote in index order once the block
//! has run (`effects.rs`).
//! Whatever the scheme, under `--fees=block` the adapter's fees of the block are credited to the
//! fee account after its last transaction (every transaction crediting that one account would
//! make them all conflict), which leaves the state per-transaction crediting would leave.
//!
//! The schemes run any [`TransactionLogic`](crate::move_vm::logic::TransactionLogic) over the
//! Move store: they import from `move_vm/` (below) and never from the executors that use them
//! (`bare.rs`, `adapter/`, above).

mod blockstm;
mod config;
mod conflicts;
mod effects;
mod recording;
mod runner;
mod sequential;
mod waves;
mod workers;

pub use config::{ExecConfig, Scheme};
pub(crate) use runner::BlockRunner;
