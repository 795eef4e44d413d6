//! The simulated network. Every message an instance's senders hand to their (tapped) sockets
//! lands here and reaches each instance at the address it was sent to after a delay, unless the
//! partition of its round or a drop keeps it away. Time is tokio's paused clock, so the run is a
//! discrete-event simulation.
//!
//! What is deterministic and why. Instances run on one thread, so their tasks interleave in an
//! order fixed by what they do; what could still vary between two runs of a seed is the order
//! in which messages sent at the same instant reach this actor (a task's sends may come from a
//! `HashMap`'s iteration). Nothing here depends on that order: a message's fate (delay, drop)
//! is a hash of the seed, its sender, its receiver, its bytes and how many identical ones went
//! before it, and messages due at the same instant are delivered in the order of those keys.
//!
//! The lying instance's core messages go through its `Liar` (`liar.rs`) as they enter: what
//! it sends is what the liar makes of them, each to one receiver, and what reaches the lying
//! instance is heard by the liar first.

use super::choice::hash;
use super::liar::{Forged, Liar, Told};
use super::scenario::Scenario;
use crate::sync::helper::HelperRequest;
use crate::wire::{self, ConsensusMessage};
use bytes::Bytes;
use config::Round;
use plumbing::budgeted::BudgetedSender;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Duration, Instant};

/// Which sender of an instance a message came from: the core's (its messages carry their
/// round), or the block sync's and the helper's (which carry old blocks, and go by the round
/// the sender is in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    Core,
    Sync,
}

/// One message handed to a tapped sender.
pub struct Sent {
    pub from: usize,
    pub source: Source,
    pub to: SocketAddr,
    pub bytes: Bytes,
}

/// Where a running instance takes its messages, as its consensus port's handler would route
/// them.
#[derive(Clone)]
pub struct Inbox {
    pub core: BudgetedSender<ConsensusMessage>,
    pub helper: mpsc::Sender<HelperRequest>,
}

/// What the network did, for the report.
#[derive(Clone, Copy, Debug, Default)]
pub struct Traffic {
    pub delivered: u64,
    pub partitioned: u64,
    pub dropped: u64,
    /// What the lying instance sent, if one lies.
    pub told: Told,
}

/// A message on its way, keyed so that messages due at one instant go in a fixed order.
type Key = (Instant, usize, usize, u64, u64);

pub struct SimNetwork {
    scenario: Arc<Scenario>,
    /// Set once every link delivers (see `HEAL_AT`).
    healed: Arc<AtomicBool>,
    /// The instances at each member's address.
    at_address: HashMap<SocketAddr, Vec<usize>>,
    /// Each instance's inbox while it runs.
    inboxes: Arc<Mutex<Vec<Option<Inbox>>>>,
    /// The highest round each instance's core sent a message of: the round its block sync and
    /// helper messages go by.
    rounds: Vec<Round>,
    /// How many identical messages (sender, receiver, bytes) went before: a key's last part.
    seen: HashMap<(usize, usize, u64), u64>,
    in_flight: BTreeMap<Key, Bytes>,
    traffic: Arc<Mutex<Traffic>>,
    liar: Option<Liar>,
    start: Instant,
}

impl SimNetwork {
    pub fn spawn(
        scenario: Arc<Scenario>,
        healed: Arc<AtomicBool>,
        at_address: HashMap<SocketAddr, Vec<usize>>,
        inboxes: Arc<Mutex<Vec<Option<Inbox>>>>,
        rx_sent: mpsc::UnboundedReceiver<Sent>,
        liar: Option<Liar>,
    ) -> Arc<Mutex<Traffic>> {
        let traffic = Arc::new(Mutex::new(Traffic::default()));
        let network = SimNetwork {
            healed,
            rounds: vec![0; Scenario::instances()],
            scenario,
            at_address,
            inboxes,
            seen: HashMap::new(),
            in_flight: BTreeMap::new(),
            traffic: traffic.clone(),
            liar,
            start: Instant::now(),
        };
        tokio::spawn(network.run(rx_sent));
        traffic
    }

    async fn run(mut self, mut rx_sent: mpsc::UnboundedReceiver<Sent>) {
        loop {
            let due = self.in_flight.keys().next().map(|key| key.0);
            tokio::select! {
                biased;
                sent = rx_sent.recv() => match sent {
                    Some(sent) => self.schedule(sent),
                    None => return,
                },
                () = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    self.deliver_due();
                }
            }
        }
    }

    fn count(&self, what: impl FnOnce(&mut Traffic)) {
        if let Ok(mut traffic) = self.traffic.lock() {
            what(&mut traffic);
        }
    }

    /// The round a message goes by: its own (core messages), or its sender's.
    fn round_of(&mut self, sent: &Sent) -> Round {
        if sent.source == Source::Sync {
            return self.rounds[sent.from];
        }
        let round = match wire::decode(&sent.bytes) {
            Ok(ConsensusMessage::Propose(block)) => block.round,
            Ok(ConsensusMessage::Vote(vote)) => vote.round,
            Ok(ConsensusMessage::Timeout(timeout)) => timeout.round,
            Ok(ConsensusMessage::TC(tc)) => tc.round,
            _ => self.rounds[sent.from],
        };
        let sender = &mut self.rounds[sent.from];
        *sender = (*sender).max(round);
        round
    }

    fn schedule(&mut self, sent: Sent) {
        let round = self.round_of(&sent);
        let receivers: Vec<usize> = self
            .at_address
            .get(&sent.to)
            .map(|instances| {
                instances
                    .iter()
                    .copied()
                    .filter(|to| *to != sent.from)
                    .collect()
            })
            .unwrap_or_default();
        if sent.source == Source::Core {
            if let Some(liar) = self.liar_at(sent.from) {
                let forged = liar.rewrite(&sent.bytes, &receivers);
                self.send_forged(sent.from, forged);
                return;
            }
        }
        for to in receivers {
            self.send(sent.from, to, round, sent.bytes.clone(), Duration::ZERO);
        }
    }

    /// The liar of `instance`, if it lies.
    fn liar_at(&mut self, instance: usize) -> Option<&mut Liar> {
        self.liar.as_mut().filter(|liar| liar.instance == instance)
    }

    /// What the liar at `from` sends, counted as it leaves.
    fn send_forged(&mut self, from: usize, forged: Vec<Forged>) {
        let at_ms = (Instant::now() - self.start).as_millis() as u64;
        for message in forged {
            if let Some(liar) = self.liar_at(from) {
                liar.sent(&message, at_ms);
                let told = liar.told;
                self.count(|t| t.told = told);
            }
            self.send(
                from,
                message.to,
                message.round,
                message.bytes,
                message.after,
            );
        }
    }

    /// One message from `from` to `to`, which goes by `round` in the partitions, handed to the
    /// link `after` a delay of the sender's.
    fn send(&mut self, from: usize, to: usize, round: Round, bytes: Bytes, after: Duration) {
        let now = Instant::now();
        let healed = self.healed.load(Ordering::Relaxed);
        let content = hash(&bytes[..]);
        let seen = self.seen.entry((from, to, content)).or_insert(0);
        *seen += 1;
        let nth = *seen;
        let fate = hash((self.scenario.seed, from, to, content, nth));
        if !healed {
            if !self.scenario.connected(round, from, to) {
                self.count(|t| t.partitioned += 1);
                return;
            }
            if fate % 1_000 < self.scenario.drops_per_mille {
                self.count(|t| t.dropped += 1);
                return;
            }
        }
        let max = self.scenario.max_delay.as_millis().max(1) as u64;
        let delay = after + Duration::from_millis(1 + (fate >> 16) % max);
        self.in_flight
            .insert((now + delay, from, to, content, nth), bytes);
    }

    /// Hands every message due by now to its receiver, if it runs.
    fn deliver_due(&mut self) {
        let now = Instant::now();
        let mut answers = Vec::new();
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, _, to, _, _), bytes) = entry.remove_entry();
            let inbox = self
                .inboxes
                .lock()
                .ok()
                .and_then(|inboxes| inboxes.get(to).cloned().flatten());
            let Some(inbox) = inbox else { continue };
            let Ok(message) = wire::decode(&bytes) else {
                continue;
            };
            if let Some(liar) = self.liar_at(to) {
                answers.push((to, liar.hear_delivered(&bytes)));
            }
            let delivered = match message {
                ConsensusMessage::SyncRequest(digest, origin, floor) => inbox
                    .helper
                    .try_send(HelperRequest::Chain(digest, origin, floor))
                    .is_ok(),
                ConsensusMessage::CheckpointRequest(origin) => inbox
                    .helper
                    .try_send(HelperRequest::Checkpoint(origin))
                    .is_ok(),
                message => inbox.core.try_send(message, bytes.len()).is_ok(),
            };
            if delivered {
                self.count(|t| t.delivered += 1);
            } else {
                self.count(|t| t.dropped += 1);
            }
        }
        for (from, forged) in answers {
            self.send_forged(from, forged);
        }
    }
}
