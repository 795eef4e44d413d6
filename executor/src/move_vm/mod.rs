//! The Move integration: everything the two Move executors (`bare.rs`, `adapter/`) and the
//! parallel schemes (`parallel/`) need from the Move VM, and nothing about how a block is
//! scheduled or which executor runs it. It owns, from the bottom up:
//!
//! - `compile.rs`: the Move sources of `executor/move/`, compiled once per process;
//! - `error.rs`: [`MoveError`](error::MoveError), what setting up the Move side can fail with;
//! - `natives.rs`: the natives the modules declare, and Move identifiers;
//! - `gas.rs`: the gas meter (Diem's schedule) the adapter runs payloads under;
//! - `storage.rs`: the in-memory store the VM reads and change sets are applied to;
//! - `types.rs`: the resource types the modules declare, numbered in the store;
//! - `state.rs`: what the executors read out of the store (balances, SmallBank, the digest);
//! - `functions.rs`: the Move function a workload call runs, and its arguments;
//! - `calls.rs`: a payload resolved to a script or entry function and run in a session;
//! - `genesis.rs`: the genesis session both executors start from;
//! - `declared.rs`: what a payload declares it reads and writes (`--exec=waves`);
//! - `logic.rs`: the rules of one transaction ([`TransactionLogic`](logic::TransactionLogic))
//!   and their [`Effects`](logic::Effects), which the executors implement and the schemes run.
//!
//! Each file imports only from files listed above it and from the crate's foundations below the
//! tree (the transaction, the outcomes of `executor.rs`, snapshots, the workload names), never
//! from this file, from the executors or from `parallel/`.

pub(crate) mod calls;
pub(crate) mod compile;
pub(crate) mod declared;
pub(crate) mod error;
pub(crate) mod functions;
pub(crate) mod gas;
pub(crate) mod genesis;
pub(crate) mod logic;
pub(crate) mod natives;
pub(crate) mod state;
pub(crate) mod storage;
pub(crate) mod types;
