//! Checkpoints: the application's state right after a committed block, which a node too far
//! behind adopts instead of the blocks and batches its peers have already deleted (state sync).
//!
//! Peers keep committed blocks and batches for a GC window (hotstuff's `GcWindow`). A node that comes back
//! after more than that (a crash, a restart on an empty store, a long partition) cannot replay
//! the chain from genesis any more. As in DiemBFT, it instead takes the state at a recent
//! committed block from its peers, makes that block its root, and fetches only what follows.
//!
//! Consensus does not know what the application's state means; it moves it as bytes and checks
//! it against a digest. Instead of a ledger info signed by a quorum, a node accepts a checkpoint
//! once members with f+1 stake reported the same block and the same state digest, each report
//! carrying a proof that the block committed (hotstuff's `messages/commit_proof.rs`) and answering a request of
//! ours: at least one of the reporters is honest, so the state is what executing the chain up to
//! the block gives (see hotstuff's `sync/state_sync.rs`). This needs every honest member to checkpoint at the
//! same blocks, hence [`CheckpointPolicy`]: a rule on the committed sequence alone, not on time.

use bincode::Options;
use bytes::Bytes;
use config::Round;
use crypto::Digest;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use store::{Meta, Store, StoreError, Table};
use tracing::warn;

/// The application's state after every batch of every committed block up to and including
/// `block` (of `round`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub block: Digest,
    pub round: Round,
    pub state: Bytes,
    /// `Digest::of(state)`: what peers compare.
    pub digest: Digest,
}

impl Checkpoint {
    pub fn new(block: Digest, round: Round, state: Bytes) -> Self {
        let digest = Digest::of(&state);
        Checkpoint {
            block,
            round,
            state,
            digest,
        }
    }
}

/// Which committed blocks are checkpointed: the first block (among those whose batches reach the
/// application) of every `every` rounds. Every honest member sees the same committed sequence,
/// so every member picks the same blocks, whatever its speed.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointPolicy {
    every: Round,
    last: Round,
}

impl CheckpointPolicy {
    pub fn new(every: Round) -> Self {
        CheckpointPolicy {
            every: every.max(1),
            last: 0,
        }
    }

    /// Whether the block of `round`, just executed in full, is a checkpoint; if it is, the
    /// next one is counted from it.
    pub fn due(&mut self, round: Round) -> bool {
        if round / self.every > self.last / self.every {
            self.last = round;
            return true;
        }
        false
    }

    /// After a restore from a checkpoint of `round`: count on from there, as its makers did.
    pub fn restored(&mut self, round: Round) {
        self.last = round;
    }
}

/// The encoding of a stored checkpoint, that of every consensus value: bincode with fixed-width
/// integers and no trailing bytes, limited to the size of a consensus message (a checkpoint
/// reaches peers in one, so a larger one could not be served anyway).
fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(MAX_STORED_SIZE)
        .reject_trailing_bytes()
}

/// Upper bound on a stored checkpoint's record: hotstuff's `wire::MAX_MESSAGE_SIZE`.
const MAX_STORED_SIZE: u64 = 4 * 1024 * 1024;

/// Where the latest checkpoint is kept in the store's `meta` column.
fn meta_key() -> Digest {
    Digest::of(b"hotmove/latest-checkpoint")
}

/// The latest checkpoint of this node's application, written by the stage that makes it and
/// read by the consensus helper that serves it to peers. A slot kept in a store also writes it
/// there (`meta` column, no fsync: losing the latest one to a crash costs only replaying a few
/// more blocks), so a node restarted on a durable store resumes from its own last checkpoint:
/// when the whole committee restarts, nobody else has one to give.
#[derive(Clone, Default)]
pub struct CheckpointSlot {
    latest: Arc<Mutex<Option<Arc<Checkpoint>>>>,
    meta: Option<Table<Meta>>,
}

impl CheckpointSlot {
    /// A slot whose checkpoints are also written to `store`.
    pub fn kept_in(store: &Store) -> Self {
        CheckpointSlot {
            latest: Arc::default(),
            meta: Some(store.meta()),
        }
    }

    pub fn publish(&self, checkpoint: Checkpoint) {
        if let Some(meta) = &self.meta {
            match options().serialize(&checkpoint) {
                Ok(bytes) => {
                    if let Err(e) = meta.write_blocking(meta_key(), Bytes::from(bytes)) {
                        warn!(
                            "cannot store the checkpoint of round {}: {e}",
                            checkpoint.round
                        );
                    }
                }
                Err(e) => warn!(
                    "cannot encode the checkpoint of round {}: {e}",
                    checkpoint.round
                ),
            }
        }
        if let Ok(mut slot) = self.latest.lock() {
            *slot = Some(Arc::new(checkpoint));
        }
    }

    pub fn latest(&self) -> Option<Arc<Checkpoint>> {
        self.latest.lock().ok().and_then(|slot| slot.clone())
    }

    /// The checkpoint a slot kept in `store` wrote last (a restart on a durable store). One that
    /// does not decode or does not match its digest is reported and ignored.
    pub fn stored(store: &Store) -> Result<Option<Checkpoint>, StoreError> {
        let Some(bytes) = store.meta().read(&meta_key())? else {
            return Ok(None);
        };
        match options().deserialize::<Checkpoint>(&bytes) {
            Ok(checkpoint) if Digest::of(&checkpoint.state) == checkpoint.digest => {
                Ok(Some(checkpoint))
            }
            Ok(checkpoint) => {
                warn!(
                    "the stored checkpoint of round {} does not match its digest; ignored",
                    checkpoint.round
                );
                Ok(None)
            }
            Err(e) => {
                warn!("the stored checkpoint does not decode ({e}); ignored");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_picks_the_first_block_of_every_interval() {
        let mut policy = CheckpointPolicy::new(10);
        let picked: Vec<Round> = [3, 9, 10, 12, 19, 25, 26, 41]
            .into_iter()
            .filter(|r| policy.due(*r))
            .collect();
        assert_eq!(picked, vec![10, 25, 41]);
    }

    #[tokio::test]
    async fn a_slot_kept_in_a_store_gives_its_latest_checkpoint_back() {
        let store = Store::new();
        assert_eq!(CheckpointSlot::stored(&store).expect("read"), None);
        let slot = CheckpointSlot::kept_in(&store);
        let first = Checkpoint::new(Digest::of(b"a"), 10, Bytes::from_static(b"state 10"));
        let second = Checkpoint::new(Digest::of(b"b"), 20, Bytes::from_static(b"state 20"));
        slot.publish(first);
        slot.publish(second.clone());
        assert_eq!(CheckpointSlot::stored(&store).expect("read"), Some(second));
        // A damaged record is ignored, not trusted.
        store
            .meta()
            .write(meta_key(), Bytes::from_static(b"garbage"))
            .await
            .expect("write");
        assert_eq!(CheckpointSlot::stored(&store).expect("read"), None);
    }

    #[test]
    fn a_restored_policy_picks_what_its_makers_pick() {
        let rounds = [4, 12, 17, 23, 31, 38];
        let mut maker = CheckpointPolicy::new(10);
        let made: Vec<Round> = rounds.into_iter().filter(|r| maker.due(*r)).collect();
        let mut restored = CheckpointPolicy::new(10);
        restored.restored(12);
        let after: Vec<Round> = rounds[2..]
            .iter()
            .copied()
            .filter(|r| restored.due(*r))
            .collect();
        assert_eq!(after, made[1..]);
    }
}
