//! The statements a node holds, per batch, and what they let it conclude ([`Verdict`]).
//!
//! Shared by the mempool (which adds this node's statements and those peers send, and holds a
//! sealed batch back from consensus until it is certified) and the stage that executes
//! committed batches (which asks for the verdict and then forgets the batch).
//!
//! A statement names the batch's author and its place in the author's sequence, which name its
//! attesters; it is kept only from one of them, and counts only with the statements naming the
//! same author and place. A member that names itself author of another's batch (an author is
//! always one of its attesters) gets a group of its own, which its statement alone never
//! certifies.
//!
//! Memory is bounded per member, in statements and in bytes ([`Limits`]): a statement names at
//! most what a batch holds, and each member's latest statements are kept within its bytes, so a
//! member that floods statements (for batches that do not exist, say) only pushes out its own.

use super::attesters::attesters;
use super::delays::StatementDelays;
use super::statement::{Attestation, AttestationError, Finding};
use config::{Committee, Stake};
use crypto::{Digest, PublicKey};
use plumbing::clock::{self, Instant};
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

/// What the table keeps per member.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Its latest statements, at most this many...
    pub statements: usize,
    /// ...and at most this many bytes of them ([`Attestations::bytes_of`]).
    pub bytes: usize,
    /// The most transactions a batch holds: a statement of a larger batch is refused.
    pub max_batch_txs: u32,
    /// The largest batch an honest author seals: a larger one is not attested.
    pub max_batch_bytes: usize,
}

impl Default for Limits {
    /// With 500 KB batches, 4,096 statements span about 2 GB of a member's batches, far more
    /// than are ever uncommitted at once; 8 MiB hold them with a tenth of each batch's
    /// transactions named invalid, or 13 statements naming every position of the fullest batch.
    fn default() -> Self {
        Limits {
            statements: 4_096,
            bytes: 8 << 20,
            max_batch_txs: u32::MAX,
            max_batch_bytes: usize::MAX,
        }
    }
}

#[derive(Clone)]
pub struct Attestations {
    inner: Arc<Inner>,
}

struct Inner {
    me: PublicKey,
    committee: Committee,
    limits: Limits,
    state: Mutex<State>,
    changed: Notify,
}

/// One member's statement on a batch.
struct Stated {
    attester: PublicKey,
    author: PublicKey,
    seq: u64,
    finding: Finding,
}

/// The bytes a statement holds in the table: the entry, its place in its member's order, and
/// its positions.
fn cost(finding: &Finding) -> usize {
    std::mem::size_of::<Stated>()
        + std::mem::size_of::<(Digest, usize)>()
        + std::mem::size_of_val(finding.invalid.as_slice())
}

/// One of this node's own batches: its number, and when it was sealed (statement delays are
/// timed from it).
#[derive(Clone, Copy)]
struct Sealed {
    seq: u64,
    at: Instant,
}

struct State {
    /// Each batch's statements, first statement per member.
    batches: HashMap<Digest, Vec<Stated>>,
    /// Per member, its statements' batches and costs, oldest first (the memory bound).
    order: HashMap<PublicKey, VecDeque<(Digest, usize)>>,
    bytes: HashMap<PublicKey, usize>,
    /// This node's recent batches, and their order (as many as a member's statements).
    sealed: HashMap<Digest, Sealed>,
    sealed_order: VecDeque<Digest>,
    /// Members whose statement this node waited for in vain, since their next statement for
    /// one of this node's batches that they attest.
    silent: HashSet<PublicKey>,
    delays: StatementDelays,
}

impl Attestations {
    pub fn new(me: PublicKey, committee: Committee, limits: Limits) -> Self {
        let limits = Limits {
            statements: limits.statements.max(1),
            ..limits
        };
        let state = State {
            batches: HashMap::new(),
            order: HashMap::new(),
            bytes: HashMap::new(),
            sealed: HashMap::new(),
            sealed_order: VecDeque::new(),
            silent: HashSet::new(),
            delays: StatementDelays::new(committee.clone()),
        };
        Attestations {
            inner: Arc::new(Inner {
                me,
                committee,
                limits,
                state: Mutex::new(state),
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

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Keeps a statement from a peer once its attester (one of the attesters its author and
    /// number name), its positions and its signature are checked.
    pub fn insert(&self, statement: Attestation) -> Result<(), AttestationError> {
        let named = attesters(self.committee(), &statement.author, statement.seq);
        if !named.contains(&statement.attester) {
            return Err(AttestationError::NotAnAttester {
                attester: statement.attester,
                author: statement.author,
                seq: statement.seq,
            });
        }
        statement.verify(self.inner.limits.max_batch_txs)?;
        self.keep(statement);
        Ok(())
    }

    /// Keeps what this node found checking a batch itself (its own statement).
    pub fn insert_own(&self, statement: Attestation) {
        self.keep(statement);
    }

    /// This node sealed batch number `seq`: its statements are timed from now, and only a
    /// statement for it (or another of this node's recent batches) clears an attester's silent
    /// mark.
    pub fn sealed(&self, batch: Digest, seq: u64) {
        let mut state = self.state();
        let at = Instant::now();
        if state.sealed.insert(batch, Sealed { seq, at }).is_none() {
            state.sealed_order.push_back(batch);
        }
        while state.sealed_order.len() > self.inner.limits.statements {
            if let Some(oldest) = state.sealed_order.pop_front() {
                state.sealed.remove(&oldest);
            }
        }
    }

    fn keep(&self, statement: Attestation) {
        let Attestation {
            batch,
            author,
            seq,
            tx_count,
            mut invalid,
            attester,
            ..
        } = statement;
        {
            let mut state = self.state();
            // One statement per member and batch, checked before anything else: a second one
            // (a repeat, or a different one: equivocation) changes nothing at all.
            if state.stated(&batch, &attester) {
                return;
            }
            invalid.shrink_to_fit();
            let finding = Finding { tx_count, invalid };
            let bytes = cost(&finding);
            // A statement for one of this node's batches, by one of its attesters: it was asked
            // for, and it tells how long statements take.
            if author == self.inner.me {
                if let Some(sealed) = state.sealed.get(&batch).copied() {
                    if sealed.seq == seq {
                        state.silent.remove(&attester);
                        state.delays.record(attester, sealed.at.elapsed());
                    }
                }
            }
            state.batches.entry(batch).or_default().push(Stated {
                attester,
                author,
                seq,
                finding,
            });
            state
                .order
                .entry(attester)
                .or_default()
                .push_back((batch, bytes));
            *state.bytes.entry(attester).or_default() += bytes;
            state.trim(&attester, &self.inner.limits);
        }
        self.inner.changed.notify_waiters();
    }

    pub fn verdict(&self, batch: &Digest) -> Verdict {
        let state = self.state();
        if let Some(own) = state.statement(batch, &self.inner.me) {
            return Verdict::Checked(own.finding.invalid.clone());
        }
        match state.certified(batch, &self.inner.committee) {
            Some(invalid) => Verdict::Attested(invalid),
            None => Verdict::Unattested,
        }
    }

    /// How long this node's batches wait for their statements now, from their sealing.
    pub fn wait(&self) -> Duration {
        self.state().delays.wait()
    }

    /// Whether `batch`, this node's batch number `seq`, holds f+1 stake of matching statements
    /// (its own included), waiting for them until [`Attestations::wait`] after its sealing.
    ///
    /// An attester whose statement did not come by then is marked silent until its statement
    /// for one of this node's batches it attests arrives, and this node's next batches it
    /// attests are not waited for: a member that withholds its statements makes nodes check
    /// those batches themselves, and holds this node's batches back by one wait at most.
    pub async fn certified(&self, batch: &Digest, seq: u64) -> bool {
        let named = attesters(self.committee(), &self.inner.me, seq);
        let deadline = {
            let state = self.state();
            let silent = named.iter().any(|name| state.silent.contains(name));
            if silent && state.certified(batch, self.committee()).is_none() {
                return false;
            }
            let sealed = state.sealed.get(batch).map_or_else(Instant::now, |s| s.at);
            sealed + state.delays.wait()
        };
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
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ok(answer) = clock::timeout(left, wait).await {
            return answer;
        }
        let mut state = self.state();
        if state.certified(batch, self.committee()).is_some() {
            return true;
        }
        // This node's own statement may be late too: its attester is behind, which the batch
        // maker answers by taking no transactions, not by waiting less.
        let me = self.inner.me;
        let missing: Vec<PublicKey> = named
            .into_iter()
            .filter(|name| *name != me && !state.stated(batch, name))
            .collect();
        state.silent.extend(missing);
        false
    }

    /// Whether `member` is marked silent (its statement was waited for in vain since its last).
    pub fn is_silent(&self, member: &PublicKey) -> bool {
        self.state().silent.contains(member)
    }

    /// Drops every statement held on `batch` (once it is executed).
    pub fn forget(&self, batch: &Digest) {
        let mut state = self.state();
        if let Some(statements) = state.batches.remove(batch) {
            for stated in statements {
                let mut freed = 0;
                if let Some(order) = state.order.get_mut(&stated.attester) {
                    order.retain(|(digest, bytes)| {
                        let gone = digest == batch;
                        if gone {
                            freed += bytes;
                        }
                        !gone
                    });
                }
                state.release(&stated.attester, freed);
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

    /// The bytes of `member`'s statements held (see [`Limits::bytes`]).
    pub fn bytes_of(&self, member: &PublicKey) -> usize {
        self.state().bytes.get(member).copied().unwrap_or(0)
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
    /// The invalid positions that members holding f+1 stake agree on, in statements naming the
    /// same author and number, if any.
    fn certified(&self, batch: &Digest, committee: &Committee) -> Option<Vec<u32>> {
        let statements = self.batches.get(batch)?;
        let threshold = committee.validity_threshold();
        for stated in statements {
            let stake: Stake = statements
                .iter()
                .filter(|other| {
                    other.author == stated.author
                        && other.seq == stated.seq
                        && other.finding == stated.finding
                })
                .map(|other| committee.stake(&other.attester))
                .sum();
            if stake >= threshold {
                return Some(stated.finding.invalid.clone());
            }
        }
        None
    }

    fn statement(&self, batch: &Digest, member: &PublicKey) -> Option<&Stated> {
        self.batches
            .get(batch)?
            .iter()
            .find(|stated| stated.attester == *member)
    }

    fn stated(&self, batch: &Digest, member: &PublicKey) -> bool {
        self.statement(batch, member).is_some()
    }

    /// Drops `member`'s oldest statements until it is within its limits.
    fn trim(&mut self, member: &PublicKey, limits: &Limits) {
        loop {
            let Some(order) = self.order.get_mut(member) else {
                return;
            };
            let bytes = self.bytes.get(member).copied().unwrap_or(0);
            if order.len() <= limits.statements && bytes <= limits.bytes {
                return;
            }
            let Some((oldest, freed)) = order.pop_front() else {
                return;
            };
            if let Some(statements) = self.batches.get_mut(&oldest) {
                statements.retain(|stated| stated.attester != *member);
                if statements.is_empty() {
                    self.batches.remove(&oldest);
                }
            }
            self.release(member, freed);
        }
    }

    fn release(&mut self, member: &PublicKey, freed: usize) {
        if let Some(bytes) = self.bytes.get_mut(member) {
            *bytes = bytes.saturating_sub(freed);
            if *bytes == 0 {
                self.bytes.remove(member);
                self.order.remove(member);
            }
        }
    }
}
