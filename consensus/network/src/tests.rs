//! Both senders and the receiver over emulated links, on real loopback sockets: a cut holds
//! frames at both ends until the heal (nothing acknowledged meanwhile), a slow link holds no
//! other. Timing is only ever compared between links, never against the clock.

use super::emulation::{EmulationSpec, NetEmulation};
use super::handshake::{Credentials, Gate, Purpose};
use super::link::BURST_BYTES;
use super::receiver::tests::{TestHandler, DEADLINE};
use super::{Receiver, ReceiverConfig, ReliableSender, SimpleSender, DEFAULT_MAX_FRAME_SIZE};
use bytes::Bytes;
use config::{Authority, Committee};
use crypto::{KeyPair, PublicKey};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::{timeout, Instant};

/// Long enough for a frame to cross loopback many times over: what has not arrived by then was
/// held back.
const QUIET: Duration = Duration::from_millis(300);

/// A sender (`keys[0]`) and receivers (the other keys), each receiver a gated port.
struct Setup {
    keys: Vec<KeyPair>,
    committee: Committee,
    received: Vec<UnboundedReceiver<Bytes>>,
    receiver_emulations: Vec<Option<Arc<NetEmulation>>>,
    _receivers: Vec<tokio::task::JoinHandle<()>>,
}

impl Setup {
    /// `receiver_emulation`: the spec the receivers emulate (none: real links).
    async fn new(receivers: u64, receiver_emulation: Option<&EmulationSpec>) -> Self {
        let keys: Vec<_> = (0..=receivers).map(KeyPair::from_seed).collect();
        let mut authorities = BTreeMap::new();
        let mut listeners = Vec::new();
        for key in &keys {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("address");
            listeners.push(listener);
            authorities.insert(
                key.name,
                Authority {
                    stake: 1,
                    consensus_address: address,
                    mempool_address: address,
                    transactions_address: address,
                },
            );
        }
        let committee = Committee { authorities };
        // Free the ports for the receivers.
        drop(listeners);
        let mut received = Vec::new();
        let mut receiver_emulations = Vec::new();
        let mut handles = Vec::new();
        for key in &keys[1..] {
            let (handler, rx) = TestHandler::new();
            let emulation = receiver_emulation
                .map(|spec| Arc::new(NetEmulation::new(spec, &key.name, &committee)));
            receiver_emulations.push(emulation.clone());
            let gate = Gate::new(key.name, Purpose::Consensus, keys.iter().map(|k| k.name))
                .emulating(emulation);
            let (_, handle) = Receiver::spawn_with(
                address_of(&committee, &key.name),
                ReceiverConfig::gated(DEFAULT_MAX_FRAME_SIZE, gate),
                handler,
            )
            .await
            .expect("bind");
            received.push(rx);
            handles.push(handle);
        }
        Setup {
            keys,
            committee,
            received,
            receiver_emulations,
            _receivers: handles,
        }
    }

    fn sender_emulation(&self, spec: &EmulationSpec) -> Arc<NetEmulation> {
        Arc::new(NetEmulation::new(spec, &self.keys[0].name, &self.committee))
    }

    fn credentials(&self, emulation: Option<Arc<NetEmulation>>) -> Credentials {
        let me = &self.keys[0];
        Credentials::for_committee(
            me.name,
            me.secret.clone(),
            Purpose::Consensus,
            &self.committee,
        )
        .emulating(emulation)
    }

    fn address(&self, receiver: usize) -> SocketAddr {
        address_of(&self.committee, &self.keys[receiver + 1].name)
    }

    fn name(&self, receiver: usize) -> PublicKey {
        self.keys[receiver + 1].name
    }

    async fn next(&mut self, receiver: usize) -> Bytes {
        timeout(DEADLINE, self.received[receiver].recv())
            .await
            .expect("delivered in time")
            .expect("receiver alive")
    }

    async fn assert_quiet(&mut self, receiver: usize) {
        let got = timeout(QUIET, self.received[receiver].recv()).await;
        assert!(got.is_err(), "received {got:?} across a cut");
    }
}

fn address_of(committee: &Committee, name: &PublicKey) -> SocketAddr {
    committee.authority(name).expect("member").consensus_address
}

fn message(i: u32) -> Bytes {
    Bytes::from(format!("m{i}"))
}

fn delays(from: PublicKey, to: &[(PublicKey, u64)]) -> EmulationSpec {
    EmulationSpec {
        delays_ms: BTreeMap::from([(from, to.iter().copied().collect())]),
        ..EmulationSpec::default()
    }
}

#[tokio::test]
async fn reliable_messages_wait_out_a_cut_unacknowledged_then_arrive_in_order() {
    let mut setup = Setup::new(1, None).await;
    let emulation = setup.sender_emulation(&EmulationSpec::default());
    let link = emulation.link_of(&setup.name(0)).expect("link");
    let mut sender = ReliableSender::authenticated(100, DEFAULT_MAX_FRAME_SIZE, {
        setup.credentials(Some(emulation))
    });
    // Connected and delivering before the cut.
    let first = sender.send(setup.address(0), message(0)).await;
    assert_eq!(setup.next(0).await, message(0));
    timeout(DEADLINE, first)
        .await
        .expect("in time")
        .expect("acked");

    link.set_cut(true);
    let mut handlers = Vec::new();
    for i in 1..=20 {
        handlers.push(sender.send(setup.address(0), message(i)).await);
    }
    setup.assert_quiet(0).await;
    for handler in &mut handlers {
        assert!(
            handler.try_recv().is_err(),
            "nothing is acknowledged across a cut"
        );
    }
    link.set_cut(false);
    for i in 1..=20 {
        assert_eq!(setup.next(0).await, message(i));
    }
    for (i, handler) in (1..).zip(handlers) {
        let ack = timeout(DEADLINE, handler)
            .await
            .expect("in time")
            .expect("acked");
        assert_eq!(ack, Bytes::from(format!("ack:m{i}")));
    }
}

#[tokio::test]
async fn the_receiving_end_accepts_nothing_across_a_cut() {
    // Only the receiver emulates: a peer whose clock is a little off still cannot get through.
    let mut setup = Setup::new(1, Some(&EmulationSpec::default())).await;
    let link = setup.receiver_emulations[0]
        .as_ref()
        .and_then(|e| e.link_of(&setup.keys[0].name))
        .expect("link");
    let mut sender =
        ReliableSender::authenticated(100, DEFAULT_MAX_FRAME_SIZE, setup.credentials(None));
    let first = sender.send(setup.address(0), message(0)).await;
    assert_eq!(setup.next(0).await, message(0));
    timeout(DEADLINE, first)
        .await
        .expect("in time")
        .expect("acked");

    link.set_cut(true);
    let mut handlers = Vec::new();
    for i in 1..=5 {
        handlers.push(sender.send(setup.address(0), message(i)).await);
    }
    setup.assert_quiet(0).await;
    for handler in &mut handlers {
        assert!(
            handler.try_recv().is_err(),
            "nothing is acknowledged across a cut"
        );
    }
    link.set_cut(false);
    for i in 1..=5 {
        assert_eq!(setup.next(0).await, message(i));
    }
    for handler in handlers {
        timeout(DEADLINE, handler)
            .await
            .expect("in time")
            .expect("acked");
    }
}

#[tokio::test]
async fn a_slow_link_holds_no_other_and_keeps_its_order() {
    let mut setup = Setup::new(2, None).await;
    let me = setup.keys[0].name;
    // Receiver 0 is 1.5 s away, receiver 1 next door.
    let spec = delays(me, &[(setup.name(0), 1_500), (setup.name(1), 0)]);
    for reliable in [true, false] {
        let emulation = setup.sender_emulation(&spec);
        let credentials = setup.credentials(Some(emulation));
        let (slow, fast) = (setup.address(0), setup.address(1));
        if reliable {
            let mut sender =
                ReliableSender::authenticated(100, DEFAULT_MAX_FRAME_SIZE, credentials);
            // Dropping a handler cancels its message: keep them.
            let mut handlers = Vec::new();
            for i in 0..5 {
                handlers.push(sender.send(slow, message(i)).await);
            }
            handlers.push(sender.send(fast, message(100)).await);
            assert_eq!(setup.next(1).await, message(100));
            assert!(
                setup.received[0].try_recv().is_err(),
                "the fast one came first"
            );
            for i in 0..5 {
                assert_eq!(setup.next(0).await, message(i));
            }
        } else {
            let mut sender = SimpleSender::authenticated(100, DEFAULT_MAX_FRAME_SIZE, credentials);
            for i in 0..5 {
                sender.send(slow, message(i)).await;
            }
            sender.send(fast, message(100)).await;
            assert_eq!(setup.next(1).await, message(100));
            assert!(
                setup.received[0].try_recv().is_err(),
                "the fast one came first"
            );
            for i in 0..5 {
                assert_eq!(setup.next(0).await, message(i));
            }
            assert_eq!(sender.dropped(), 0);
        }
    }
}

#[tokio::test]
async fn best_effort_messages_within_the_queue_survive_a_cut_and_the_rest_are_dropped() {
    let mut setup = Setup::new(1, None).await;
    let emulation = setup.sender_emulation(&EmulationSpec::default());
    let link = emulation.link_of(&setup.name(0)).expect("link");
    let capacity = 8;
    let mut sender = SimpleSender::authenticated(
        capacity,
        DEFAULT_MAX_FRAME_SIZE,
        setup.credentials(Some(emulation)),
    );
    link.set_cut(true);
    // The delay queue and the channel hold `capacity` each; the rest is dropped, as when a
    // stalled connection's buffers are full.
    for i in 0..100 {
        sender.send(setup.address(0), message(i)).await;
    }
    setup.assert_quiet(0).await;
    link.set_cut(false);
    let kept = 100 - sender.dropped() as u32;
    assert!(
        kept >= capacity as u32 && kept <= 2 * capacity as u32,
        "kept {kept}"
    );
    for i in 0..kept {
        assert_eq!(setup.next(0).await, message(i));
    }
    // And the link works as before afterwards.
    sender.send(setup.address(0), message(1_000)).await;
    assert_eq!(setup.next(0).await, message(1_000));
}

/// Both senders on real sockets, where the clock is the machine's: a limited link is checked to
/// take at least its serialization (a lower bound, which a loaded machine cannot break).
#[tokio::test]
async fn a_link_of_limited_rate_takes_at_least_its_serialization() {
    let mut setup = Setup::new(2, None).await;
    let spec = EmulationSpec {
        bandwidth_mbit: Some(4.0),
        ..EmulationSpec::default()
    };
    // 30 frames of 10 kB to receiver 0: at 4 Mbit/s (half a megabyte a second) all but the
    // burst take 0.47 s.
    let frame = |i: u8| Bytes::from(vec![i; 10_000]);
    let least = Duration::from_secs_f64((300_000 - BURST_BYTES) as f64 * 8.0 / 4e6);
    let (bulk, other) = (setup.address(0), setup.address(1));
    for reliable in [true, false] {
        // A new emulation each time: its links' buckets start full.
        let credentials = setup.credentials(Some(setup.sender_emulation(&spec)));
        let start = Instant::now();
        // Senders stop with their last handle, and a dropped handler cancels its message: both
        // are kept until the end.
        let mut handlers = Vec::new();
        let (mut reliable_sender, mut simple_sender) = (None, None);
        if reliable {
            let sender = reliable_sender.insert(ReliableSender::authenticated(
                100,
                DEFAULT_MAX_FRAME_SIZE,
                credentials,
            ));
            for i in 0..30 {
                handlers.push(sender.send(bulk, frame(i)).await);
            }
            handlers.push(sender.send(other, message(100)).await);
        } else {
            let sender = simple_sender.insert(SimpleSender::authenticated(
                100,
                DEFAULT_MAX_FRAME_SIZE,
                credentials,
            ));
            for i in 0..30 {
                sender.send(bulk, frame(i)).await;
            }
            sender.send(other, message(100)).await;
        }
        // Its own link, its own bucket: it does not wait for the bulk (not asserted against the
        // clock: a stalled machine could deliver the bulk first).
        assert_eq!(setup.next(1).await, message(100));
        for i in 0..30 {
            assert_eq!(setup.next(0).await, frame(i));
        }
        let took = start.elapsed();
        assert!(took >= least, "30 frames in {took:?}, less than {least:?}");
        assert_eq!(simple_sender.map_or(0, |sender| sender.dropped()), 0);
        drop((reliable_sender, handlers));
    }
}
