//! Word that a member is reachable again: it just proved its key on one of our ports.
//!
//! A reliable sender that cannot reach a member waits longer and longer between attempts (up
//! to seconds), which is right while the member is down and wrong the moment it is back: after
//! an outage of more than f members, the survivors' messages to the restarted ones then sat in
//! their buffers for the rest of the backoff, and commits resumed seconds after a quorum was
//! back. A restarted member dials us as soon as it has something to say, so an authenticated
//! connection from it is the earliest sign that it listens again. The receiver of a port
//! announces it here; the senders of the same purpose wait on it during their backoff and try
//! again at once.

use crypto::PublicKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

#[derive(Default)]
pub struct Presence {
    members: Mutex<HashMap<PublicKey, Arc<Notify>>>,
}

impl Presence {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn notify_of(&self, member: &PublicKey) -> Arc<Notify> {
        self.members
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(*member)
            .or_default()
            .clone()
    }

    /// `member` proved its key on one of our ports.
    pub fn arrived(&self, member: &PublicKey) {
        self.notify_of(member).notify_waiters();
    }

    /// Resolves when `member` next arrives.
    pub async fn arrival(&self, member: &PublicKey) {
        let notify = self.notify_of(member);
        notify.notified().await;
    }
}
