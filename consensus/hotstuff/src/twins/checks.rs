//! What a scenario's honest instances must show at its end. A Byzantine member (both twins)
//! may do anything; the properties hold for everyone else.
//!
//! - Safety: no two honest instances (or two lives of one) delivered different blocks at the
//!   same height, and none stopped on a fork (`FatalError`).
//! - No batch twice: no honest life delivered a batch twice (the GC depth exceeds every run, so
//!   within a run a batch committed again is never the window's doing).
//! - Agreement on leaders: for every certificate that opened a round (a stored block's QC, a
//!   TC a block carries), the honest instances that can tell name the same leader.
//! - No usurped round: every block an honest instance stored that carries the certificate of
//!   the round before its own (the one that opened its round: its TC if that is of the round
//!   before, else its QC if that is) is by the leader that certificate elects, on every honest
//!   instance that can tell. A block that also carries an older certificate, whose election
//!   names its author, does not make it the leader of a round another was elected for.
//! - Liveness: after the heal, every honest instance commits a block of a round above every
//!   round any instance had reached at the heal, within `LIVENESS_BOUND`.

use super::instance::{Delivered, Instance};
use super::scenario::Scenario;
use crate::core::Core;
use crate::liveness::leader::Opening;
use crate::messages::{Block, TC};
use crate::wire;
use config::Round;
use crypto::{Digest, Hash, PublicKey};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    Fork {
        height: usize,
        first: (usize, Digest),
        second: (usize, Digest),
    },
    Stopped {
        instance: usize,
        error: String,
    },
    BatchTwice {
        instance: usize,
        batch: Digest,
    },
    Leaders {
        round: Round,
        opening: String,
        leaders: Vec<(usize, PublicKey)>,
    },
    Liveness {
        instance: usize,
        committed: Round,
        round_at_heal: Round,
    },
    Usurped {
        round: Round,
        block: Digest,
        author: PublicKey,
        leaders: Vec<(usize, PublicKey)>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Fork {
                height,
                first,
                second,
            } => write!(
                f,
                "fork at height {height}: instance {} delivered {}, instance {} delivered {}",
                first.0, first.1, second.0, second.1
            ),
            Violation::Stopped { instance, error } => {
                write!(f, "instance {instance} stopped: {error}")
            }
            Violation::BatchTwice { instance, batch } => {
                write!(f, "instance {instance} delivered batch {batch} twice")
            }
            Violation::Leaders {
                round,
                opening,
                leaders,
            } => write!(
                f,
                "round {round} opened by {opening}: leaders {:?}",
                leaders
                    .iter()
                    .map(|(i, l)| format!("{i}:{l}"))
                    .collect::<Vec<_>>()
            ),
            Violation::Liveness {
                instance,
                committed,
                round_at_heal,
            } => write!(
                f,
                "instance {instance} committed up to round {committed} only; rounds reached \
                 {round_at_heal} at the heal"
            ),
            Violation::Usurped {
                round,
                block,
                author,
                leaders,
            } => write!(
                f,
                "block {block} of round {round} by {author} was stored, but the certificate \
                 of round {} it carries elects {:?}",
                round.saturating_sub(1),
                leaders
                    .iter()
                    .map(|(i, l)| format!("{i}:{l}"))
                    .collect::<Vec<_>>()
            ),
        }
    }
}

/// Checks the run's end state; returns the violations and the highest round an honest
/// instance committed.
pub fn check(
    scenario: &Scenario,
    instances: &[Instance],
    cores: &[Option<Core>],
    round_at_heal: Round,
) -> (Vec<Violation>, Round) {
    let honest: Vec<&Instance> = instances
        .iter()
        .filter(|i| scenario.honest(i.index))
        .collect();
    let mut violations = Vec::new();
    safety(&honest, &mut violations);
    for instance in &honest {
        for error in &instance.fatal {
            violations.push(Violation::Stopped {
                instance: instance.index,
                error: error.to_string(),
            });
        }
    }
    leaders(scenario, &honest, cores, &mut violations);
    let mut highest = 0;
    for instance in &honest {
        let committed = instance
            .lives
            .last()
            .and_then(|life| life.lock().ok().map(|d| d.last().map_or(0, |d| d.round)))
            .unwrap_or(0);
        highest = highest.max(committed);
        if committed <= round_at_heal {
            violations.push(Violation::Liveness {
                instance: instance.index,
                committed,
                round_at_heal,
            });
        }
    }
    (violations, highest)
}

fn safety(honest: &[&Instance], violations: &mut Vec<Violation>) {
    // Every honest life from genesis: heights line up.
    let lives: Vec<(usize, Vec<Delivered>)> = honest
        .iter()
        .flat_map(|instance| {
            instance.lives.iter().map(|life| {
                let delivered = life.lock().map(|d| d.clone()).unwrap_or_default();
                (instance.index, delivered)
            })
        })
        .collect();
    let mut at_height: BTreeMap<usize, (usize, Digest)> = BTreeMap::new();
    for (instance, delivered) in &lives {
        let mut batches = HashSet::new();
        for (height, block) in delivered.iter().enumerate() {
            match at_height.get(&height) {
                Some(first) if first.1 != block.block => violations.push(Violation::Fork {
                    height,
                    first: *first,
                    second: (*instance, block.block),
                }),
                Some(_) => {}
                None => {
                    at_height.insert(height, (*instance, block.block));
                }
            }
            for batch in &block.batches {
                if !batches.insert(*batch) {
                    violations.push(Violation::BatchTwice {
                        instance: *instance,
                        batch: *batch,
                    });
                }
            }
        }
    }
}

/// A certificate that opened a round, as the leader rule reads it.
enum Opened {
    Qc(Digest),
    Tc(TC),
}

fn leaders(
    scenario: &Scenario,
    honest: &[&Instance],
    cores: &[Option<Core>],
    violations: &mut Vec<Violation>,
) {
    let mut openings: BTreeMap<(Round, Digest), (Round, Opened)> = BTreeMap::new();
    let mut blocks: BTreeMap<Digest, Block> = BTreeMap::new();
    for instance in honest {
        let Ok(stored) = instance.store().blocks().scan() else {
            continue;
        };
        for (_, bytes) in stored {
            let Ok(block) = wire::decode_block(&bytes) else {
                continue;
            };
            let digest = block.digest();
            blocks.entry(digest).or_insert_with(|| block.clone());
            openings
                .entry((block.round + 1, digest))
                .or_insert((block.round + 1, Opened::Qc(digest)));
            if let Some(tc) = block.tc {
                openings
                    .entry((block.round, digest))
                    .or_insert((block.round, Opened::Tc(tc)));
            }
        }
    }
    for ((_, key), (round, opened)) in &openings {
        let opening = match opened {
            Opened::Qc(digest) => Opening::Qc(digest),
            Opened::Tc(tc) => Opening::Tc(tc),
        };
        let named: Vec<(usize, PublicKey)> = honest
            .iter()
            .filter_map(|instance| {
                let core = cores.get(instance.index)?.as_ref()?;
                Some((instance.index, core.leader_for(*round, opening)?))
            })
            .collect();
        let distinct: BTreeSet<&PublicKey> = named.iter().map(|(_, leader)| leader).collect();
        if distinct.len() > 1 {
            let what = match opened {
                Opened::Qc(_) => format!("the QC of block {key}"),
                Opened::Tc(tc) => format!("a TC of round {} (in block {key})", tc.round),
            };
            violations.push(Violation::Leaders {
                round: *round,
                opening: what,
                leaders: named,
            });
        }
    }
    for (digest, block) in &blocks {
        usurped(honest, cores, *digest, block, violations);
    }
    let _ = scenario;
}

/// Whether `block`'s author is the leader the certificate of the round before elects, on every
/// honest instance that can tell. A block with no certificate of the round before is not
/// looked at: no honest instance votes for it (`safety::rules`), and nothing here says whom
/// its round should have had.
fn usurped(
    honest: &[&Instance],
    cores: &[Option<Core>],
    digest: Digest,
    block: &Block,
    violations: &mut Vec<Violation>,
) {
    let Some(before) = block.round.checked_sub(1) else {
        return;
    };
    let opening = match &block.tc {
        Some(tc) if tc.round == before => Opening::Tc(tc),
        _ if block.qc.round == before => Opening::Qc(&block.qc.hash),
        _ => return,
    };
    let named: Vec<(usize, PublicKey)> = honest
        .iter()
        .filter_map(|instance| {
            let core = cores.get(instance.index)?.as_ref()?;
            Some((instance.index, core.leader_for(block.round, opening)?))
        })
        .collect();
    if named.iter().any(|(_, leader)| *leader != block.author) {
        violations.push(Violation::Usurped {
            round: block.round,
            block: digest,
            author: block.author,
            leaders: named,
        });
    }
}
