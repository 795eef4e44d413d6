//! The generator on every CI run, a larger set by hand, and one seed replayed:
//!
//! ```text
//! cargo test -p hotstuff --release -- twins                       # the CI-sized set
//! TWINS_SCENARIOS=100000 cargo test -p hotstuff --release -- --ignored twins
//! TWINS_SEED=1234 cargo test -p hotstuff --release -- --ignored twins_replay
//! ```

use super::*;
use std::ops::Range;

/// Scenarios every CI run checks.
const CI_SCENARIOS: u64 = 2_000;

/// Runs the scenarios of `seeds` on every core and returns those with violations.
fn run_seeds(seeds: Range<u64>) -> Vec<Outcome> {
    let candidates = candidates();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let (first, count) = (seeds.start, seeds.end - seeds.start);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let candidates = &candidates;
                scope.spawn(move || {
                    (first + worker..first + count)
                        .step_by(threads as usize)
                        .map(|seed| run(Scenario::generate(seed, candidates)))
                        .filter(|outcome| !outcome.violations.is_empty())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().expect("a worker panicked"))
            .collect()
    })
}

fn report(seeds: &Range<u64>, failed: &[Outcome]) -> String {
    let mut text = format!(
        "{} scenarios (seeds {}..{}), {} with violations",
        seeds.end - seeds.start,
        seeds.start,
        seeds.end,
        failed.len()
    );
    for outcome in failed.iter().take(20) {
        text.push_str(&format!(
            "\n  seed {} ({:?}, Byzantine member {}; {} messages delivered, {} cut by \
             partitions, {} dropped):",
            outcome.scenario.seed,
            outcome.scenario.rule,
            outcome.scenario.twin,
            outcome.traffic.delivered,
            outcome.traffic.partitioned,
            outcome.traffic.dropped
        ));
        for violation in outcome.violations.iter().take(3) {
            text.push_str(&format!("\n    {violation}"));
        }
        for (instance, core) in outcome.cores.iter().enumerate() {
            text.push_str(&format!("\n    instance {instance}: {core}"));
        }
    }
    text
}

#[test]
fn twins_ci_scenarios_find_no_violation() {
    let seeds = 0..CI_SCENARIOS;
    let failed = run_seeds(seeds.clone());
    let report = report(&seeds, &failed);
    println!("{report}");
    assert!(failed.is_empty(), "{report}");
}

#[test]
fn twins_parameters_are_valid() {
    for rule in [
        config::LeaderRule::RoundRobin,
        config::LeaderRule::Reputation,
    ] {
        assert_eq!(super::parameters(rule).validate(), Ok(()));
    }
}

/// A seed is a scenario: run twice, it does the same thing (what the network delivered and
/// dropped, what committed).
#[test]
fn twins_a_seed_replays_exactly() {
    let candidates = candidates();
    for seed in [3, 17, 101] {
        let first = run(Scenario::generate(seed, &candidates));
        let again = run(Scenario::generate(seed, &candidates));
        assert_eq!(format!("{first:?}"), format!("{again:?}"), "seed {seed}");
        assert!(first.committed_round > 0, "seed {seed} committed nothing");
    }
}

/// By hand: `TWINS_SCENARIOS` (default 50,000) seeds from `TWINS_FIRST_SEED` (default
/// `CI_SCENARIOS`, past the CI set).
#[test]
#[ignore]
fn twins_large_set() {
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let first = number("TWINS_FIRST_SEED", CI_SCENARIOS);
    let seeds = first..first + number("TWINS_SCENARIOS", 50_000);
    let failed = run_seeds(seeds.clone());
    let report = report(&seeds, &failed);
    println!("{report}");
    assert!(failed.is_empty(), "{report}");
}

/// By hand: the scenario of `TWINS_SEED`, with what it came to.
#[test]
#[ignore]
fn twins_replay() {
    let seed = std::env::var("TWINS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let outcome = run(Scenario::generate(seed, &candidates()));
    println!("{outcome:#?}");
    for violation in &outcome.violations {
        println!("{violation}");
    }
    assert!(outcome.violations.is_empty());
}
