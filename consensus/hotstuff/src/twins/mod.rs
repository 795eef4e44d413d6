//! Twins (Bano et al., "Twins: BFT Systems Made Robust", OPODIS 2021): scenarios generated
//! rather than written, run on real consensus cores.
//!
//! A Byzantine member is modelled as two honest instances running with its key (twins), which
//! the scenario puts in different partitions: whatever one twin signs (a proposal, a vote, a
//! timeout) the other may sign differently, which is equivocation, the behaviour BFT protocols
//! must survive. Every round of a scenario has its own partition of the instances, drawn from
//! every partition into at most three groups (`scenario.rs`); which member is Byzantine and
//! which leader rule runs are drawn too (the rules choose the leaders, so the members they elect
//! vary with the Byzantine member's place and the partitions), and so are link delays, dropped
//! messages and one honest instance's crash and restart.
//!
//! Twins alone only equivocate the way two honest cores can. So in most scenarios one of the two
//! also lies (`liar.rs`): what its core sends is rewritten on the way out, signed with the
//! member's real key, with the lies the seed picks (`scenario::Lies`): proposals carrying an older
//! certificate than the round's, including blocks of rounds it was not elected for; different
//! proposals, votes and timeouts of one round to different peers; votes and timeouts withheld or
//! held until just before the receivers' timers fire; old signed messages sent again.
//!
//! Five instances (four members, one twinned) run their real cores, helpers and committers on
//! one thread, on tokio's paused clock, joined by a simulated network (`network.rs`). Each
//! scenario is a function of its seed: it replays exactly (a test checks it). After the run, the
//! honest instances are checked (`checks.rs`): no two commit different blocks at a height, none
//! delivers a batch twice, they name the same leader from the same certificate, no block they
//! stored is by another member than the leader the certificate of its round before elects, and
//! after the network heals every one of them commits again within a bound.
//!
//! Why an in-process network of our own rather than `turmoil`: the instances already talk
//! through the senders of the `network` crate, and a tap on those (`Tap`) is all the
//! simulation needs; turmoil would replace tokio's sockets under the senders, which adds
//! nothing here (no byte stream needs simulating) and costs the senders' connection machinery
//! in every scenario. Thousands of scenarios must run in a few seconds each CI run.

mod checks;
mod choice;
mod instance;
mod liar;
mod network;
mod scenario;
#[cfg(test)]
mod tests;

pub use checks::Violation;
pub use scenario::Scenario;

use crate::core::Core;
use config::{Authority, Committee, LeaderRule, Parameters};
use crypto::KeyPair;
use instance::{Instance, Wiring};
use liar::Liar;
use network::{SimNetwork, Traffic};
use scenario::{partitions, HEAL_AT, LIVENESS_BOUND, MEMBERS};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

/// How often each member's stand-in mempool hands its instances a new batch.
const BATCH_INTERVAL: Duration = Duration::from_millis(150);

/// What one scenario came to.
#[derive(Debug)]
pub struct Outcome {
    pub scenario: Scenario,
    pub violations: Vec<Violation>,
    /// The highest round an honest instance committed.
    pub committed_round: config::Round,
    pub traffic: Traffic,
    /// Where each instance's core stood at the end.
    pub cores: Vec<String>,
}

/// The parameters every instance runs with: small windows, so the reputation rule reads few
/// blocks (and is quick to disagree if it can); a GC depth past any scenario's rounds, so a
/// batch committed twice within a run is a violation, never the window's doing.
fn parameters(rule: LeaderRule) -> Parameters {
    Parameters {
        leader: rule,
        leader_window: 3,
        timeout_delay: 1_000,
        sync_retry_delay: 10_000,
        max_batch_delay: 100,
        gc_depth: 1_000,
        max_pending_sync_blocks: 4_000,
        // No application checkpoints in a scenario (nothing executes), so no state sync: a
        // node behind catches up by fetching blocks, up to `gc_depth` of them.
        checkpoint_rounds: 500,
        ..Parameters::default()
    }
}

/// The committee: member i listens at 10.0.0.i (never bound: the network is simulated).
fn committee(keys: &[KeyPair]) -> Committee {
    let authorities = keys
        .iter()
        .enumerate()
        .map(|(i, keys)| {
            let address = SocketAddr::from(([10, 0, 0, i as u8], 9000));
            let authority = Authority {
                stake: 1,
                consensus_address: address,
                mempool_address: address,
                transactions_address: address,
            };
            (keys.name, authority)
        })
        .collect();
    Committee { authorities }
}

/// The partitions a round may have: every partition of the instances into at most 3 groups.
pub fn candidates() -> Vec<scenario::Partition> {
    partitions(Scenario::instances(), 3)
}

/// Runs `scenario` on a runtime of its own (one thread, paused clock) and checks it.
pub fn run(scenario: Scenario) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(simulate(scenario)),
        Err(e) => panic!("no runtime for a scenario: {e}"),
    }
}

async fn simulate(scenario: Scenario) -> Outcome {
    let scenario = Arc::new(scenario);
    let keys: Vec<KeyPair> = (0..MEMBERS as u64)
        .map(|i| KeyPair::from_seed(1_000 + i))
        .collect();
    let committee = committee(&keys);
    let instances_n = Scenario::instances();
    let mut at_address: HashMap<SocketAddr, Vec<usize>> = HashMap::new();
    for instance in 0..instances_n {
        let member = scenario.member_of(instance);
        let address = committee.authorities[&keys[member].name].consensus_address;
        at_address.entry(address).or_default().push(instance);
    }
    let (tx_sent, rx_sent) = mpsc::unbounded_channel();
    let inboxes = Arc::new(Mutex::new(vec![None; instances_n]));
    let healed = Arc::new(AtomicBool::new(false));
    let parameters = parameters(scenario.rule);
    let liar = scenario.lies.map(|lies| {
        Liar::new(liar::Setting {
            instance: lies.liar,
            instances: instances_n,
            keys: keys[scenario.twin].clone(),
            committee: &committee,
            rule: scenario.rule,
            window: parameters.leader_window,
            seed: scenario.seed,
            lies,
            timeout_delay: Duration::from_millis(parameters.timeout_delay),
            max_link_delay: scenario.max_delay,
        })
    });
    let traffic = SimNetwork::spawn(
        scenario.clone(),
        healed.clone(),
        at_address,
        inboxes.clone(),
        rx_sent,
        liar,
    );
    let wiring = Wiring {
        committee,
        parameters,
        tx_sent,
        inboxes,
    };
    let mut instances: Vec<Instance> = (0..instances_n)
        .map(|i| Instance::new(i, keys[scenario.member_of(i)].clone()))
        .collect();
    for instance in &mut instances {
        instance.start(&wiring);
    }

    let start = Instant::now();
    let mut next_batch = start;
    let mut batch_number = 0u64;
    let mut restart = scenario.restart;
    // Until the heal, then until every honest instance committed again (or the bound passed).
    let mut deadline = start + HEAL_AT;
    let mut round_at_heal = None;
    loop {
        let now = Instant::now();
        if now >= next_batch {
            for member in 0..MEMBERS {
                let batch = instance::batch(member, batch_number);
                for instance in &instances {
                    let _ = instance
                        .store()
                        .batches()
                        .write(batch.digest(), batch.bytes().clone())
                        .await;
                }
                for instance in instances
                    .iter()
                    .filter(|i| scenario.member_of(i.index) == member)
                {
                    instance.offer(batch.digest());
                }
            }
            batch_number += 1;
            next_batch += BATCH_INTERVAL;
        }
        if let Some(planned) = restart {
            let instance = &mut instances[planned.instance];
            if instance.is_running() && now >= start + planned.at {
                instance.stop(&wiring).await;
            } else if !instance.is_running() && now >= start + planned.back_at {
                instance.start(&wiring);
                restart = None;
            }
        }
        let honest = || instances.iter().filter(|i| scenario.honest(i.index));
        match round_at_heal {
            None => {
                let past =
                    restart.is_none() && honest().all(|i| i.round() > scenario::PARTITIONED_ROUNDS);
                if past || now >= deadline {
                    healed.store(true, Ordering::Relaxed);
                    round_at_heal = Some(instances.iter().map(Instance::round).max().unwrap_or(0));
                    deadline = now + LIVENESS_BOUND;
                }
            }
            Some(at_heal) => {
                if now >= deadline || honest().all(|i| i.committed_round() > at_heal) {
                    break;
                }
            }
        }
        let mut wake = next_batch.min(deadline);
        if let Some(planned) = restart {
            let at = if instances[planned.instance].is_running() {
                planned.at
            } else {
                planned.back_at
            };
            wake = wake.min(start + at);
        }
        sleep_until(wake).await;
    }

    let mut cores: Vec<Option<Core>> = Vec::with_capacity(instances_n);
    for instance in &mut instances {
        cores.push(instance.stop(&wiring).await);
    }
    let traffic = traffic.lock().map(|t| *t).unwrap_or_default();
    let (violations, committed_round) =
        checks::check(&scenario, &instances, &cores, round_at_heal.unwrap_or(0));
    let cores = cores
        .iter()
        .map(|core| core.as_ref().map_or("stopped".into(), Core::describe))
        .collect();
    Outcome {
        scenario: (*scenario).clone(),
        violations,
        committed_round,
        traffic,
        cores,
    }
}
