//! What a node attests with ([`Attesting`]): the application's check of a batch, the table of
//! statements, and how its attester behaves ([`Conduct`]).

use super::table::Attestations;
use batch::Batch;
use std::sync::Arc;

/// The positions, in batch order, of the transactions of `batch` that are invalid.
pub type CheckBatch = dyn Fn(&Batch) -> Vec<u32> + Send + Sync;

/// What a node attests with: the application's check, the table of statements it shares with
/// the stage that executes committed batches, and how its attester behaves (honestly, but for
/// the test knob that makes a member misbehave).
#[derive(Clone)]
pub struct Attesting {
    pub check: Arc<CheckBatch>,
    pub table: Attestations,
    pub conduct: Conduct,
}

impl std::fmt::Debug for Attesting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attesting")
    }
}

/// How a member behaves as an attester. Only `Honest` is the protocol: the others are a test
/// knob (`node run --misbehave`) that makes a member Byzantine, to measure what it costs the
/// others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conduct {
    #[default]
    Honest,
    /// Checks nothing and states nothing (its own batches included): every batch that names it
    /// waits for its statement in vain, once, and is then checked by every node.
    Silent,
    /// Checks what it attests and keeps its true finding for itself, but states wrong
    /// positions: its statements never match an honest attester's.
    Lying,
    /// States nothing true, like `Silent`, and floods every peer with statements for batches
    /// that do not exist, each naming itself author (an author always attests its own batch)
    /// and every position of the largest batch invalid, as fast as its connections take them:
    /// what the table's bound per member in bytes ([`super::Limits`]) must hold.
    Flooding,
}
