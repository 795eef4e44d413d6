//! Who may hold a connection on a gated port, so that strangers cannot shut members out, nor
//! one member the others.
//!
//! A connection is accepted before anyone knows whose it is, so it first takes a handshake slot
//! of the host it comes from (its source address is genuine: TCP's own handshake completed).
//! Each member's host has slots of its own, as many per member it hosts; every other host draws
//! from one pool shared by strangers, and no one stranger host may take more than a share of
//! it. Strangers that open silent connections and redial as soon as they are cut off can then
//! fill their pool, never the members'. A stranger on a member's host shares that host's slots:
//! the address is all there is to tell them apart before the handshake.
//!
//! Once in, a member holds at most [`CONNECTIONS_PER_MEMBER`] connections on the port; a newer
//! one closes its oldest. An honest member opens a connection when an older one failed, so its
//! oldest is the likeliest dead one (the acceptor may not have noticed yet), and a member that
//! opens many only ever closes its own.

use crypto::PublicKey;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio_util::sync::CancellationToken;

/// Handshakes in progress at once from a member's host, per member it hosts. An honest member
/// runs one connection per sender and per port (two or three), each redialling alone.
pub const HANDSHAKES_PER_MEMBER: usize = 8;

/// Connections a member holds at once on one port: an honest one runs one per sender (two or
/// three), plus one being replaced.
pub const CONNECTIONS_PER_MEMBER: usize = 8;

/// How many handshakes may be in progress at once, and from where; how many connections a
/// member may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotLimits {
    /// From hosts that are no member's, all together.
    pub strangers: usize,
    /// From any one of those hosts.
    pub per_stranger_host: usize,
    /// From a member's host, per member it hosts.
    pub per_member: usize,
    /// Authenticated connections per member.
    pub connections_per_member: usize,
}

impl SlotLimits {
    /// A quarter of a receiver's `max_connections` for strangers, an eighth of that for any one
    /// of them (at least one each).
    pub fn for_max_connections(max_connections: usize) -> Self {
        let strangers = (max_connections / 4).max(1);
        SlotLimits {
            strangers,
            per_stranger_host: (strangers / 8).max(1),
            per_member: HANDSHAKES_PER_MEMBER,
            connections_per_member: CONNECTIONS_PER_MEMBER,
        }
    }
}

/// The handshake slots and the members' connections of one gated port.
pub(crate) struct Slots {
    limits: SlotLimits,
    /// Members per member host.
    member_hosts: HashMap<IpAddr, usize>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Handshakes in progress per host.
    handshaking: HashMap<IpAddr, usize>,
    /// Handshakes in progress from strangers' hosts, all together.
    strangers: usize,
    /// Each member's connections, oldest first, by id, with what closes them.
    members: HashMap<PublicKey, VecDeque<(u64, CancellationToken)>>,
    next_id: u64,
}

impl Slots {
    pub(crate) fn new(limits: SlotLimits, member_hosts: HashMap<IpAddr, usize>) -> Arc<Self> {
        Arc::new(Slots {
            limits,
            member_hosts: member_hosts
                .into_iter()
                .map(|(host, members)| (host.to_canonical(), members))
                .collect(),
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A handshake slot for a connection from `host`, or `None` when its host has none free.
    pub(crate) fn admit(self: &Arc<Self>, host: IpAddr) -> Option<HandshakeSlot> {
        let host = host.to_canonical();
        let mut state = self.lock();
        let held = state.handshaking.get(&host).copied().unwrap_or(0);
        let stranger = match self.member_hosts.get(&host) {
            Some(members) => {
                if held >= members.saturating_mul(self.limits.per_member) {
                    return None;
                }
                false
            }
            None => {
                if held >= self.limits.per_stranger_host || state.strangers >= self.limits.strangers
                {
                    return None;
                }
                state.strangers += 1;
                true
            }
        };
        *state.handshaking.entry(host).or_default() += 1;
        Some(HandshakeSlot {
            slots: self.clone(),
            host,
            stranger,
        })
    }
}

impl Slots {
    /// Counts a connection that authenticated as `member`; closes the member's oldest ones
    /// beyond the limit.
    pub(crate) fn enter(self: &Arc<Self>, member: PublicKey) -> MemberSlot {
        let closed = CancellationToken::new();
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        let held = state.members.entry(member).or_default();
        held.push_back((id, closed.clone()));
        while held.len() > self.limits.connections_per_member.max(1) {
            if let Some((_, oldest)) = held.pop_front() {
                oldest.cancel();
            }
        }
        MemberSlot {
            slots: self.clone(),
            member,
            id,
            closed,
        }
    }
}

/// Held by an authenticated connection while it lasts.
pub(crate) struct MemberSlot {
    slots: Arc<Slots>,
    member: PublicKey,
    id: u64,
    closed: CancellationToken,
}

impl MemberSlot {
    /// Resolves once newer connections of the same member pushed this one out.
    pub(crate) async fn pushed_out(&self) {
        self.closed.cancelled().await
    }
}

impl Drop for MemberSlot {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        if let Some(held) = state.members.get_mut(&self.member) {
            held.retain(|(id, _)| *id != self.id);
            if held.is_empty() {
                state.members.remove(&self.member);
            }
        }
    }
}

/// Held by a connection until its handshake ends, either way.
pub(crate) struct HandshakeSlot {
    slots: Arc<Slots>,
    host: IpAddr,
    stranger: bool,
}

impl Drop for HandshakeSlot {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        if self.stranger {
            state.strangers -= 1;
        }
        if let Some(held) = state.handshaking.get_mut(&self.host) {
            *held -= 1;
            if *held == 0 {
                state.handshaking.remove(&self.host);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn strangers_share_their_pool_and_members_keep_theirs() {
        let limits = SlotLimits {
            strangers: 3,
            per_stranger_host: 2,
            per_member: 2,
            connections_per_member: 2,
        };
        let slots = Slots::new(limits, [(ip("10.0.0.1"), 2)].into_iter().collect());
        // One stranger host gets its share, no more.
        let a: Vec<_> = (0..5).filter_map(|_| slots.admit(ip("10.9.0.1"))).collect();
        assert_eq!(a.len(), 2);
        // Strangers together get the pool, no more.
        let b: Vec<_> = (0..5).filter_map(|_| slots.admit(ip("10.9.0.2"))).collect();
        assert_eq!(b.len(), 1);
        assert!(slots.admit(ip("10.9.0.3")).is_none());
        // The member host (two members) still has its four, however full the pool.
        let m: Vec<_> = (0..9).filter_map(|_| slots.admit(ip("10.0.0.1"))).collect();
        assert_eq!(m.len(), 4);
        // Slots come back when handshakes end.
        drop(a);
        drop(m);
        assert!(slots.admit(ip("10.9.0.3")).is_some());
        assert!(
            slots.admit(ip("::ffff:10.0.0.1")).is_some(),
            "an IPv4 peer seen over IPv6"
        );
        assert_eq!(
            slots.lock().handshaking.len(),
            1,
            "freed hosts are forgotten"
        );
    }

    #[tokio::test]
    async fn a_member_over_its_connections_closes_its_own_oldest() {
        let limits = SlotLimits {
            connections_per_member: 2,
            ..SlotLimits::for_max_connections(16)
        };
        let slots = Slots::new(limits, HashMap::new());
        let (a, b) = (
            crypto::KeyPair::from_seed(1).name,
            crypto::KeyPair::from_seed(2).name,
        );
        let first = slots.enter(a);
        let other = slots.enter(b);
        let second = slots.enter(a);
        assert!(!first.closed.is_cancelled());
        let third = slots.enter(a);
        first.pushed_out().await;
        assert!(!second.closed.is_cancelled() && !third.closed.is_cancelled());
        assert!(
            !other.closed.is_cancelled(),
            "another member's is untouched"
        );
        // A connection that ended frees its place.
        drop(second);
        let fourth = slots.enter(a);
        assert!(!third.closed.is_cancelled() && !fourth.closed.is_cancelled());
        assert_eq!(slots.lock().members[&a].len(), 2);
    }
}
