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
use std::collections::{BTreeMap, VecDeque};

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

    /// Our blocks at or below `round` are of a stretch of the chain this node cannot tell the
    /// commits of (it adopted a checkpoint above them): their digests are dropped, not proposed
    /// again.
    pub fn forget_up_to(&mut self, round: Round) {
        self.in_flight = self.in_flight.split_off(&(round + 1));
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
        buffer.forget_up_to(4);
        buffer.finalize_up_to(6);
        assert_eq!(buffer.take(7, 10), vec![d(1), d(2)]);
    }
}
