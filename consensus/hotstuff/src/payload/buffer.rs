//! The leader's queue of batch digests waiting to be proposed.
//!
//! A digest leaves the queue when it goes into a block, but it is only forgotten once that block
//! commits. If the commit rule passes over one of our blocks (a timeout orphaned it), its digests
//! go back to the front of the queue, so no batch that reached a quorum of mempools is lost.
//! A node that adopts a checkpoint learns of commits it never saw: its blocks that the committed
//! chain holds are done, and those whose fate it cannot tell are forgotten rather than proposed
//! again (a committed batch proposed again gets no vote while peers remember it, and commits a
//! second time once they have forgotten it).

use config::Round;
use crypto::Digest;
use std::collections::{BTreeMap, HashSet, VecDeque};

#[derive(Default)]
pub struct PayloadBuffer {
    queue: VecDeque<Digest>,
    in_flight: BTreeMap<Round, Vec<Digest>>,
}

impl PayloadBuffer {
    pub fn push(&mut self, digest: Digest) {
        self.queue.push_back(digest);
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Takes up to `max` digests for our block of `round`.
    pub fn take(&mut self, round: Round, max: usize) -> Vec<Digest> {
        let n = max.min(self.queue.len());
        let payload: Vec<Digest> = self.queue.drain(..n).collect();
        if !payload.is_empty() {
            self.in_flight.insert(round, payload.clone());
        }
        payload
    }

    /// Our block of `round` committed: its digests are done.
    pub fn committed(&mut self, round: Round) {
        self.in_flight.remove(&round);
    }

    /// Another member's block that committed named these digests: whichever of them are ours
    /// are done too, queued or in flight (a leader may propose batches of others that a quorum
    /// acknowledged). Proposed again, they would be refused as committed, and commit twice once
    /// peers forget them.
    pub fn committed_elsewhere(&mut self, digests: &[Digest]) {
        if digests.is_empty() || (self.queue.is_empty() && self.in_flight.is_empty()) {
            return;
        }
        let done: HashSet<&Digest> = digests.iter().collect();
        self.queue.retain(|digest| !done.contains(digest));
        self.in_flight.retain(|_, payload| {
            payload.retain(|digest| !done.contains(digest));
            !payload.is_empty()
        });
    }

    /// Our blocks at or below `round` are of a stretch of the chain this node cannot tell the
    /// commits of (it adopted a checkpoint above them): their digests are dropped, not proposed
    /// again, and returned (whoever counts them as waiting for a commit must stop).
    pub fn forget_up_to(&mut self, round: Round) -> Vec<Digest> {
        let kept = self.in_flight.split_off(&(round + 1));
        std::mem::replace(&mut self.in_flight, kept)
            .into_values()
            .flatten()
            .collect()
    }

    /// Everything up to `round` is final: our blocks at or below it that did not commit never
    /// will, so their digests are proposed again.
    pub fn finalize_up_to(&mut self, round: Round) {
        let later = self.in_flight.split_off(&(round + 1));
        let orphaned = std::mem::replace(&mut self.in_flight, later);
        for digest in orphaned
            .into_values()
            .rev()
            .flat_map(|d| d.into_iter().rev())
        {
            self.queue.push_front(digest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(i: u8) -> Digest {
        Digest([i; 32])
    }

    #[test]
    fn orphaned_digests_are_proposed_again_in_order() {
        let mut buffer = PayloadBuffer::default();
        for i in 0..5 {
            buffer.push(d(i));
        }
        assert_eq!(buffer.take(3, 2), vec![d(0), d(1)]);
        assert_eq!(buffer.take(7, 2), vec![d(2), d(3)]);
        buffer.committed(7);
        // Round 3 was passed over by the commit of round 7.
        buffer.finalize_up_to(7);
        assert_eq!(buffer.take(9, 10), vec![d(0), d(1), d(4)]);
        // In-flight digests of later rounds are not touched.
        buffer.finalize_up_to(8);
        assert!(buffer.is_empty());
        buffer.finalize_up_to(9);
        assert_eq!(buffer.take(10, 10).len(), 3);
    }

    #[test]
    fn forgotten_digests_are_not_proposed_again() {
        let mut buffer = PayloadBuffer::default();
        for i in 0..3 {
            buffer.push(d(i));
        }
        buffer.take(3, 1);
        buffer.take(5, 1);
        assert_eq!(buffer.forget_up_to(4), vec![d(0)]);
        buffer.finalize_up_to(6);
        assert_eq!(buffer.take(7, 10), vec![d(1), d(2)]);
    }

    #[test]
    fn digests_committed_by_another_block_leave_the_queue_and_the_blocks_in_flight() {
        let mut buffer = PayloadBuffer::default();
        for i in 0..4 {
            buffer.push(d(i));
        }
        assert_eq!(buffer.take(3, 2), vec![d(0), d(1)]);
        buffer.committed_elsewhere(&[d(1), d(2), d(9)]);
        // Round 3 was passed over: only what is still ours comes back.
        buffer.finalize_up_to(5);
        assert_eq!(buffer.take(6, 10), vec![d(0), d(3)]);
        buffer.committed_elsewhere(&[d(0), d(3)]);
        buffer.finalize_up_to(7);
        assert!(buffer.is_empty());
    }
}
