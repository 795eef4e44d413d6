//! Why a transaction was discarded without running ([`DropReason`]), and the counts by reason
//! ([`DropCounts`]).

use crate::executor::RejectReason;
use serde::{Deserialize, Serialize};

/// Why a transaction was discarded without running (its nonce is not consumed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The nonce was already used.
    StaleNonce,
    /// The sender already has `max_backlog_per_sender` transactions waiting.
    BacklogFull,
    /// A transaction with this nonce is already waiting in the backlog.
    Duplicate,
    /// The sender is not a genesis account.
    UnknownAccount,
    /// The public key is not the sender account's key.
    BadAddress,
    /// The adapter's prologue discarded it.
    Rejected(RejectReason),
}

impl DropReason {
    pub const ALL: [DropReason; 13] = [
        DropReason::StaleNonce,
        DropReason::BacklogFull,
        DropReason::Duplicate,
        DropReason::UnknownAccount,
        DropReason::BadAddress,
        DropReason::Rejected(RejectReason::SequenceNumberTooOld),
        DropReason::Rejected(RejectReason::SequenceNumberTooNew),
        DropReason::Rejected(RejectReason::BadAuthenticationKey),
        DropReason::Rejected(RejectReason::CantPayGasDeposit),
        DropReason::Rejected(RejectReason::NoAccount),
        DropReason::Rejected(RejectReason::PrologueError),
        DropReason::Rejected(RejectReason::ScriptNotAllowed),
        DropReason::Rejected(RejectReason::WrongPayload),
    ];

    /// The key used in METRICS `dropped_by_reason`.
    pub fn as_str(&self) -> &'static str {
        match self {
            DropReason::StaleNonce => "stale_nonce",
            DropReason::BacklogFull => "backlog_full",
            DropReason::Duplicate => "duplicate",
            DropReason::UnknownAccount => "unknown_account",
            DropReason::BadAddress => "bad_address",
            DropReason::Rejected(reason) => reason.as_str(),
        }
    }
}

/// Dropped transactions by reason; serializes to the METRICS `dropped_by_reason` object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCounts {
    pub stale_nonce: u64,
    pub backlog_full: u64,
    pub duplicate: u64,
    pub unknown_account: u64,
    pub bad_address: u64,
    pub sequence_number_too_old: u64,
    pub sequence_number_too_new: u64,
    pub bad_authentication_key: u64,
    pub cant_pay_gas_deposit: u64,
    pub no_account: u64,
    pub prologue_error: u64,
    pub script_not_allowed: u64,
    pub wrong_payload: u64,
}

impl DropCounts {
    pub(super) fn slot(&mut self, reason: DropReason) -> &mut u64 {
        match reason {
            DropReason::StaleNonce => &mut self.stale_nonce,
            DropReason::BacklogFull => &mut self.backlog_full,
            DropReason::Duplicate => &mut self.duplicate,
            DropReason::UnknownAccount => &mut self.unknown_account,
            DropReason::BadAddress => &mut self.bad_address,
            DropReason::Rejected(reason) => match reason {
                RejectReason::SequenceNumberTooOld => &mut self.sequence_number_too_old,
                RejectReason::SequenceNumberTooNew => &mut self.sequence_number_too_new,
                RejectReason::BadAuthenticationKey => &mut self.bad_authentication_key,
                RejectReason::CantPayGasDeposit => &mut self.cant_pay_gas_deposit,
                RejectReason::NoAccount => &mut self.no_account,
                RejectReason::PrologueError => &mut self.prologue_error,
                RejectReason::ScriptNotAllowed => &mut self.script_not_allowed,
                RejectReason::WrongPayload => &mut self.wrong_payload,
            },
        }
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        let mut copy = *self;
        *copy.slot(reason)
    }

    pub fn total(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.get(*r)).sum()
    }
}
