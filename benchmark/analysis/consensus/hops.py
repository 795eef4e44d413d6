"""Per-hop latency of sample transactions: where the time between a send and its execution goes.

A sample's path: the client sends it (`send`), the node it was sent to gets it in its mempool
(`receive`), seals it into a batch (`seal`), learns that 2f+1 nodes hold the batch (`quorum`,
reported by the batch's author), commits the block (`commit`), verifies it (`verify`) and
executes it (`execute`). Each hop is measured on one node where it can be: the node that
received the sample (it authored the batch); where that node did not report an event, the
earliest time any node reported it. Only samples sent inside the steady window count. Across
machines the send and the node events come from different clocks: remote runs assume they are
synchronised (a negative hop is a sign they were not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ..counters import Window
from ..metrics import ProcessMetrics
from ..samples import SAMPLE_EVENTS, first_sends, sample_events
from ..stats import LatencyStats

SEND = "send"
PATH: tuple[str, ...] = (SEND, *SAMPLE_EVENTS)

# Event -> sample id -> time, for one node.
NodeEvents = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Hop:
    start: str
    end: str
    latency: LatencyStats

    @property
    def name(self) -> str:
        return f"{self.start} → {self.end}"


def _node_events(node: ProcessMetrics) -> NodeEvents:
    events: NodeEvents = {}
    for event in SAMPLE_EVENTS:
        seen = events.setdefault(event, {})
        for key, t_ms in sample_events(node, event):
            if key not in seen or t_ms < seen[key]:
                seen[key] = t_ms
    return events


def _earliest(nodes: Sequence[NodeEvents], event: str, key: str) -> float | None:
    times = [n[event][key] for n in nodes if key in n.get(event, {})]
    return min(times) if times else None


def sample_paths(
    clients: Sequence[ProcessMetrics], nodes: Sequence[ProcessMetrics], window: Window
) -> list[dict[str, float]]:
    """For every sample sent in the window, the time of each event of its path it reached."""
    per_node = [_node_events(node) for node in nodes]
    paths = []
    for key, sent in first_sends(clients).items():
        if not window.contains(sent):
            continue
        origin = next((n for n in per_node if key in n.get("receive", {})), None)
        path = {SEND: sent}
        for event in SAMPLE_EVENTS:
            if origin is not None and key in origin.get(event, {}):
                path[event] = origin[event][key]
            elif (t_ms := _earliest(per_node, event, key)) is not None:
                path[event] = t_ms
        paths.append(path)
    return paths


def hop_latencies(
    clients: Sequence[ProcessMetrics],
    nodes: Sequence[ProcessMetrics],
    window: Window,
    last_event: str = "execute",
) -> tuple[Hop, ...]:
    """Every hop up to `last_event` (hotstuff: `commit`), then the whole path send → it."""
    events = PATH[: PATH.index(last_event) + 1]
    paths = sample_paths(clients, nodes, window)

    def hop(start: str, end: str) -> Hop:
        values = [p[end] - p[start] for p in paths if start in p and end in p]
        return Hop(start, end, LatencyStats.of(values))

    return (*(hop(a, b) for a, b in pairwise(events)), hop(SEND, last_event))
