//! A scenario: who is Byzantine, which leader rule runs, how each round partitions the
//! instances, the network's delays, drops and restarts, and which lies one of the Byzantine
//! member's instances tells (`Lies`). All of it follows from one seed, so a scenario that fails
//! replays exactly from its seed.

use config::{LeaderRule, Round};
use std::time::Duration;

/// Committee members in a scenario. Four tolerate one Byzantine member, the smallest committee
/// in which equivocation, partitions and quorums interact.
pub const MEMBERS: usize = 4;

/// 2f + 1 of `MEMBERS`.
const QUORUM: usize = 3;

/// Rounds whose messages follow a partition; later rounds' are delivered to everyone.
pub const PARTITIONED_ROUNDS: Round = 6;

/// The network heals (every link delivers, drops stop, and liveness is measured from there) once
/// every honest instance is past the partitioned rounds and the restarted one is back, or at
/// this time at the latest: rounds stuck behind a partition with no quorum in any group would
/// otherwise never end.
pub const HEAL_AT: Duration = Duration::from_secs(20);

/// The bound on liveness: after the heal, every honest instance commits again within it.
pub const LIVENESS_BOUND: Duration = Duration::from_secs(20);

/// A deterministic stream of numbers from a seed: SplitMix64 (Steele, Lea and Flood, "Fast
/// splittable pseudorandom number generators", 2014), small enough to keep the scenario's
/// meaning independent of any crate's generator.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

/// Which group each instance is in, for one round's messages: instances in different groups
/// do not hear each other.
pub type Partition = Vec<u8>;

/// An honest instance that crashes (its tasks stop, its store stays, as a process crash on a
/// durable store) and comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restart {
    pub instance: usize,
    pub at: Duration,
    pub back_at: Duration,
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub seed: u64,
    pub rule: LeaderRule,
    /// The Byzantine member: two instances run with its key.
    pub twin: usize,
    /// The partition of each round `1..=PARTITIONED_ROUNDS`, over `instances()` instances.
    pub partitions: Vec<Partition>,
    /// Link delays are drawn uniformly from 1 ms to this.
    pub max_delay: Duration,
    /// Per mille of messages lost before the heal.
    pub drops_per_mille: u64,
    pub restart: Option<Restart>,
    /// What the lying instance, if any, rewrites of what it sends (`liar.rs`).
    pub lies: Option<Lies>,
}

/// How a lying instance holds back its votes and timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withhold {
    /// Never sent.
    Drop,
    /// Sent so late that they arrive just before the receivers' round timers fire.
    Delay,
}

/// Which lies a scenario's lying instance tells: one of the Byzantine member's two instances
/// runs its core as its twin does, and what the core sends is rewritten on its way out, signed
/// with the member's real key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lies {
    /// The instance that lies (one of the Byzantine member's two).
    pub liar: usize,
    /// Proposals carry a certificate older than the one that opened their round: its own
    /// proposals get an old TC or an older QC, and in rounds it does not lead it proposes with
    /// the round before's QC and an old TC whose election names it.
    pub old_certificates: bool,
    /// Different signed messages of one round to different peers: two versions of its
    /// proposals (another QC signer set, or another payload), votes for other blocks of the
    /// round, timeouts reporting a lower high QC.
    pub equivocate: bool,
    pub withhold: Option<Withhold>,
    /// Signed messages it heard or sent earlier go out again, to a peer and at a time drawn.
    pub replay: bool,
}

impl Lies {
    /// The lies of a scenario whose Byzantine member is `twin`, drawn after everything else
    /// (so adding lies left the rest of every seed's scenario as it was): a quarter of the
    /// scenarios keep two honest twins, the rest have a liar telling each lie with odds 1/2.
    fn draw(rng: &mut SplitMix, twin: usize) -> Option<Self> {
        if rng.below(4) == 0 {
            return None;
        }
        let liar = if rng.below(2) == 0 { twin } else { MEMBERS };
        let mut coin = || rng.below(2) == 0;
        let old_certificates = coin();
        let equivocate = coin();
        let withhold = match rng.below(4) {
            0 => Some(Withhold::Drop),
            1 => Some(Withhold::Delay),
            _ => None,
        };
        let replay = rng.below(2) == 0;
        Some(Lies {
            liar,
            old_certificates,
            equivocate,
            withhold,
            replay,
        })
    }
}

/// Every partition of `instances` instances into at most `groups` groups, each once (groups are
/// numbered by first appearance, so relabelings are not repeated).
pub fn partitions(instances: usize, groups: u8) -> Vec<Partition> {
    let mut all = Vec::new();
    let mut current = vec![0u8; instances];
    fn fill(at: usize, used: u8, groups: u8, current: &mut Vec<u8>, all: &mut Vec<Partition>) {
        if at == current.len() {
            all.push(current.clone());
            return;
        }
        for group in 0..=used.min(groups - 1) {
            current[at] = group;
            let used = if group == used { used + 1 } else { used };
            fill(at + 1, used, groups, current, all);
        }
    }
    fill(0, 0, groups, &mut current, &mut all);
    all
}

impl Scenario {
    /// Instances: one per member, plus the Byzantine member's twin (the last).
    pub fn instances() -> usize {
        MEMBERS + 1
    }

    /// The member whose key instance `instance` runs with.
    pub fn member_of(&self, instance: usize) -> usize {
        if instance < MEMBERS {
            instance
        } else {
            self.twin
        }
    }

    /// Whether `instance` is honest (not one of the Byzantine member's two).
    pub fn honest(&self, instance: usize) -> bool {
        self.member_of(instance) != self.twin
    }

    /// The scenario of `seed`: the rule, the Byzantine member, then for every partitioned round
    /// one of `candidates` (the enumerated partitions), the delays, drops and a restart.
    pub fn generate(seed: u64, candidates: &[Partition]) -> Self {
        let mut rng = SplitMix::new(seed);
        let rule = if rng.below(2) == 0 {
            LeaderRule::RoundRobin
        } else {
            LeaderRule::Reputation
        };
        let twin = rng.below(MEMBERS as u64) as usize;
        let member_of = |instance: usize| if instance < MEMBERS { instance } else { twin };
        // A round whose partition leaves no group a quorum of members stalls every instance in
        // it until the heal, and the rounds after it never happen: such partitions are drawn
        // only when nothing else is (they are the heal's fallback, not the generator's aim).
        let has_quorum = |partition: &Partition| {
            (0..3u8).any(|group| {
                let members: std::collections::BTreeSet<usize> = partition
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| **g == group)
                    .map(|(instance, _)| member_of(instance))
                    .collect();
                members.len() >= QUORUM
            })
        };
        let with_quorum: Vec<&Partition> = candidates.iter().filter(|p| has_quorum(p)).collect();
        let partitions = (0..PARTITIONED_ROUNDS)
            .map(|_| match with_quorum.len() as u64 {
                0 => candidates[rng.below(candidates.len() as u64) as usize].clone(),
                n => with_quorum[rng.below(n) as usize].clone(),
            })
            .collect();
        let max_delay = Duration::from_millis(1 + rng.below(50));
        let drops_per_mille = [0, 0, 10, 50][rng.below(4) as usize];
        let restart = (rng.below(4) == 0).then(|| {
            let honest: Vec<usize> = (0..MEMBERS).filter(|m| *m != twin).collect();
            let instance = honest[rng.below(honest.len() as u64) as usize];
            let at = Duration::from_millis(rng.below(3_000));
            let down = Duration::from_millis(500 + rng.below(3_000));
            Restart {
                instance,
                at,
                back_at: at + down,
            }
        });
        let lies = Lies::draw(&mut rng, twin);
        Scenario {
            seed,
            rule,
            twin,
            partitions,
            max_delay,
            drops_per_mille,
            restart,
            lies,
        }
    }

    /// Whether a message of `round` from `from` reaches `to` before the heal.
    pub fn connected(&self, round: Round, from: usize, to: usize) -> bool {
        match self.partitions.get((round as usize).wrapping_sub(1)) {
            Some(partition) if round >= 1 => partition[from] == partition[to],
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bell numbers: the partitions of 5 into at most 2 groups are 2^4 = 16, into at most 3,
    /// 1 + 15 + 25 = 41.
    #[test]
    fn every_partition_once() {
        assert_eq!(partitions(5, 2).len(), 16);
        assert_eq!(partitions(5, 3).len(), 41);
        assert_eq!(partitions(3, 3).len(), 5);
        let all = partitions(5, 3);
        let unique: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
    }

    #[test]
    fn a_seed_gives_one_scenario() {
        let candidates = partitions(Scenario::instances(), 3);
        let a = Scenario::generate(7, &candidates);
        let b = Scenario::generate(7, &candidates);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_ne!(
            format!("{a:?}"),
            format!("{:?}", Scenario::generate(8, &candidates))
        );
    }
}
