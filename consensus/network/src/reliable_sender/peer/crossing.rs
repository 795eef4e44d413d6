//! Whether a message may cross an emulated link now: its latency, the link's cuts and its rate.

use super::pending::Pending;
use crate::link::{Bandwidth, LinkState};
use plumbing::clock::Instant;
use std::time::Duration;

/// What decides whether a message may be written on an emulated link now.
pub(super) struct Crossing<'a> {
    pub(super) link: LinkState,
    /// The link's latency towards the peer.
    pub(super) delay: Duration,
    /// The link's rate towards the peer, if limited.
    pub(super) bandwidth: Option<&'a Bandwidth>,
    pub(super) now: Instant,
}

impl Crossing<'_> {
    /// Whether `pending`, sent at `sent`, may be written now; if not, when it may (`None`: not
    /// while the link is cut). Once its latency has passed it takes its bytes from the link's
    /// bucket, from when it was due, and `leaves` keeps when the bucket lets it go.
    pub(super) fn clears(
        &self,
        pending: &Pending,
        sent: Instant,
        leaves: &mut Option<(u64, Instant)>,
    ) -> Result<(), Option<Instant>> {
        let due = self.link.due(sent, self.delay).ok_or(None)?;
        let took = leaves
            .filter(|(seq, _)| *seq == pending.seq)
            .map(|(_, at)| at);
        let due = took.map_or(due, |at| at.max(due));
        if due > self.now {
            return Err(Some(due));
        }
        match (self.bandwidth, took) {
            // A cancelled message is skipped, not written: it takes no bytes.
            (Some(bandwidth), None) if !pending.cancelled() => {
                let at = bandwidth.take(due, pending.data.len());
                *leaves = Some((pending.seq, at));
                if at > self.now {
                    Err(Some(at))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}
