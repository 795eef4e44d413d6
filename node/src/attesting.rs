//! `--verify=attested`: the pieces the mempool's attester and the verifier stage share. One
//! verifier pool serves both (its threads are the `verifier` stage's in the CPU table, so the
//! table shows what attesting costs), and one table of statements.

use anyhow::{Context, Result};
use clap::ValueEnum;
use config::{Committee, Parameters};
use crypto::{Digest, ParallelVerifier, PublicKey};
use mempool::attest::{Attestations, Attesting, Conduct, Verdict};
use stages::pipeline::Attested;
use stages::verifier::{check_batch, AttestedBatches};
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
}

impl Misbehave {
    fn conduct(misbehave: Option<Misbehave>) -> Conduct {
        match misbehave {
            None => Conduct::Honest,
            Some(Misbehave::SilentAttester) => Conduct::Silent,
            Some(Misbehave::LyingAttester) => Conduct::Lying,
        }
    }
}

/// What the mempool and the stages get under `--verify`: nothing under `all`.
pub fn attesting(
    verify: Verify,
    misbehave: Option<Misbehave>,
    name: PublicKey,
    committee: &Committee,
    parameters: &Parameters,
    verifier_threads: usize,
) -> Result<Option<(Attesting, Attested)>> {
    if verify == Verify::All {
        return Ok(None);
    }
    let verifier =
        Arc::new(ParallelVerifier::new(verifier_threads).context("starting the verifier pool")?);
    let table = Attestations::new(name, committee.clone(), mempool::attest_limits(parameters));
    let pool = verifier.clone();
    let mempool = Attesting {
        // Decoding on the pool too: all of a check is the verifier's CPU in the stage table.
        check: Arc::new(move |batch| pool.install(|| check_batch(&pool, batch).invalid())),
        table: table.clone(),
        conduct: Misbehave::conduct(misbehave),
    };
    let stages = Attested {
        verifier,
        batches: Arc::new(Statements(table)),
    };
    Ok(Some((mempool, stages)))
}

/// The table, as the verifier stage asks it.
struct Statements(Attestations);

impl AttestedBatches for Statements {
    fn known_invalid(&self, batch: &Digest) -> Option<Vec<u32>> {
        match self.0.verdict(batch) {
            Verdict::Checked(invalid) | Verdict::Attested(invalid) => Some(invalid),
            Verdict::Unattested => None,
        }
    }

    fn forget(&self, batch: &Digest) {
        self.0.forget(batch);
    }
}
