//! The adapter (`--vm=adapter`): the same Move VM as the bare executor (`bare.rs`), behind what
//! Diem's adapter (the DiemVM) puts around it. Per transaction, in one session:
//!
//! 1. the prologue (`Account::prologue`, Move, unmetered): the sequence number is the account's
//!    next one, the public key hashes to the account's authentication key, the balance covers
//!    max gas × gas price. A failure discards the transaction: nothing changes, nothing is paid,
//!    the sequence number stays (the ledger does not consume the nonce either);
//! 2. the payload, metered by `Meter` (Diem's gas schedule, `move_vm/gas.rs`) after the
//!    intrinsic gas of the transaction's size, up to max gas;
//! 3. the epilogue (`Account::epilogue`, Move, unmetered): sequence number + 1, fee = gas used ×
//!    gas price, paid to [`FEE_ACCOUNT`]. Run as a block with fees credited per block
//!    (`FeeCredit::Block`, the default), the epilogue only takes the fee out of the sender's
//!    coin (`Account::epilogue_deferring_fee`) and the block's fees reach the fee account
//!    together after its last transaction (`Account::credit_fees`).
//!
//! If the payload aborts or runs out of gas (or the epilogue fails after it, say the payload
//! spent the money for the fee), the session is dropped with all its effects and the epilogue
//! runs alone in a fresh one: the fee is charged and the sequence number consumed, as Diem does.
//! The prologue checked that the balance covers the largest fee, so that epilogue cannot fail.
//!
//! The rules (`rules.rs`, [`AdapterRules`](rules::AdapterRules)) run against any resolver and
//! return their effects, so that the parallel schemes (`parallel/`) run them too;
//! [`AdapterExecutor`] (`executor.rs`) holds the store and the VM and runs blocks through a
//! scheme. The rules know nothing of the executor; the executor builds on the rules.

mod executor;
mod rules;
#[cfg(test)]
mod tests;

pub use executor::AdapterExecutor;
pub use rules::{GasParameters, FEE_ACCOUNT};
