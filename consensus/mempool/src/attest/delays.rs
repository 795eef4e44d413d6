//! How long an author waits for its batch's statements: adapted to how long the committee's
//! statements take, measured on this node's own batches.
//!
//! A fixed wait long enough for a loaded attester is far too long for a withholding one: every
//! batch that names it waits the whole of it, and the author's later batches (released in
//! order) wait behind it. So each statement for one of this node's batches is timed from the
//! batch's sealing, per member, and the wait is [`FACTOR`] times the time within which most of
//! the committee's statements arrive, within [`MIN_WAIT`] and [`MAX_WAIT`].
//!
//! "Most of the committee": each member's delay is the 90th percentile of its last
//! [`SAMPLES`] statements, and the committee's is the smallest delay within which members
//! holding a quorum of stake (2f+1) state. The f slowest members (a Byzantine one that states
//! late on purpose, or never) do not stretch it, and a member with no statements yet counts as
//! slower than any: until a quorum has stated, the wait is [`MAX_WAIT`].

use config::{Committee, Stake};
use crypto::PublicKey;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// The wait is this many times the committee's delay...
pub const FACTOR: u32 = 3;
/// ...at least this: below it, scheduling jitter on a busy machine would cut honest
/// statements off...
pub const MIN_WAIT: Duration = Duration::from_millis(50);
/// ...and at most this: an attester silent this long is slow or Byzantine, and every node then
/// checks the batch itself.
pub const MAX_WAIT: Duration = Duration::from_secs(1);
/// Statements remembered per member.
pub const SAMPLES: usize = 32;

pub struct StatementDelays {
    committee: Committee,
    recent: HashMap<PublicKey, VecDeque<Duration>>,
}

impl StatementDelays {
    pub fn new(committee: Committee) -> Self {
        StatementDelays {
            committee,
            recent: HashMap::new(),
        }
    }

    /// `member`'s statement for one of this node's batches came `delay` after the sealing.
    /// Only members are kept (the table checked the statement's attester).
    pub fn record(&mut self, member: PublicKey, delay: Duration) {
        let samples = self.recent.entry(member).or_default();
        if samples.len() == SAMPLES {
            samples.pop_front();
        }
        samples.push_back(delay);
    }

    /// How long a batch waits for its statements, from its sealing.
    pub fn wait(&self) -> Duration {
        let Some(delay) = self.committee_delay() else {
            return MAX_WAIT;
        };
        delay.saturating_mul(FACTOR).clamp(MIN_WAIT, MAX_WAIT)
    }

    /// The smallest delay within which members holding a quorum of stake state, if they have
    /// stated at all.
    fn committee_delay(&self) -> Option<Duration> {
        let mut members: Vec<(Duration, Stake)> = self
            .recent
            .iter()
            .filter_map(|(member, samples)| {
                let delay = percentile(samples, 90)?;
                Some((delay, self.committee.stake(member)))
            })
            .collect();
        members.sort_unstable();
        let quorum = self.committee.quorum_threshold();
        let mut stake: Stake = 0;
        for (delay, weight) in members {
            stake += weight;
            if stake >= quorum {
                return Some(delay);
            }
        }
        None
    }
}

fn percentile(samples: &VecDeque<Duration>, percent: usize) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted: Vec<Duration> = samples.iter().copied().collect();
    sorted.sort_unstable();
    let index = (sorted.len() - 1) * percent / 100;
    Some(sorted[index])
}

#[cfg(test)]
mod tests {
    use super::*;
    use config::Authority;
    use crypto::KeyPair;

    fn committee(n: u64) -> (Committee, Vec<PublicKey>) {
        let address = "127.0.0.1:1".parse().expect("address");
        let names: Vec<PublicKey> = (0..n).map(|i| KeyPair::from_seed(i).name).collect();
        let authorities = names
            .iter()
            .map(|name| {
                let authority = Authority {
                    stake: 1,
                    consensus_address: address,
                    mempool_address: address,
                    transactions_address: address,
                };
                (*name, authority)
            })
            .collect();
        (Committee { authorities }, names)
    }

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    #[test]
    fn without_a_quorum_of_statements_the_wait_is_the_longest() {
        let (committee, names) = committee(4);
        let mut delays = StatementDelays::new(committee);
        assert_eq!(delays.wait(), MAX_WAIT);
        delays.record(names[0], ms(10));
        delays.record(names[1], ms(10));
        assert_eq!(delays.wait(), MAX_WAIT, "two of four are no quorum");
        delays.record(names[2], ms(30));
        assert_eq!(delays.wait(), ms(90));
    }

    #[test]
    fn the_slowest_f_do_not_stretch_the_wait_and_the_bounds_hold() {
        let (members, names) = committee(4);
        let mut delays = StatementDelays::new(members);
        for _ in 0..SAMPLES {
            delays.record(names[0], ms(5));
            delays.record(names[1], ms(40));
            delays.record(names[2], ms(50));
            // A member that states just under the longest wait, on purpose.
            delays.record(names[3], ms(990));
        }
        assert_eq!(delays.wait(), ms(150));
        // A few late statements of an honest member: its 90th percentile stays.
        delays.record(names[2], ms(400));
        delays.record(names[2], ms(400));
        assert_eq!(delays.wait(), ms(150));
        // Quick statements: the wait stays above its floor.
        let (members, names) = committee(4);
        let mut quick = StatementDelays::new(members);
        for name in &names {
            quick.record(*name, ms(1));
        }
        assert_eq!(quick.wait(), MIN_WAIT);
        // Slow ones: it stays below its ceiling.
        for name in &names {
            for _ in 0..SAMPLES {
                quick.record(*name, ms(2_000));
            }
        }
        assert_eq!(quick.wait(), MAX_WAIT);
    }
}
