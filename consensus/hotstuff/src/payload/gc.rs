//! The GC window: how long committed blocks and batches stay for peers that are behind, and the
//! record of recently committed batches that the window bounds.

use crate::messages::Block;
use config::{Parameters, Round};
use crypto::{Digest, Hash};
use plumbing::clock::Instant;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// How long committed batches stay in the store: until they are both `rounds` rounds and
/// `time` old.
///
/// Why both. A peer that misses a batch (partitioned, restarting, or withheld from by the
/// batch's author) fetches it from the others, and needs it kept until it gets there. Rounds
/// alone run out in a few seconds at speed (50 rounds < 10 s), well under the time it takes such
/// a peer to be back. Keeping batches until the slowest peer acknowledged them would fix that,
/// but one dead peer would then hold memory without bound. A time window is what a lagging peer
/// actually needs (its recovery is measured in seconds, whatever the rounds do), and it bounds
/// memory by commit throughput times the window (about 50 MB for 30 s at 8,000 tx/s of 200 B).
/// The round window still applies on an idle chain, where 30 s may be a handful of rounds. A
/// peer that is behind by more than the window cannot fetch the batches anymore and needs state
/// sync.
///
/// The time window is what a peer that is behind may need; a healthy committee needs none of it.
/// So the committer frees a batch's bytes as soon as the round window has passed and every other
/// member has signed a QC at or above the batch's round (`PeerRounds`): none of them can still
/// be fetching it. Only a peer that stops signing makes batches stay for the whole time window.
/// Keeping every batch for the whole time window whatever the peers did would make a node's
/// memory grow by its commit throughput times the window, and every new batch would land in
/// fresh memory the kernel must fault in and zero first: at speed that costs more CPU than the
/// node's own work (see `docs/overload.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcWindow {
    pub rounds: Round,
    pub time: Duration,
    /// The most bytes of committed batches kept for peers: past it, the oldest go even inside
    /// the window. A peer that stops signing (slow, partitioned, or one the QCs keep leaving
    /// out) would otherwise make a node keep everything committed in the time window: at
    /// hundreds of MB/s that is gigabytes, and fresh pages for every new batch cost more CPU
    /// than the batch itself, which kept an overloaded committee slow for good. A peer that
    /// needs a batch gone everywhere catches up by state sync.
    pub bytes: u64,
}

impl GcWindow {
    pub fn new(parameters: &Parameters) -> Self {
        GcWindow {
            rounds: parameters.gc_depth,
            time: Duration::from_millis(parameters.gc_retention_ms),
            bytes: parameters.max_retained_bytes,
        }
    }

    /// The lowest round the rounds half of the window keeps once round `latest` committed.
    pub fn lowest_round_kept(&self, latest: Round) -> Round {
        latest.saturating_sub(self.rounds)
    }

    /// Whether the time half of the window is over, at `now`, for what committed at `at`.
    pub fn aged(&self, at: Instant, now: Instant) -> bool {
        now.saturating_duration_since(at) >= self.time
    }

    /// Whether what committed in round `round`, at `at`, has left the window once round
    /// `latest` committed: both halves are over (blocks and batches go by this one rule, so a
    /// laggard that can still fetch a block's batches can also fetch the block).
    pub fn has_left(&self, round: Round, at: Instant, latest: Round, now: Instant) -> bool {
        round < self.lowest_round_kept(latest) && self.aged(at, now)
    }
}

/// The batches committed recently, each with the block that committed it, remembered for the
/// whole GC window (digests only: a few bytes per batch). The core checks proposals against it
/// (a leader that names an already committed batch gets no vote) and the committer against its
/// own copy (whether a batch is delivered or skipped, see `record`). The committer deletes a
/// batch's bytes at the latest when its copy forgets the batch (sooner once every peer holds it,
/// or when the bytes kept exceed the window's budget: see `free`), so what the committer has
/// forgotten the store no longer holds.
///
/// How long a batch is remembered is local (the time half of the window, and `hold_above`);
/// whether a batch is delivered again must not be, or two honest nodes would hand their
/// applications different streams for the same chain. So `record` decides by rounds alone,
/// which every node reads off the same committed chain.
pub struct RecentlyCommitted {
    window: GcWindow,
    /// Batch digest -> the block that committed it last.
    by_batch: HashMap<Digest, CommittedBy>,
    /// The committed blocks, oldest first.
    order: VecDeque<CommittedBlock>,
    /// Batches of the block being recorded, until `close_block`.
    open: Vec<Digest>,
    /// How many blocks at the front of `order` had their batches handed out by `free` already.
    freed: usize,
    /// Bytes of the batches not handed out yet (by `free` or `expire`).
    kept_bytes: u64,
    /// Blocks above this round are kept whatever the window says (see `hold_above`).
    floor: Round,
}

/// The block that committed a batch, and its round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CommittedBy {
    block: Digest,
    round: Round,
}

/// What `record` found for a batch of a committed block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Not committed by an earlier block within the round window: deliver it (for the first
    /// time, or again if an earlier block committed it more than `rounds` rounds before).
    Deliver,
    /// Committed by an earlier block at most `rounds` rounds before, or earlier in this one:
    /// delivered already, skip it.
    Repeat,
}

/// One committed block's batches, as remembered.
struct CommittedBlock {
    digest: Digest,
    round: Round,
    at: Instant,
    batches: Vec<Digest>,
    /// Their bytes (0 where they are not counted: the core's copy).
    bytes: u64,
}

impl RecentlyCommitted {
    pub fn new(window: GcWindow) -> Self {
        RecentlyCommitted {
            window,
            by_batch: HashMap::new(),
            order: VecDeque::new(),
            open: Vec::new(),
            freed: 0,
            kept_bytes: 0,
            floor: Round::MAX,
        }
    }

    /// Keeps the batches of blocks above `round` however old they are: the application's last
    /// checkpoint is of that round, and a node restarted on its store replays the blocks after
    /// it, which needs their batches. An executor that lags its commits by more than the GC
    /// window otherwise finds them deleted.
    pub fn hold_above(&mut self, round: Round) {
        self.floor = round;
    }

    /// The block that committed `batch`, if it is still remembered.
    pub fn committed_by(&self, batch: &Digest) -> Option<Digest> {
        self.by_batch.get(batch).map(|by| by.block)
    }

    /// Whether `record` would call `batch` of `block`, of `round`, a repeat (it would not be
    /// delivered again), without recording anything.
    pub fn is_repeat(&self, batch: &Digest, block: &Digest, round: Round) -> bool {
        self.by_batch.get(batch).is_some_and(|earlier| {
            earlier.block == *block || earlier.round >= self.window.lowest_round_kept(round)
        })
    }

    /// Records the batches of a committed block (only those not already recorded: a batch
    /// belongs to the first block that committed it).
    pub fn insert(&mut self, block: &Block) {
        let digest = block.digest();
        for batch in &block.payload {
            self.record(*batch, digest, block.round);
        }
        self.close_block(digest, block.round, 0);
    }

    /// Records one batch of `block`, of `round`, being committed, and says whether to deliver
    /// it. A batch is delivered unless a block at most `rounds` rounds before committed it (or
    /// this block named it already): rounds only, never the time or the checkpoint, so every
    /// honest node decides alike (see the type's comment). A batch delivered again now belongs
    /// to `block`: its bytes and its record stay with this block's window.
    pub fn record(&mut self, batch: Digest, block: Digest, round: Round) -> Recorded {
        let by = CommittedBy { block, round };
        match self.by_batch.entry(batch) {
            Entry::Occupied(mut entry) => {
                let earlier = *entry.get();
                if earlier.block == block || earlier.round >= self.window.lowest_round_kept(round) {
                    return Recorded::Repeat;
                }
                entry.insert(by);
            }
            Entry::Vacant(entry) => {
                entry.insert(by);
            }
        }
        self.open.push(batch);
        Recorded::Deliver
    }

    /// Ends `block`, of `round`, whose batches `record` recorded, `bytes` in all: they expire
    /// with its round.
    pub fn close_block(&mut self, block: Digest, round: Round, bytes: u64) {
        let batches = std::mem::take(&mut self.open);
        self.kept_bytes += bytes;
        self.order.push_back(CommittedBlock {
            digest: block,
            round,
            at: Instant::now(),
            batches,
            bytes,
        });
    }

    /// Forgets the batches committed outside the GC window (more than `rounds` rounds before
    /// `round` and more than `time` ago) and returns those `free` has not returned already: the
    /// committer deletes them from the store.
    pub fn expire(&mut self, round: Round) -> Vec<Digest> {
        let now = Instant::now();
        let mut expired = Vec::new();
        while let Some(front) = self.order.front() {
            if !self.window.has_left(front.round, front.at, round, now) || front.round > self.floor
            {
                break;
            }
            if let Some(block) = self.order.pop_front() {
                // A batch a later block committed again is that block's now.
                let owned: Vec<Digest> = block
                    .batches
                    .iter()
                    .filter(|batch| self.owns(&block, batch))
                    .copied()
                    .collect();
                for batch in &owned {
                    self.by_batch.remove(batch);
                }
                if self.freed > 0 {
                    self.freed -= 1;
                } else {
                    self.kept_bytes -= block.bytes;
                    expired.extend(owned);
                }
            }
        }
        expired
    }

    /// Returns, once each, the batches (still remembered) that may go before the window ends:
    /// those of blocks outside the round window that every peer holds (round at most
    /// `held_by_all`, see `PeerRounds`), as no peer can still need them from us; and, oldest
    /// first, those over the window's byte budget.
    pub fn free(&mut self, round: Round, held_by_all: Round) -> Vec<Digest> {
        let mut freed = Vec::new();
        while let Some(block) = self.order.get(self.freed) {
            if block.round > self.floor {
                break;
            }
            let held =
                block.round < self.window.lowest_round_kept(round) && block.round <= held_by_all;
            if !held && self.kept_bytes <= self.window.bytes {
                break;
            }
            self.kept_bytes -= block.bytes;
            freed.extend(block.batches.iter().filter(|batch| self.owns(block, batch)));
            self.freed += 1;
        }
        freed
    }

    /// Whether `batch` of `block` is still recorded as committed by it (not since by a later
    /// block that committed it again).
    fn owns(&self, block: &CommittedBlock, batch: &Digest) -> bool {
        self.by_batch
            .get(batch)
            .is_some_and(|by| by.block == block.digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{keys, signed_block};
    use crate::messages::QC;

    /// Something leaves the window only once both halves are over: `rounds` rounds below the
    /// latest commit, and `time` since it committed.
    #[test]
    fn what_left_the_window_is_past_both_its_rounds_and_its_time() {
        let window = GcWindow {
            rounds: 10,
            time: Duration::from_secs(30),
            bytes: u64::MAX,
        };
        let at = Instant::now();
        let later = at + Duration::from_secs(30);
        assert_eq!(window.lowest_round_kept(15), 5);
        assert_eq!(window.lowest_round_kept(7), 0);
        assert!(window.has_left(4, at, 15, later));
        assert!(
            !window.has_left(5, at, 15, later),
            "10 rounds below is kept"
        );
        assert!(!window.has_left(4, at, 15, later - Duration::from_millis(1)));
        assert!(
            !window.has_left(0, at, 7, later),
            "nothing leaves before 10 rounds"
        );
        assert!(!window.has_left(Round::MAX, at, Round::MAX, later));
    }

    #[test]
    fn a_batch_freed_early_is_not_returned_again_when_it_expires() {
        let keys = keys(4);
        let window = GcWindow {
            rounds: 1,
            time: Duration::ZERO,
            bytes: u64::MAX,
        };
        let mut recent = RecentlyCommitted::new(window);
        let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
        recent.insert(&signed_block(QC::genesis(), None, 1, vec![a], &keys[0]));
        recent.insert(&signed_block(QC::genesis(), None, 2, vec![b], &keys[1]));
        assert_eq!(recent.free(5, 1), vec![a]);
        assert_eq!(recent.free(5, 1), Vec::<Digest>::new());
        // Both leave the record; only `b` still has bytes to delete.
        assert_eq!(recent.expire(5), vec![b]);
        assert_eq!(recent.committed_by(&a), None);
        assert_eq!(recent.free(9, 9), Vec::<Digest>::new());
    }
}
