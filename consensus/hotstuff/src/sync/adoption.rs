//! Adopting a checkpoint: when to ask peers for one, the peers' reports (`state_sync`), and what
//! taking a checkpoint's block as our root leaves to settle: the blocks that committed with it
//! (which those are, `commit::Committed::adopt` says), and our batches of a stretch whose commits
//! we cannot tell. The core's handlers are in `core/on_checkpoint.rs`.

use crate::messages::Block;
use crate::payload::buffer::PayloadBuffer;
use crate::sync::state_sync::{Agreed, StateSync};
use crate::wire::CheckpointReply;
use checkpoint::{Checkpoint, CheckpointSlot};
use config::{Committee, Parameters, Round};
use crypto::{Digest, PublicKey};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tracing::debug;

pub(crate) struct Adoption {
    /// Collects peers' checkpoint reports (see `sync/state_sync.rs`).
    state_sync: StateSync,
    /// How far past our last commit a certified round may be before we ask for a checkpoint.
    gc_depth: Round,
    /// Where an adopted checkpoint goes to the application (see `StateSyncLink`).
    tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
    /// The application's latest checkpoint: its block is never pruned (peers may ask for it, and
    /// a restart on a durable store resumes from it).
    checkpoints: CheckpointSlot,
}

/// What a root taken below our chain leaves for the mempool and the committer to hear of.
#[derive(Default)]
pub(crate) struct Adopted {
    /// Blocks that committed without passing through our commit rule: the stored ancestors of
    /// the root above our last commit, oldest first, then the root.
    pub(crate) skipped: Vec<Block>,
    /// Our batches of blocks below the root whose fate we cannot tell: never proposed again, so
    /// our mempool must stop counting them as waiting for a commit (its backlog would stay full,
    /// and its batch maker paused, for good).
    pub(crate) abandoned: Vec<Digest>,
}

impl Adoption {
    pub(crate) fn new(
        committee: &Committee,
        parameters: &Parameters,
        tx_restore: std::sync::mpsc::Sender<Arc<Checkpoint>>,
        checkpoints: CheckpointSlot,
    ) -> Self {
        Adoption {
            // Asked again each timeout: by then peers are at their next checkpoint, or the first
            // request's replies were lost.
            state_sync: StateSync::new(
                committee.clone(),
                Duration::from_millis(parameters.timeout_delay),
            ),
            gc_depth: parameters.gc_depth,
            tx_restore,
            checkpoints,
        }
    }
}

impl Adoption {
    /// The application's latest checkpoint (see `checkpoint::CheckpointSlot`).
    pub(crate) fn checkpoints(&self) -> &CheckpointSlot {
        &self.checkpoints
    }

    /// Whether to ask peers for a checkpoint now that a block certifying round `certified`
    /// arrived, our high QC being of `high_qc` and our last commit of `last_committed`: yes once
    /// the round is more than `gc_depth` past the commit (peers may have deleted what replaying
    /// the chain between needs), at most once per retry. A request ends when replay won: once
    /// no certified round we know of is that far ahead, replies to it are no longer looked at (a
    /// request left open would let a member push one report per member long after we caught up).
    pub(crate) fn should_ask(
        &mut self,
        certified: Round,
        high_qc: Round,
        last_committed: Round,
    ) -> bool {
        let reach = last_committed.saturating_add(self.gc_depth);
        if high_qc.max(certified) <= reach {
            self.state_sync.caught_up();
        }
        certified > reach && self.state_sync.should_request()
    }

    /// Whether a checkpoint reply of `author` is to be looked at (see `StateSync::admit`).
    pub(crate) fn admit(&mut self, author: &PublicKey) -> bool {
        self.state_sync.admit(author)
    }

    /// Counts a verified reply; the checkpoint f+1 members reported, once they have.
    pub(crate) fn add(&mut self, reply: CheckpointReply) -> Option<Agreed> {
        self.state_sync.add(reply)
    }

    /// Takes a checkpoint's block as our root: hands `checkpoint`'s state to the application,
    /// and decides what `skipped` (the blocks that committed with the root and that we hold,
    /// oldest first, then the root: see `Committed::adopt`) leaves to settle. The state goes
    /// first: the application must have it before any batch of a block after the root, and those
    /// can only come after this.
    ///
    /// Of the skipped blocks, our own are done (not proposed again: peers would refuse them as
    /// committed for the GC window, then commit them a second time). Our blocks at or below
    /// `unknown_up_to`, of the stretch we do not hold, may or may not have committed: they are
    /// forgotten from `buffer`, not proposed again; those of their batches a skipped block
    /// carries did commit, and are not abandoned.
    pub(crate) fn take_root(
        &mut self,
        checkpoint: Checkpoint,
        skipped: Vec<Block>,
        unknown_up_to: Round,
        buffer: &mut PayloadBuffer,
    ) -> Adopted {
        if self.tx_restore.send(Arc::new(checkpoint)).is_err() {
            // An application without state (or gone) needs none; consensus goes on.
            debug!("no application takes checkpoints");
        }
        let carried: HashSet<&Digest> = skipped.iter().flat_map(|b| &b.payload).collect();
        let abandoned = buffer
            .forget_up_to(unknown_up_to)
            .into_iter()
            .filter(|digest| !carried.contains(digest))
            .collect();
        Adopted { skipped, abandoned }
    }
}

/// What the core's tests set up and look at.
#[cfg(test)]
impl Adoption {
    pub(crate) fn state_sync(&mut self) -> &mut StateSync {
        &mut self.state_sync
    }
}
