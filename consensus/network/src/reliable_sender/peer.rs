//! One peer of a reliable sender: the buffer its callers append to, and the connection task that
//! writes what is new, matches the peer's acks to messages in order, and rewrites what is still
//! unacknowledged after a reconnection.

use super::limits::Limits;
use crate::codec::codec;
use crate::handshake::Credentials;
use crate::link::{sleep_until_due, DelayLine, Link};
use crate::presence::Presence;
use crate::transport::{connect, FrameWriter};
use bytes::Bytes;
use crypto::PublicKey;
use futures::{FutureExt, StreamExt};
use plumbing::clock::{self, Instant};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use tokio_util::codec::{FramedRead, LengthDelimitedCodec};
use tracing::{debug, warn};

mod backoff;
mod crossing;
mod pending;

use backoff::Backoff;
use crossing::Crossing;
use pending::Pending;

pub(super) struct Peer {
    address: SocketAddr,
    limits: Limits,
    credentials: Option<Arc<Credentials>>,
    /// The emulated link to this peer, if any.
    link: Option<Arc<Link>>,
    state: Mutex<State>,
    /// Wakes the connection task: new messages, or room in the in-flight window.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Unacknowledged messages in `seq` order.
    queue: VecDeque<Pending>,
    /// Bytes of the messages in `queue`.
    bytes: usize,
    next_seq: u64,
    /// Messages with `seq` below this were written on the current connection (or skipped as
    /// cancelled).
    cursor: u64,
    /// `seq`s written on the current connection, oldest first: the peer acks in this order.
    in_flight: VecDeque<u64>,
    /// Acks received on the current connection.
    acked: u64,
    /// The message next to be written on an emulated link of limited rate and when the link's
    /// bucket lets it leave, once it has taken its bytes (only the next one takes them, so the
    /// messages keep their order).
    leaves: Option<(u64, Instant)>,
    /// Messages dropped because the buffer was full.
    overflowed: u64,
}

impl Peer {
    pub(super) fn new(
        address: SocketAddr,
        limits: Limits,
        credentials: Option<Arc<Credentials>>,
    ) -> Self {
        let link = credentials
            .as_ref()
            .and_then(|c| c.emulation.as_ref())
            .and_then(|e| e.link_to(&address));
        Self {
            address,
            limits,
            credentials,
            link,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn push(&self, data: Bytes, reply: oneshot::Sender<Bytes>) {
        let mut state = self.lock();
        while !state.queue.is_empty()
            && (state.queue.len() >= self.limits.capacity
                || state.bytes + data.len() > self.limits.max_bytes)
        {
            // Dropping the oldest entry drops its reply sender, so its handler errors. If it is
            // in flight, its ack will find no entry and be ignored.
            state.pop_front();
            state.overflowed += 1;
            if state.overflowed.is_power_of_two() {
                warn!(
                    peer = %self.address,
                    dropped = state.overflowed,
                    "reliable sender buffer full; dropping oldest messages"
                );
            }
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        let sent = self.link.as_ref().map(|_| Instant::now());
        state.bytes += data.len();
        state.queue.push_back(Pending {
            seq,
            data,
            reply,
            sent,
        });
        drop(state);
        self.wake.notify_one();
    }

    /// Connects whenever there is something to deliver, forever (until shutdown).
    pub(super) async fn keep_connected(&self) {
        let mut backoff = Backoff::new(self.limits.backoff);
        loop {
            self.wait_for_work().await;
            match connect(self.address, self.credentials.as_deref()).await {
                Ok(stream) => {
                    debug!(peer = %self.address, "connected");
                    let error = self.serve(stream).await;
                    debug!(peer = %self.address, %error, "connection lost");
                }
                Err(error) => debug!(peer = %self.address, %error, "failed to connect"),
            }
            if self.end_connection() {
                backoff.reset();
            }
            if self.has_live_messages() {
                let delay = backoff.next_delay();
                match self.member_here() {
                    // A member that connects to us listens again: no reason to wait longer.
                    Some((presence, member)) => tokio::select! {
                        () = clock::sleep(delay) => {}
                        () = presence.arrival(member) => backoff.reset(),
                    },
                    None => clock::sleep(delay).await,
                }
            }
        }
    }

    /// The member expected at this address and where its arrivals are announced (committee
    /// links only).
    fn member_here(&self) -> Option<(&Presence, &PublicKey)> {
        let credentials = self.credentials.as_deref()?;
        let member = credentials.acceptor_at(&self.address)?;
        Some((&credentials.presence, member))
    }

    async fn wait_for_work(&self) {
        while !self.has_live_messages() {
            self.wake.notified().await;
        }
    }

    fn has_live_messages(&self) -> bool {
        self.lock().queue.iter().any(|pending| !pending.cancelled())
    }

    /// Forgets the connection's progress so everything unacknowledged is written again, and
    /// discards cancelled messages. Returns whether the connection delivered anything.
    fn end_connection(&self) -> bool {
        let mut state = self.lock();
        state.queue.retain(|pending| !pending.cancelled());
        state.bytes = state.queue.iter().map(|pending| pending.data.len()).sum();
        state.cursor = 0;
        state.in_flight.clear();
        state.leaves = None;
        std::mem::take(&mut state.acked) > 0
    }

    /// Runs one connection until it fails; returns why.
    async fn serve(&self, stream: TcpStream) -> io::Error {
        let (read, write) = stream.into_split();
        let mut writer = FrameWriter::new(write);
        let mut reader = FramedRead::new(read, codec(self.limits.max_frame_size));
        // Writing and reading acks run concurrently: a peer blocked on writing acks we do not
        // read would stop reading our messages.
        let (written, read) = match &self.link {
            None => (
                self.write_loop(&mut writer).left_future(),
                self.read_loop(&mut reader).left_future(),
            ),
            Some(link) => (
                self.write_loop_emulated(&mut writer, link).right_future(),
                self.read_loop_emulated(&mut reader, link).right_future(),
            ),
        };
        tokio::select! {
            result = written => result.err(),
            result = read => result.err(),
        }
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "closed by peer"))
    }

    async fn write_loop(&self, writer: &mut FrameWriter<OwnedWriteHalf>) -> io::Result<()> {
        loop {
            let (batch, _) = self.take_unwritten(None);
            if batch.is_empty() {
                self.wake.notified().await;
            } else {
                writer.write_frames(&batch).await?;
            }
        }
    }

    /// As `write_loop`, writing each message only once it may cross the link.
    async fn write_loop_emulated(
        &self,
        writer: &mut FrameWriter<OwnedWriteHalf>,
        link: &Link,
    ) -> io::Result<()> {
        let mut state = link.watch();
        loop {
            let crossing = Crossing {
                link: *state.borrow_and_update(),
                delay: link.outgoing,
                bandwidth: link.bandwidth.as_deref(),
                now: Instant::now(),
            };
            let (batch, next_due) = self.take_unwritten(Some(crossing));
            if !batch.is_empty() {
                writer.write_frames(&batch).await?;
                continue;
            }
            tokio::select! {
                () = self.wake.notified() => {}
                () = sleep_until_due(next_due) => {}
                // The link (which owns the sender) outlives this connection: this never errs.
                _ = state.changed() => {}
            }
        }
    }

    /// Claims every message not yet written on this connection, within the in-flight window;
    /// under emulation only those that may cross the link by now, and says when the next one may.
    fn take_unwritten(&self, crossing: Option<Crossing>) -> (Vec<Bytes>, Option<Instant>) {
        let mut state = self.lock();
        let State {
            queue,
            cursor,
            in_flight,
            leaves,
            ..
        } = &mut *state;
        let start = queue.partition_point(|pending| pending.seq < *cursor);
        let mut batch = Vec::new();
        let mut next_due = None;
        for pending in queue.range(start..) {
            if in_flight.len() >= self.limits.capacity {
                break;
            }
            if let (Some(crossing), Some(sent)) = (&crossing, pending.sent) {
                // Due times never decrease along the queue: the first not due ends the batch.
                if let Err(due) = crossing.clears(pending, sent, leaves) {
                    next_due = due;
                    break;
                }
            }
            *cursor = pending.seq + 1;
            if !pending.cancelled() {
                in_flight.push_back(pending.seq);
                batch.push(pending.data.clone());
            }
        }
        (batch, next_due)
    }

    /// Matches reply frames to in-flight messages. Returns `Ok` at end of stream.
    async fn read_loop(
        &self,
        reader: &mut FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
    ) -> io::Result<()> {
        while let Some(frame) = reader.next().await {
            self.acknowledge(frame?.freeze())?;
        }
        Ok(())
    }

    /// As `read_loop`, taking each reply the link's return latency after it arrived, and none
    /// while the link is cut.
    async fn read_loop_emulated(
        &self,
        reader: &mut FramedRead<OwnedReadHalf, LengthDelimitedCodec>,
        link: &Link,
    ) -> io::Result<()> {
        // Not paced: the peer's rate is the peer's to emulate, and acks are a few bytes.
        let mut acks = DelayLine::new(link.incoming, None);
        let mut state = link.watch();
        let mut due = Vec::new();
        loop {
            let next_due = acks.next_due(&state.borrow_and_update());
            tokio::select! {
                frame = reader.next() => match frame {
                    Some(frame) => {
                        let frame = frame?.freeze();
                        acks.push(Instant::now(), frame.len(), frame);
                    }
                    None => return Ok(()),
                },
                () = sleep_until_due(next_due) => {}
                // The link (which owns the sender) outlives this connection: this never errs.
                _ = state.changed() => {}
            }
            acks.pop_due(&link.state(), Instant::now(), usize::MAX, &mut due);
            for ack in due.drain(..) {
                self.acknowledge(ack)?;
            }
        }
    }

    fn acknowledge(&self, ack: Bytes) -> io::Result<()> {
        let mut state = self.lock();
        let window_was_full = state.in_flight.len() >= self.limits.capacity;
        let Some(seq) = state.in_flight.pop_front() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "reply frame without an outstanding message",
            ));
        };
        state.acked += 1;
        // Entries older than `seq` still queued were skipped as cancelled when this connection
        // wrote `seq`; if `seq` itself is gone it was dropped on overflow.
        let mut ack = Some(ack);
        while state.queue.front().is_some_and(|front| front.seq <= seq) {
            if let Some(pending) = state.pop_front() {
                if pending.seq == seq {
                    if let Some(ack) = ack.take() {
                        // The caller may have dropped its handler; nothing to do then.
                        let _ = pending.reply.send(ack);
                    }
                }
            }
        }
        drop(state);
        if window_was_full {
            self.wake.notify_one();
        }
        Ok(())
    }
}

impl State {
    /// Takes the oldest message off the queue, keeping `bytes` in step.
    fn pop_front(&mut self) -> Option<Pending> {
        let pending = self.queue.pop_front()?;
        self.bytes -= pending.data.len();
        Some(pending)
    }
}
