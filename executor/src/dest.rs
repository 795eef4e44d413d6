//! Whom a load's transactions pay (`--dest`): the contention a load puts on the state, as a
//! setting. A parallel executor can only run side by side what touches different accounts, so
//! the choice of payee decides, before any VM runs, how much of a block could run in parallel.
//!
//! - `ring`: account i pays account i + 1 of its generator's accounts (the chain every generator
//!   sent before the setting existed): a transaction touches the payee the next one pays from.
//! - `uniform`: the payee is any other genesis account, drawn from a seeded generator.
//! - `hot:K`: the payee is one of the first K genesis accounts, drawn the same way; `hot:1`
//!   makes every transaction touch one account, as the hotspot of Blockbench's and H-Store's
//!   SmallBank does.
//!
//! The transfer and SmallBank (its payments and amalgamations) pay someone; the other workloads
//! touch only the sender's state and ignore the setting.

use crate::load::splitmix64;
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dest {
    #[default]
    Ring,
    Uniform,
    /// The first K genesis accounts receive every payment.
    Hot(usize),
}

impl Dest {
    /// Whether a load over `accounts` genesis accounts can pay this way.
    pub fn check(&self, accounts: usize) -> Result<(), String> {
        match *self {
            Dest::Hot(hot) if hot > accounts => Err(format!(
                "--dest=hot:{hot} needs at least {hot} genesis accounts, there are {accounts}"
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dest::Ring => f.write_str("ring"),
            Dest::Uniform => f.write_str("uniform"),
            Dest::Hot(hot) => write!(f, "hot:{hot}"),
        }
    }
}

impl FromStr for Dest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ring" => Ok(Dest::Ring),
            "uniform" => Ok(Dest::Uniform),
            _ => {
                let hot = s
                    .strip_prefix("hot:")
                    .and_then(|k| k.parse::<usize>().ok())
                    .filter(|k| *k > 0);
                hot.map(Dest::Hot).ok_or_else(|| {
                    format!("unknown --dest {s:?}; expected ring, uniform or hot:K with K >= 1")
                })
            }
        }
    }
}

/// The payees of one generator: deterministic, so the same generator sends the same load every
/// run, and a pure function of the transaction's number, so a generator may build its
/// transactions in parallel.
#[derive(Clone, Copy, Debug)]
pub struct Payees {
    dest: Dest,
    /// Mixed once, so that generators with nearby seeds draw unrelated sequences.
    seed: u64,
    accounts: usize,
}

impl Payees {
    /// `seed` tells generators apart (a client's index); `accounts` is the genesis's count.
    pub fn new(dest: Dest, seed: u64, accounts: usize) -> Self {
        Payees {
            dest,
            seed: splitmix64(seed),
            accounts,
        }
    }

    pub fn dest(&self) -> Dest {
        self.dest
    }

    /// The payee of transaction `k` of this generator, as an index into the genesis accounts:
    /// `sender` sends it and `ring_next` is the account the ring pays after the sender.
    pub fn payee(&self, k: u64, sender: usize, ring_next: usize) -> usize {
        let draw = splitmix64(self.seed ^ k);
        match self.dest {
            Dest::Ring => ring_next,
            Dest::Uniform if self.accounts < 2 => sender,
            // Any account but the sender, each as likely.
            Dest::Uniform => {
                let other = (draw % (self.accounts as u64 - 1)) as usize;
                if other >= sender {
                    other + 1
                } else {
                    other
                }
            }
            Dest::Hot(hot) => (draw % hot.clamp(1, self.accounts.max(1)) as u64) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_ones_are_refused() {
        for dest in [Dest::Ring, Dest::Uniform, Dest::Hot(1), Dest::Hot(16)] {
            assert_eq!(dest.to_string().parse::<Dest>(), Ok(dest));
        }
        for bad in ["hot", "hot:0", "hot:-1", "hot:x", "Ring", ""] {
            assert!(bad.parse::<Dest>().is_err(), "{bad}");
        }
        assert!(Dest::Hot(5).check(4).is_err());
        assert!(Dest::Hot(4).check(4).is_ok());
    }

    #[test]
    fn the_ring_pays_the_next_account() {
        let payees = Payees::new(Dest::Ring, 3, 10);
        assert_eq!(payees.payee(0, 4, 5), 5);
        assert_eq!(payees.payee(99, 9, 0), 0);
    }

    #[test]
    fn uniform_payees_are_every_other_account_about_equally() {
        let accounts = 10;
        let payees = Payees::new(Dest::Uniform, 1, accounts);
        let mut counts = vec![0usize; accounts];
        for k in 0..20_000 {
            let payee = payees.payee(k, 3, 4);
            counts[payee] += 1;
        }
        assert_eq!(counts[3], 0, "never the sender: {counts:?}");
        for (account, count) in counts.iter().enumerate().filter(|(a, _)| *a != 3) {
            // 20,000 / 9 = 2,222 each, give or take sampling noise.
            assert!((1_900..2_550).contains(count), "{account}: {counts:?}");
        }
        // Another seed draws another sequence; the same seed the same one.
        let other = Payees::new(Dest::Uniform, 2, accounts);
        let same = Payees::new(Dest::Uniform, 1, accounts);
        let draws = |p: &Payees| (0..50).map(|k| p.payee(k, 3, 4)).collect::<Vec<_>>();
        assert_ne!(draws(&payees), draws(&other));
        assert_eq!(draws(&payees), draws(&same));
    }

    #[test]
    fn hot_payees_are_the_first_k_accounts() {
        let payees = Payees::new(Dest::Hot(3), 0, 100);
        let mut seen = [0usize; 3];
        for k in 0..3_000 {
            seen[payees.payee(k, 50, 51)] += 1;
        }
        assert!(seen.iter().all(|c| *c > 800), "{seen:?}");
        let single = Payees::new(Dest::Hot(1), 7, 100);
        assert!((0..100).all(|k| single.payee(k, 42, 43) == 0));
    }
}
