//! `--verify=attested`: the pieces the mempool's attester and the verifier stage share. One
//! verifier pool serves both, and the ingress check (its threads are the `verifier` stage's in
//! the CPU table, so the table shows what attesting costs), and one table of statements.

use clap::ValueEnum;
use config::{Committee, Parameters};
use crypto::{Digest, ParallelVerifier, PublicKey};
use mempool::attest::{Attestations, Attesting, Conduct, Verdict};
use mempool::CheckedBatches;
use stages::verifier::{check_batch, KnownBatches};
use std::sync::Arc;

/// `--verify`: who checks a batch's signatures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Verify {
    #[default]
    All,
    Attested,
}

impl Verify {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verify::All => "all",
            Verify::Attested => "attested",
        }
    }
}

/// `--misbehave` (a hidden test knob): how a Byzantine member attests, to measure what it costs
/// the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Misbehave {
    /// Checks nothing and states nothing.
    SilentAttester,
    /// States wrong positions (keeping its true finding for itself).
    LyingAttester,
    /// States nothing true and floods every peer with the largest statements, for batches that
    /// do not exist.
    StatementFlood,
}

impl Misbehave {
    fn conduct(misbehave: Option<Misbehave>) -> Conduct {
        match misbehave {
            None => Conduct::Honest,
            Some(Misbehave::SilentAttester) => Conduct::Silent,
            Some(Misbehave::LyingAttester) => Conduct::Lying,
            Some(Misbehave::StatementFlood) => Conduct::Flooding,
        }
    }
}

/// What the mempool's attester gets under `--verify=attested`, and what the verifier stage asks
/// of a batch: whether this node sealed it from checked transactions (`checked`), then the
/// table of statements.
pub fn attesting(
    misbehave: Option<Misbehave>,
    name: PublicKey,
    committee: &Committee,
    parameters: &Parameters,
    verifier: Arc<ParallelVerifier>,
    checked: CheckedBatches,
) -> (Attesting, Arc<dyn KnownBatches>) {
    let table = Attestations::new(name, committee.clone(), mempool::attest_limits(parameters));
    let mempool = Attesting {
        // Decoding on the pool too: all of a check is the verifier's CPU in the stage table.
        check: Arc::new(move |batch| verifier.install(|| check_batch(&verifier, batch).invalid())),
        table: table.clone(),
        conduct: Misbehave::conduct(misbehave),
    };
    (mempool, Arc::new(Statements { table, checked }))
}

/// This node's own checked batches and the table, as the verifier stage asks them.
struct Statements {
    table: Attestations,
    checked: CheckedBatches,
}

impl KnownBatches for Statements {
    fn known_invalid(&self, batch: &Digest) -> Option<Vec<u32>> {
        if self.checked.contains(batch) {
            return Some(Vec::new());
        }
        match self.table.verdict(batch) {
            Verdict::Checked(invalid) | Verdict::Attested(invalid) => Some(invalid),
            Verdict::Unattested => None,
        }
    }

    fn forget(&self, batch: &Digest) {
        self.checked.forget(batch);
        self.table.forget(batch);
    }
}
