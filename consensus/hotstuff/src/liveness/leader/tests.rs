use super::*;
use crate::messages::tests::{committee, keys};
use crate::messages::QC;
use crypto::{KeyPair, Signature};

const WINDOW: usize = 10;

/// Builds a chain round by round: a round whose leader is up adds a block certifying the
/// previous one; one whose leader is down times out, and the next round is opened by its TC.
/// What every chain starts from.
const GENESIS: Digest = Digest([0; 32]);

struct Chain {
    keys: Vec<KeyPair>,
    blocks: Vec<Block>,
    /// Their digests, in step.
    digests: Vec<Digest>,
    /// The last round run.
    round: Round,
    /// The TC of the last round, if it timed out.
    tc: Option<TC>,
}

impl Chain {
    fn new(n: usize) -> Self {
        Chain {
            keys: keys(n as u64),
            blocks: Vec::new(),
            digests: Vec::new(),
            round: 0,
            tc: None,
        }
    }

    fn head(&self) -> Digest {
        self.digests.last().copied().unwrap_or(GENESIS)
    }

    fn head_qc(&self, signers: &[usize]) -> QC {
        QC {
            hash: self.head(),
            round: self.blocks.last().map_or(0, |b| b.round),
            votes: signers
                .iter()
                .map(|i| (self.keys[*i].name, Signature::default()))
                .collect(),
        }
    }

    /// Appends a block of the next round by member `author`, whose QC (over the head) `signers`
    /// signed, carrying the TC of the round before if it timed out.
    fn push(&mut self, author: usize, signers: &[usize]) -> Digest {
        self.round += 1;
        let block = Block {
            qc: self.head_qc(signers),
            tc: self.tc.take(),
            author: self.keys[author].name,
            round: self.round,
            payload: Vec::new(),
            signature: Signature::default(),
        };
        let digest = block.digest();
        self.blocks.push(block);
        self.digests.push(digest);
        digest
    }

    /// The next round times out: its TC, signed by `signers`, opens the one after.
    fn time_out(&mut self, signers: &[usize]) {
        self.round += 1;
        let high_qc = self.head_qc(&[]);
        self.tc = Some(TC {
            round: self.round,
            votes: signers
                .iter()
                .map(|i| (self.keys[*i].name, Signature::default(), high_qc.round))
                .collect(),
            high_qc,
        });
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

    /// How often each member is elected over `rounds` rounds opened by a QC of the head (as a
    /// node that has the head would see them, whatever the round).
    fn shares(&self, elector: &LeaderElector, rounds: u64) -> Vec<u64> {
        let head = self.head();
        let mut counts = vec![0; self.keys.len()];
        for round in 1_000..1_000 + rounds {
            let leader = elector
                .leader(round, Opening::Qc(&head))
                .expect("window known");
            counts[self.index(leader)] += 1;
        }
        counts
    }

    /// Runs `rounds` rounds: each elects its leader from what opened it; a leader in `up`
    /// proposes a block that the next leader certifies with the votes `signers(aggregator,
    /// round)` picks; a leader not in `up` lets its round time out, and the members in `up` sign
    /// the TC. Returns how often each member led.
    fn run(
        &mut self,
        rounds: usize,
        up: &[usize],
        signers: impl Fn(usize, usize) -> Vec<usize>,
    ) -> Vec<u64> {
        let mut elector = self.elector();
        let mut counts = vec![0; self.keys.len()];
        for i in 0..rounds {
            let round = self.round + 1;
            let leader = elector.leader(round, self.opening()).expect("window known");
            let leader = self.index(leader);
            counts[leader] += 1;
            if up.contains(&leader) {
                let votes = signers(leader, i);
                self.push(leader, &votes);
                elector.record(self.blocks.last().expect("pushed"));
            } else {
                self.time_out(up);
            }
        }
        counts
    }

    /// What opens the next round: the TC of the round before if it timed out, else the QC of
    /// the head.
    fn opening(&self) -> Opening<'_> {
        match &self.tc {
            Some(tc) => Opening::Tc(tc),
            None => Opening::Qc(self.digests.last().unwrap_or(&GENESIS)),
        }
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
        assert_eq!(elector.leader(round, Opening::Qc(&GENESIS)), Some(expected));
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
        let opening = Opening::Qc(&head);
        assert_eq!(first.leader(round, opening), second.leader(round, opening));
        assert!(first.leader(round, opening).is_some());
    }
    // A node missing a block of the window cannot tell, and says so rather than guess.
    let mut partial = LeaderElector::new(LeaderRule::Reputation, &committee(&chain.keys), WINDOW);
    for block in chain.blocks.iter().skip(25) {
        partial.record(block);
    }
    assert_eq!(partial.leader(7, Opening::Qc(&head)), None);
    // The chain's start needs no history before it.
    assert!(first.leader(1, Opening::Qc(&GENESIS)).is_some());
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
fn a_crashed_member_is_skipped_after_its_first_failed_round_and_readmitted_when_back() {
    let mut chain = Chain::new(4);
    chain.run(100, &[0, 1, 2, 3], |_, _| vec![0, 1, 2, 3]);
    // Member 3 crashes: it neither proposes nor votes. The first round it leads times out, and
    // from then on it is drawn once in a while only (round-robin: every fourth round).
    let start = chain.round;
    let counts = chain.run(3_000, &[0, 1, 2], |_, _| vec![0, 1, 2]);
    assert!(
        counts[3] <= 5,
        "a crashed member still leads often: {counts:?}"
    );
    // Its first turn fails; the window still holds its blocks and votes for the next rounds, but
    // the failure already counts.
    let early = chain
        .blocks
        .iter()
        .filter(|b| b.round > start && b.round <= start + 40 && b.tc.is_some())
        .count();
    assert!(
        (1..=2).contains(&early),
        "{early} timeouts in the first 40 rounds"
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
    assert_eq!(elector.leader(40, Opening::Qc(&chain.head())), None);
}

#[test]
fn a_round_opened_by_a_timeout_is_led_from_its_high_qc_whichever_quorum_signed_it() {
    let mut chain = Chain::new(7);
    chain.run(50, &[0, 1, 2, 3, 4, 5, 6], |_, _| vec![0, 1, 2, 3, 4, 5, 6]);
    let full = chain.elector();
    let fresh = LeaderElector::new(LeaderRule::Reputation, &committee(&chain.keys), WINDOW);
    let high_qc = chain.head_qc(&[]);
    let tc = |round: Round, signers: &[usize]| TC {
        round,
        votes: signers
            .iter()
            .map(|i| (chain.keys[*i].name, Signature::default(), high_qc.round))
            .collect(),
        high_qc: high_qc.clone(),
    };
    let mut elected_the_failed = 0;
    // One TC, or several in a row, ends the rounds after the head; two nodes hold TCs of the
    // same round signed by different quorums.
    for timed_out in chain.round + 1..chain.round + 200 {
        let (one, other) = (
            tc(timed_out, &[0, 1, 2, 3, 4]),
            tc(timed_out, &[2, 3, 4, 5, 6]),
        );
        let round = timed_out + 1;
        let leader = full.leader(round, Opening::Tc(&one));
        assert!(leader.is_some(), "the chain is known");
        assert_eq!(
            leader,
            full.leader(round, Opening::Tc(&other)),
            "round {round}"
        );
        if leader == full.timed_out(timed_out, &high_qc.hash) {
            elected_the_failed += 1;
        }
        // A node without the chain cannot tell.
        assert_eq!(fresh.leader(round, Opening::Tc(&one)), None);
    }
    // The member that failed the round before weighs 1 against 1,000.
    assert!(elected_the_failed <= 2, "{elected_the_failed}");
}

#[test]
fn the_leader_after_timeouts_does_not_depend_on_what_the_node_was_asked_before() {
    let mut chain = Chain::new(4);
    chain.run(30, &[0, 1, 2, 3], |_, _| vec![0, 1, 2, 3]);
    let high_qc = chain.head_qc(&[]);
    let tc = |round: Round| TC {
        round,
        votes: Vec::new(),
        high_qc: high_qc.clone(),
    };
    // Runs of timeouts after the head, short and longer than the chain worked out.
    let rounds: Vec<Round> = [1, 2, 3, 500, 999, 1_000, 1_001, 1_002, 1_500, 2_500]
        .iter()
        .map(|gap| chain.round + gap)
        .collect();
    let ask = |elector: &LeaderElector, timed_out: Round| {
        elector.leader(timed_out + 1, Opening::Tc(&tc(timed_out)))
    };
    let (forward, backward) = (chain.elector(), chain.elector());
    let asked_forward: Vec<_> = rounds.iter().map(|r| ask(&forward, *r)).collect();
    let mut asked_backward: Vec<_> = rounds.iter().rev().map(|r| ask(&backward, *r)).collect();
    asked_backward.reverse();
    assert!(asked_forward.iter().all(Option::is_some));
    assert_eq!(asked_forward, asked_backward);
}

#[test]
fn a_node_missing_a_block_names_the_same_leader_or_none_and_tells_once_it_arrives() {
    // Member 3 is down: its rounds time out, so the window holds TCs, whose failed leaders are
    // read from the windows before them.
    let mut chain = Chain::new(4);
    chain.run(60, &[0, 1, 2], |_, _| vec![0, 1, 2]);
    chain.push(0, &[0, 1, 2]);
    let full = chain.elector();
    let head = chain.head();
    let rounds = 1_000..1_100;
    let expected: Vec<_> = rounds
        .clone()
        .map(|round| full.leader(round, Opening::Qc(&head)))
        .collect();
    assert!(expected.iter().all(Option::is_some));
    for missing in 0..chain.blocks.len() {
        let mut partial =
            LeaderElector::new(LeaderRule::Reputation, &committee(&chain.keys), WINDOW);
        for (i, block) in chain.blocks.iter().enumerate() {
            if i != missing {
                partial.record(block);
            }
        }
        for (round, leader) in rounds.clone().zip(&expected) {
            let told = partial.leader(round, Opening::Qc(&head));
            assert!(
                told.is_none() || told == *leader,
                "without block {missing}, round {round}: {told:?} against {leader:?}"
            );
        }
        partial.record(&chain.blocks[missing]);
        for (round, leader) in rounds.clone().zip(&expected) {
            assert_eq!(
                partial.leader(round, Opening::Qc(&head)),
                *leader,
                "block {missing} came"
            );
        }
    }
}
