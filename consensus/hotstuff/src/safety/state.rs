//! What the core must remember across a crash to stay safe, and where it keeps it.
//!
//! A replica that forgets its last voted round may vote again in that round after a restart, for
//! a different block of an equivocating leader: two certificates of one round, and the safety
//! argument of `rules.rs` is gone. It likewise must not forget the highest QC it reported: that
//! argument counts on every honest signer of a TC reporting a QC at least as high as any it held
//! when it voted. And a leader that forgets it proposed may propose a second block in the round.
//!
//! So the core writes this record to the store's `Safety` column (fsynced on a durable store)
//! before any vote, timeout or proposal that depends on it leaves the node, and reads it back
//! when it starts. On the in-memory store the record dies with the process, like everything else.

use crate::messages::QC;
use crate::wire::options;
use bincode::Options;
use config::Round;
use crypto::Digest;
use serde::{Deserialize, Serialize};
use store::{Safety, StoreError, Table};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SafetyStateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the stored safety state does not decode: {0}")]
    Corrupt(bincode::Error),
    #[error("cannot encode the safety state: {0}")]
    Encode(bincode::Error),
}

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetyState {
    /// The highest round this replica voted in or timed out of.
    pub last_voted_round: Round,
    /// The highest round this replica proposed in.
    pub last_proposed_round: Round,
    /// The highest QC this replica holds (and reports in its timeouts).
    pub high_qc: QC,
}

impl SafetyState {
    /// The round a restarted replica resumes in: the one it last voted or timed out in (it will
    /// not vote there again, but it can time out of it), or the one after its highest QC.
    pub fn resume_round(&self) -> Round {
        self.last_voted_round.max(self.high_qc.round + 1).max(1)
    }
}

/// The record's place in the store (the column holds nothing else).
pub struct SafetyStore {
    table: Table<Safety>,
    /// The last record written, so an unchanged state costs no write (nor an fsync).
    saved: Option<SafetyState>,
}

impl SafetyStore {
    /// The record's key: the column has one entry, under the zero digest.
    const KEY: Digest = Digest([0; 32]);

    pub fn new(table: Table<Safety>) -> Self {
        SafetyStore { table, saved: None }
    }

    /// The state written before the last stop, if any.
    pub fn load(&mut self) -> Result<Option<SafetyState>, SafetyStateError> {
        let Some(bytes) = self.table.read(&Self::KEY)? else {
            return Ok(None);
        };
        let state: SafetyState = options()
            .deserialize(&bytes)
            .map_err(SafetyStateError::Corrupt)?;
        self.saved = Some(state.clone());
        Ok(Some(state))
    }

    /// Writes `state`; it is on disk (on a durable store) when this returns.
    pub async fn save(&mut self, state: SafetyState) -> Result<(), SafetyStateError> {
        if self.saved.as_ref() == Some(&state) {
            return Ok(());
        }
        let bytes = options()
            .serialize(&state)
            .map_err(SafetyStateError::Encode)?;
        self.table.write(Self::KEY, bytes.into()).await?;
        self.saved = Some(state);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{keys, qc};
    use store::Store;

    #[tokio::test]
    async fn a_saved_state_is_read_back_and_garbage_is_refused() {
        let store = Store::new();
        let state = SafetyState {
            last_voted_round: 9,
            last_proposed_round: 7,
            high_qc: qc(Digest::of(b"b"), 8, &keys(4)[..3]),
        };
        SafetyStore::new(store.safety())
            .save(state.clone())
            .await
            .expect("save");
        let loaded = SafetyStore::new(store.safety()).load().expect("load");
        assert!(loaded == Some(state.clone()));
        assert_eq!(state.resume_round(), 9);
        store
            .safety()
            .write(SafetyStore::KEY, bytes::Bytes::from_static(&[1, 2, 3]))
            .await
            .expect("write");
        assert!(matches!(
            SafetyStore::new(store.safety()).load(),
            Err(SafetyStateError::Corrupt(_))
        ));
    }

    #[test]
    fn resumes_after_the_highest_qc_when_it_is_ahead_of_the_votes() {
        let state = SafetyState {
            last_voted_round: 3,
            high_qc: qc(Digest::of(b"b"), 5, &keys(4)[..3]),
            ..SafetyState::default()
        };
        assert_eq!(state.resume_round(), 6);
        assert_eq!(SafetyState::default().resume_round(), 1);
    }
}
