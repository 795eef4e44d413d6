//! The statements a node holds, per batch, and what they let it conclude ([`Verdict`]).
//!
//! Shared by the mempool (which adds this node's statements and those peers send, and holds a
//! sealed batch back from consensus until it is certified) and the stage that executes
//! committed batches (which asks for the verdict and then forgets the batch). Memory is bounded
//! per attester: each member's latest `per_attester` statements are kept, so a member that
//! floods statements (for batches that do not exist, say) only pushes out its own.

use super::{attesters, Attestation, AttestationError};
use config::{Committee, Stake};
use crypto::{Digest, PublicKey};
use plumbing::clock;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// What a node may conclude about the signatures of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// This node checked the batch itself and found these positions invalid.
    Checked(Vec<u32>),
    /// Members holding f+1 stake state that exactly these positions are invalid.
    Attested(Vec<u32>),
    /// Neither: the node checks the batch itself.
    Unattested,
}

#[derive(Clone)]
pub struct Attestations {
    inner: Arc<Inner>,
}

struct Inner {
    me: PublicKey,
    committee: Committee,
    per_attester: usize,
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Each batch's statements: who stated which invalid positions (first statement per member).
    batches: HashMap<Digest, Vec<(PublicKey, Vec<u32>)>>,
    /// What this node found checking batches itself.
    own: HashMap<Digest, Vec<u32>>,
    /// Per member, the batches of its statements, oldest first (the memory bound).
    order: HashMap<PublicKey, VecDeque<Digest>>,
    /// Members whose statement this node waited for in vain, since their last statement.
    silent: HashSet<PublicKey>,
}

impl Attestations {
    pub fn new(me: PublicKey, committee: Committee, per_attester: usize) -> Self {
        Attestations {
            inner: Arc::new(Inner {
                me,
                committee,
                per_attester: per_attester.max(1),
                state: Mutex::new(State::default()),
                changed: Notify::new(),
            }),
        }
    }

    pub fn me(&self) -> PublicKey {
        self.inner.me
    }

    pub fn committee(&self) -> &Committee {
        &self.inner.committee
    }

    /// Keeps a statement from a peer once its signature, its positions' order and its attester
    /// (one of the batch's attesters) are checked.
    pub fn insert(&self, statement: Attestation) -> Result<(), AttestationError> {
        let named = attesters(self.committee(), &statement.batch, &statement.author);
        if !named.contains(&statement.attester) {
            return Err(AttestationError::NotAnAttester {
                attester: statement.attester,
                batch: statement.batch,
                author: statement.author,
            });
        }
        statement.verify()?;
        self.keep(statement.attester, statement.batch, statement.invalid);
        Ok(())
    }

    /// Keeps what this node found checking `batch` itself.
    pub fn insert_own(&self, batch: Digest, invalid: Vec<u32>) {
        self.state().own.insert(batch, invalid.clone());
        self.keep(self.inner.me, batch, invalid);
    }

    fn keep(&self, attester: PublicKey, batch: Digest, invalid: Vec<u32>) {
        {
            let mut state = self.state();
            state.silent.remove(&attester);
            let statements = state.batches.entry(batch).or_default();
            if statements.iter().any(|(name, _)| *name == attester) {
                // One statement per member and batch: a second, different one is equivocation
                // and changes nothing.
                return;
            }
            statements.push((attester, invalid));
            let order = state.order.entry(attester).or_default();
            order.push_back(batch);
            if order.len() > self.inner.per_attester {
                if let Some(oldest) = order.pop_front() {
                    state.drop_statement(&attester, &oldest);
                    if attester == self.inner.me {
                        state.own.remove(&oldest);
                    }
                }
            }
        }
        self.inner.changed.notify_waiters();
    }

    pub fn verdict(&self, batch: &Digest) -> Verdict {
        let state = self.state();
        if let Some(invalid) = state.own.get(batch) {
            return Verdict::Checked(invalid.clone());
        }
        match state.certified(batch, &self.inner.committee) {
            Some(invalid) => Verdict::Attested(invalid),
            None => Verdict::Unattested,
        }
    }

    /// Whether `batch`, one of this node's own, holds f+1 stake of matching statements (its own
    /// included), waiting up to `timeout` for them.
    ///
    /// An attester whose statement did not come within `timeout` is marked silent until a
    /// statement of its own arrives, and this node's next batches it attests are not waited for:
    /// a member that withholds its statements makes nodes check those batches themselves, and
    /// does not hold this node's batches back by `timeout` each.
    pub async fn certified(&self, batch: &Digest, timeout: Duration) -> bool {
        let named = attesters(self.committee(), batch, &self.inner.me);
        {
            let state = self.state();
            let silent = named.iter().any(|name| state.silent.contains(name));
            if silent && state.certified(batch, self.committee()).is_none() {
                return false;
            }
        }
        // Ends with the answer as soon as it is known: certified, or every attester has stated
        // and they disagree (waiting longer would change nothing).
        let wait = async {
            loop {
                let changed = self.inner.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                {
                    let state = self.state();
                    if state.certified(batch, self.committee()).is_some() {
                        return true;
                    }
                    if named.iter().all(|name| state.stated(batch, name)) {
                        return false;
                    }
                }
                changed.await;
            }
        };
        if let Ok(answer) = clock::timeout(timeout, wait).await {
            return answer;
        }
        let mut state = self.state();
        let missing: Vec<PublicKey> = named
            .into_iter()
            .filter(|name| !state.stated(batch, name))
            .collect();
        state.silent.extend(missing);
        false
    }

    /// Whether `member` is marked silent (its statement was waited for in vain since its last).
    pub fn is_silent(&self, member: &PublicKey) -> bool {
        self.state().silent.contains(member)
    }

    /// Drops everything held on `batch` (once it is executed).
    pub fn forget(&self, batch: &Digest) {
        let mut state = self.state();
        state.own.remove(batch);
        if let Some(statements) = state.batches.remove(batch) {
            for (attester, _) in statements {
                if let Some(order) = state.order.get_mut(&attester) {
                    order.retain(|d| d != batch);
                }
            }
        }
    }

    /// Batches with at least one statement held.
    pub fn held(&self) -> usize {
        self.state().batches.len()
    }

    /// Statements held on `batch`, this node's own included.
    pub fn statements(&self, batch: &Digest) -> usize {
        self.state().batches.get(batch).map_or(0, Vec::len)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a table of whole entries: still usable.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    /// The invalid positions that members holding f+1 stake agree on, if any.
    fn certified(&self, batch: &Digest, committee: &Committee) -> Option<Vec<u32>> {
        let statements = self.batches.get(batch)?;
        let threshold = committee.validity_threshold();
        for (_, invalid) in statements {
            let stake: Stake = statements
                .iter()
                .filter(|(_, other)| other == invalid)
                .map(|(name, _)| committee.stake(name))
                .sum();
            if stake >= threshold {
                return Some(invalid.clone());
            }
        }
        None
    }

    fn stated(&self, batch: &Digest, member: &PublicKey) -> bool {
        self.batches
            .get(batch)
            .is_some_and(|statements| statements.iter().any(|(name, _)| name == member))
    }

    fn drop_statement(&mut self, attester: &PublicKey, batch: &Digest) {
        if let Some(statements) = self.batches.get_mut(batch) {
            statements.retain(|(name, _)| name != attester);
            if statements.is_empty() {
                self.batches.remove(batch);
            }
        }
    }
}
