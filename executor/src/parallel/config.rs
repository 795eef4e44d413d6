//! Which scheme runs a Move executor's blocks (`--exec`), on how many threads, and when the
//! adapter's fees reach the fee account.

use crate::move_vm::logic::FeeCredit;
use std::fmt;
use std::str::FromStr;

/// How a block's transactions run (`--exec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    #[default]
    Sequential,
    Waves,
    BlockStm,
}

impl Scheme {
    pub const ALL: [Scheme; 3] = [Scheme::Sequential, Scheme::Waves, Scheme::BlockStm];

    pub fn as_str(&self) -> &'static str {
        match self {
            Scheme::Sequential => "sequential",
            Scheme::Waves => "waves",
            Scheme::BlockStm => "blockstm",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scheme {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Scheme::ALL.iter().map(Scheme::as_str).collect();
                format!("unknown --exec {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// How a Move executor runs blocks.
#[derive(Clone, Copy, Debug)]
pub struct ExecConfig {
    pub scheme: Scheme,
    /// Worker threads of a parallel scheme (at least one; sequential execution uses none).
    pub threads: usize,
    /// When the adapter's fees reach the fee account (the bare VM has none).
    pub fees: FeeCredit,
    /// Runs last thing on every worker thread (a node records the thread's CPU).
    pub on_thread_exit: Option<fn()>,
    /// A parallel scheme leaves a block whose declared conflicts allow fewer than two
    /// transactions a level to sequential execution (`conflicts.rs`); off, it runs every block
    /// itself, however contended (the tests hold the schemes alone to sequential results).
    pub contention_gate: bool,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            scheme: Scheme::Sequential,
            threads: 1,
            fees: FeeCredit::Block,
            on_thread_exit: None,
            contention_gate: true,
        }
    }
}
