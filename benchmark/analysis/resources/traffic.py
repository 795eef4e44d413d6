"""What a node sent to and received from the rest of the committee over the steady window, and
the signatures of consensus messages it checked.

The nodes count committee frames where they write and read them (`network::traffic`: bytes with
their length prefix; client transactions and acknowledgements left out) and every signature they
check in votes, blocks, timeouts and certificates (`signatures_checked`). Each is a cumulative
counter (`counters.increase`), averaged over the nodes counted for the headline rates: per second,
per transaction committed and per round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..counters import Window, increase
from ..metrics import ProcessMetrics
from ..stats import mean


@dataclass(frozen=True)
class Traffic:
    """Means over the nodes, per second of the window."""

    sent_bytes_per_s: float
    received_bytes_per_s: float
    sent_frames_per_s: float
    received_frames_per_s: float
    # Signatures of consensus messages checked per second; None from a node that does not say.
    signatures_per_s: float | None

    @property
    def frames_per_s(self) -> float:
        return self.sent_frames_per_s + self.received_frames_per_s

    @property
    def megabits_per_s(self) -> float:
        """What the busier direction of a node's links carried, in Mbit/s: the bandwidth a node
        needs at this throughput."""
        return max(self.sent_bytes_per_s, self.received_bytes_per_s) * 8 / 1e6


def traffic_of(counted: Sequence[ProcessMetrics], window: Window) -> Traffic | None:
    """The window's traffic; None when the nodes report none (logs of an older node)."""
    seconds = window.seconds
    if seconds <= 0:
        return None

    def rate(*path: str) -> float | None:
        total = mean(increase(n.records, path, window) for n in counted)
        return None if total is None else total / seconds

    sent, received = rate("network", "sent_bytes"), rate("network", "received_bytes")
    sent_frames, received_frames = (
        rate("network", "sent_frames"),
        rate("network", "received_frames"),
    )
    if sent is None or received is None or sent_frames is None or received_frames is None:
        return None
    return Traffic(
        sent_bytes_per_s=sent,
        received_bytes_per_s=received,
        sent_frames_per_s=sent_frames,
        received_frames_per_s=received_frames,
        signatures_per_s=rate("consensus", "signatures_checked"),
    )
