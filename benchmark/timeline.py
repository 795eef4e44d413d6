"""Per node, commits over time (from the per-second METRICS lines) and, for every restart, the
time the node took to catch up: the first time its count (executed transactions; `hotstuff`:
committed) reached what the other nodes had when it restarted."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .fault_events import FaultLog
from .json_path import number
from .metrics import Record, RunMetrics
from .node_lives import NodeLives, node_lives


def progress_path(mode: str) -> tuple[str, ...]:
    """The count that says how far a node got: executed, or committed where nothing executes."""
    if mode == "hotstuff":
        return ("consensus", "committed_txs")
    return ("stages", "executor", "executed")


@dataclass(frozen=True)
class Point:
    t: float  # seconds from the start of the clients
    life: int
    committed_blocks: float | None
    committed_txs: float | None
    executed: float | None


@dataclass(frozen=True)
class CatchUp:
    node: int
    restart_t: float
    target: float  # the others' count when it restarted
    caught_up_after: float | None  # seconds after the restart; None: did not catch up
    reached: float  # the highest count it reported after the restart


@dataclass
class Timeline:
    start_ms: float
    nodes: dict[int, list[Point]] = field(default_factory=dict)
    catch_ups: list[CatchUp] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_ms": self.start_ms,
            "nodes": {str(i): [asdict(p) for p in points] for i, points in self.nodes.items()},
            "catch_ups": [asdict(c) for c in self.catch_ups],
        }


def _point(record: Record, life: int, start_ms: float) -> Point:
    return Point(
        t=round((float(record["time_ms"]) - start_ms) / 1000.0, 3),
        life=life,
        committed_blocks=number(record, ("consensus", "committed_blocks")),
        committed_txs=number(record, ("consensus", "committed_txs")),
        executed=number(record, ("stages", "executor", "executed")),
    )


def _count_at(node: NodeLives, path: tuple[str, ...], time_ms: float) -> float | None:
    """The node's count in its latest record at or before `time_ms`."""
    value = None
    for record in node.records:
        if float(record["time_ms"]) > time_ms:
            break
        value = number(record, path) or value
    return value


def build_timeline(run: RunMetrics, faults: FaultLog, mode: str) -> Timeline:
    nodes = node_lives(run, faults)
    start_ms = faults.start_ms
    if start_ms is None:  # no fault log: count from the first node line
        firsts = [float(n.records[0]["time_ms"]) for n in nodes if n.records]
        start_ms = min(firsts) if firsts else 0.0
    timeline = Timeline(start_ms=start_ms)
    for node in nodes:
        timeline.nodes[node.index] = [
            _point(record, life, start_ms)
            for life, records in enumerate(node.lives)
            for record in records
        ]
    path = progress_path(mode)
    by_index = {node.index: node for node in nodes}
    for event in faults.restarts():
        node = by_index.get(event.node)
        if node is None:
            continue
        others = [
            _count_at(other, path, event.time_ms) for other in nodes if other.index != event.node
        ]
        target = max((v for v in others if v is not None), default=0.0)
        after = [r for r in node.records if float(r["time_ms"]) >= event.time_ms]
        caught, reached = None, 0.0
        for record in after:
            value = number(record, path) or 0.0
            reached = max(reached, value)
            if caught is None and value >= target:
                caught = round((float(record["time_ms"]) - event.time_ms) / 1000.0, 3)
        timeline.catch_ups.append(CatchUp(event.node, event.t, target, caught, reached))
    return timeline
