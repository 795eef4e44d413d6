//! What one Move transaction does to a state, apart from where the state lives: the bare VM's
//! session (`bare.rs`) or the adapter's prologue, payload and epilogue (`adapter/`) run against
//! any resolver and return their effects without applying them. The sequential executors apply
//! the effects to their store at once; the parallel schemes (`parallel/`) run the same logic
//! against their own views of the block's state, one VM per worker thread. Both executors
//! implement [`TransactionLogic`]; the schemes run it.

use super::declared::{Declared, DeclaredTypes};
use crate::executor::{FailReason, Outcome, RejectReason};
use crate::transaction::Transaction;
use move_core_types::effects::ChangeSet;
use move_core_types::resolver::MoveResolver;
use move_vm_runtime::move_vm::MoveVM;
use std::fmt;
use std::str::FromStr;

/// When the adapter's fees reach the fee account (`--fees`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FeeCredit {
    /// Each transaction's epilogue takes the fee out of the sender's coin; the block's fees are
    /// credited to the fee account together once the block has run. The state after the block
    /// is the one per-transaction crediting leaves.
    #[default]
    Block,
    /// Each transaction's epilogue moves its fee to the fee account (Diem's epilogue): every
    /// transaction writes that one account, the hotspot kept to compare with.
    PerTransaction,
}

impl FeeCredit {
    pub const ALL: [FeeCredit; 2] = [FeeCredit::Block, FeeCredit::PerTransaction];

    pub fn as_str(&self) -> &'static str {
        match self {
            FeeCredit::Block => "block",
            FeeCredit::PerTransaction => "per-tx",
        }
    }
}

impl fmt::Display for FeeCredit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FeeCredit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "block" => Ok(FeeCredit::Block),
            "per-tx" => Ok(FeeCredit::PerTransaction),
            _ => Err(format!("unknown --fees {s:?}; expected block or per-tx")),
        }
    }
}

/// What running one transaction did, not yet applied to any store.
#[derive(Debug)]
pub(crate) struct Effects {
    pub(crate) outcome: Outcome,
    /// Empty for a transaction that changed nothing (rejected, or failed under the bare VM).
    pub(crate) changes: ChangeSet,
    pub(crate) gas_used: u64,
    /// The fee still to credit to the fee account at the end of the block (`FeeCredit::Block`);
    /// zero once credited by the transaction itself or when nothing was charged.
    pub(crate) deferred_fee: u64,
}

impl Effects {
    /// A transaction that changed nothing and charged nothing.
    pub(crate) fn unchanged(outcome: Outcome) -> Self {
        Effects {
            outcome,
            changes: ChangeSet::new(),
            gas_used: 0,
            deferred_fee: 0,
        }
    }

    pub(crate) fn failed(reason: FailReason) -> Self {
        Self::unchanged(Outcome::Failed(reason))
    }

    pub(crate) fn rejected(reason: RejectReason) -> Self {
        Self::unchanged(Outcome::Rejected(reason))
    }
}

/// One VM's rules for one transaction. `Sync`: the parallel schemes share one among their
/// worker threads, each with its own VM.
pub(crate) trait TransactionLogic: Sync {
    /// Runs `tx` in `vm` against `state`. Pure in the state: everything it changed is in the
    /// returned effects.
    fn run<S: MoveResolver>(
        &self,
        vm: &MoveVM,
        state: &S,
        tx: &Transaction,
        fees: FeeCredit,
    ) -> Effects;

    /// What `tx` declares it reads and writes (`--exec=waves`), before it runs.
    fn declare(&self, tx: &Transaction, types: &DeclaredTypes, fees: FeeCredit) -> Declared;

    /// What `fees` of a block credit to the fee account, as effects to apply after the block's
    /// last transaction (none for a VM without fees).
    fn credit_fees<S: MoveResolver>(&self, vm: &MoveVM, state: &S, fees: u64) -> Option<ChangeSet>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fee_credit_names_round_trip() {
        for credit in [FeeCredit::Block, FeeCredit::PerTransaction] {
            assert_eq!(credit.as_str().parse::<FeeCredit>(), Ok(credit));
        }
        assert!("per-block".parse::<FeeCredit>().is_err());
    }
}
