use super::*;
use crate::hotstuff::messages::tests::{committee, keys};
use crate::hotstuff::messages::QC;
use crypto::{KeyPair, Signature};

const WINDOW: usize = 10;

/// Builds blocks one after the other, each certifying the previous one.
struct Chain {
    keys: Vec<KeyPair>,
    blocks: Vec<Block>,
}

impl Chain {
    fn new(n: usize) -> Self {
        Chain {
            keys: keys(n as u64),
            blocks: Vec::new(),
        }
    }

    /// Appends a block by member `author` whose QC (over the previous block) `signers` signed.
    fn push(&mut self, author: usize, signers: &[usize]) -> Digest {
        let (parent, round) = match self.blocks.last() {
            Some(last) => (last.digest(), last.round),
            None => (Digest::default(), 0),
        };
        let qc = QC {
            hash: parent,
            round,
            votes: signers
                .iter()
                .map(|i| (self.keys[*i].name, Signature::default()))
                .collect(),
        };
        let block = Block {
            qc,
            tc: None,
            author: self.keys[author].name,
            round: round + 1,
            payload: Vec::new(),
            signature: Signature::default(),
        };
        let digest = block.digest();
        self.blocks.push(block);
        digest
    }

    fn head(&self) -> Digest {
        self.blocks.last().map_or(Digest::default(), Block::digest)
    }

    fn elector(&self) -> LeaderElector {
        let mut elector =
            LeaderElector::new(LeaderRule::Reputation, &committee(&self.keys), WINDOW);
        for block in &self.blocks {
            elector.record(block);
        }
        elector
    }

    fn index(&self, name: PublicKey) -> usize {
        self.keys
            .iter()
            .position(|k| k.name == name)
            .expect("a member")
    }

    /// How often each member is elected over `rounds` rounds all extending the present head
    /// (as after timeouts, where the anchor stays).
    fn shares(&self, elector: &LeaderElector, rounds: u64) -> Vec<u64> {
        let head = self.head();
        let mut counts = vec![0; self.keys.len()];
        for round in 1_000..1_000 + rounds {
            let leader = elector.leader(round, &head).expect("window known");
            counts[self.index(leader)] += 1;
        }
        counts
    }

    /// Runs `rounds` rounds: each elects its leader from the head; a leader in `up` proposes a
    /// block that the next round's leader certifies with the votes `signers(aggregator)` picks
    /// (a leader not in `up` lets its round time out: the head stays). Returns how often each
    /// member led.
    fn run(
        &mut self,
        rounds: usize,
        up: &[usize],
        signers: impl Fn(usize, usize) -> Vec<usize>,
    ) -> Vec<u64> {
        let mut elector = self.elector();
        let mut counts = vec![0; self.keys.len()];
        for i in 0..rounds {
            let round = self.blocks.last().map_or(0, |b| b.round) + 1 + i as Round;
            let leader = self.index(elector.leader(round, &self.head()).expect("window known"));
            counts[leader] += 1;
            if up.contains(&leader) {
                let votes = signers(leader, i);
                self.push(leader, &votes);
                elector.record(self.blocks.last().expect("pushed"));
            }
        }
        counts
    }
}

#[test]
fn round_robin_is_the_committee_order() {
    let keys = keys(4);
    let committee = committee(&keys);
    let elector = LeaderElector::new(LeaderRule::RoundRobin, &committee, WINDOW);
    for round in 0..12 {
        let expected = *committee
            .authorities
            .keys()
            .nth((round % 4) as usize)
            .expect("member");
        assert_eq!(elector.leader(round, &Digest::default()), Some(expected));
    }
}

#[test]
fn every_node_elects_the_same_leaders_from_the_same_chain() {
    let mut chain = Chain::new(4);
    for i in 0..30 {
        chain.push(i % 4, &[0, 1, 2, 3]);
    }
    let first = chain.elector();
    // Another node that saw the blocks in another order, and more of them.
    let mut second = LeaderElector::new(LeaderRule::Reputation, &committee(&chain.keys), WINDOW);
    let mut extra = Chain::new(4);
    extra.push(3, &[]);
    second.record(&extra.blocks[0]);
    for block in chain.blocks.iter().rev() {
        second.record(block);
    }
    let head = chain.head();
    for round in 0..500 {
        assert_eq!(first.leader(round, &head), second.leader(round, &head));
        assert!(first.leader(round, &head).is_some());
    }
    // A node missing a block of the window cannot tell, and says so rather than guess.
    let mut partial = LeaderElector::new(LeaderRule::Reputation, &committee(&chain.keys), WINDOW);
    for block in chain.blocks.iter().skip(25) {
        partial.record(block);
    }
    assert_eq!(partial.leader(7, &head), None);
    // The chain's start needs no history before it.
    assert!(first.leader(1, &Digest::default()).is_some());
}

#[test]
fn a_healthy_committee_shares_leadership_evenly() {
    let mut chain = Chain::new(4);
    let counts = chain.run(4_000, &[0, 1, 2, 3], |_, _| vec![0, 1, 2, 3]);
    for count in &counts {
        assert!(*count > 800, "{counts:?}");
    }
}

#[test]
fn a_silent_member_is_skipped_after_the_window_and_readmitted_when_it_takes_part() {
    let mut chain = Chain::new(4);
    chain.run(100, &[0, 1, 2, 3], |_, _| vec![0, 1, 2, 3]);
    // Member 3 crashes: it neither proposes nor votes. Its rounds time out until it has been
    // out of the window, then come once in a while only.
    let counts = chain.run(3_000, &[0, 1, 2], |_, _| vec![0, 1, 2]);
    assert!(
        counts[3] <= 20,
        "a silent member still leads often: {counts:?}"
    );
    let shares = chain.shares(&chain.elector(), 100_000);
    assert!(
        shares[3] > 0,
        "a silent member must keep a chance: {shares:?}"
    );
    // It comes back: its votes are in the certificates again.
    let counts = chain.run(4_000, &[0, 1, 2, 3], |_, _| vec![0, 1, 2, 3]);
    assert!(
        counts[3] > 800,
        "a member that takes part again is not readmitted: {counts:?}"
    );
}

#[test]
fn byzantine_aggregator_cannot_exclude_an_honest_member() {
    // Member 0 is Byzantine: the QCs it assembles (in the blocks it proposes) leave honest
    // member 3 out. Honest aggregators include 3's vote when it arrives among the first three,
    // here every other time.
    let mut chain = Chain::new(4);
    let counts = chain.run(4_000, &[0, 1, 2, 3], |aggregator, i| {
        if aggregator == 0 || i % 2 == 0 {
            vec![0, 1, 2]
        } else {
            vec![1, 2, 3]
        }
    });
    assert!(counts[3] > 800, "{counts:?}");
    // Nor raise its own share above the others'.
    assert!(counts[0] < 1_200, "{counts:?}");

    // Even if every certificate left member 3 out (its votes always the last to arrive), it
    // is never out for good: it keeps being drawn now and then, and each block of its own
    // brings it back to full weight for a window.
    let before = chain.blocks.len();
    let counts = chain.run(20_000, &[0, 1, 2, 3], |_, _| vec![0, 1, 2]);
    assert!(counts[3] > 20, "{counts:?}");
    let own = chain.blocks[before..]
        .iter()
        .filter(|b| b.author == chain.keys[3].name)
        .count();
    assert_eq!(
        own as u64, counts[3],
        "each of its rounds gave a certified block"
    );
}

#[test]
fn forgets_pruned_blocks() {
    let mut chain = Chain::new(4);
    for i in 0..30 {
        chain.push(i % 4, &[0, 1, 2, 3]);
    }
    let mut elector = chain.elector();
    elector.prune(25);
    assert_eq!(elector.links.len(), 6);
    assert_eq!(elector.leader(40, &chain.head()), None);
}
