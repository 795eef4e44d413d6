//! What the core keeps of vote records: the signatures members showed us (`safety::witness`),
//! when each member last got an answer, and, while our own record is unknown, the check that asks
//! the others (`on_record.rs` handles the requests, replies and timer).

use crate::messages::Block;
use crate::safety::recall::Recall;
use crate::safety::witness::Witness;
use crypto::PublicKey;
use network::SimpleSender;
use plumbing::clock::{self, Instant};
use std::collections::HashMap;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Sleep;

/// What the core keeps for members without their record, and for itself without its own.
pub(crate) struct Records {
    pub(crate) witness: Witness,
    /// When each member last got an answer.
    pub(super) answered_at: HashMap<PublicKey, Instant>,
    /// Requests and answers go best-effort: a request is asked again, an answer is asked for again.
    pub(super) sender: SimpleSender,
    /// Ours, while we do not know it.
    pub(crate) check: Option<RecordCheck>,
    /// When to ask again (armed only while `check` is set).
    pub(crate) due: Pin<Box<Sleep>>,
}

pub(crate) struct RecordCheck {
    pub(super) recall: Recall,
    /// When we last said whom we wait for.
    pub(super) reported: Instant,
    /// A proposal of our round we could not vote for while we did not know: voted for once we do,
    /// if we are still in its round and above the floor.
    pub(super) held: Option<Block>,
}

impl Records {
    pub(crate) fn new(witness: Witness, sender: SimpleSender) -> Self {
        Records {
            witness,
            answered_at: HashMap::new(),
            sender,
            check: None,
            due: Box::pin(clock::sleep(Duration::ZERO)),
        }
    }
}
