"""The two timelines of a run, both saved with its result and drawn by `fab plot`.

* Per stage (`stage_timelines`, result key `timeline`, figure `plots/timeline.py`): for each pair
  of consecutive records of a process, the stage's transactions per second, the cores its threads
  used, its input queue length (the later record's mean) and the share of the interval it spent
  blocked on its full output channel. Intervals are stamped with the second (since the load
  started) in which they end, and averaged over the processes in that second.
* Commits per node (`build_commits_timeline`, result key `commits_timeline`, figure
  `plots/commits.py`): each node's commits over time (from its per-second METRICS lines, cut into
  lives at its restarts) and, for every restart, the time the node took to catch up: the first
  time its count (executed transactions; `hotstuff`: committed) reached what the other nodes had
  when it restarted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..faults.events import FaultLog
from ..json_path import number
from .counters import consecutive
from .metrics import ProcessMetrics, Record, RunMetrics
from .node_lives import NodeLives, node_lives
from .pipeline import Pipeline
from .stages.paths import cpu_path, input_channel, items_path, output_channel, stages_in
from .stats import mean

# ---- Per stage: per-second series of every stage --------------------------------------------

STAGE_QUANTITIES: tuple[str, ...] = ("tps", "cpu_cores", "queue", "blocked_share")
# quantity -> (before, after, elapsed seconds) -> value
Quantity = Callable[[Record, Record, float], float | None]


def _names(process: ProcessMetrics, key: str) -> set[str]:
    found: set[str] = set()
    for record in process.records:
        value = record.get(key)
        if isinstance(value, dict):
            found.update(str(name) for name in value)
    return found


def _per_second(path: tuple[str, ...], scale: float = 1.0) -> Quantity:
    def value(before: Record, after: Record, seconds: float) -> float | None:
        start, end = number(before, path), number(after, path)
        return None if start is None or end is None else (end - start) * scale / seconds

    return value


def _level(path: tuple[str, ...]) -> Quantity:
    return lambda _before, after, _seconds: number(after, path)


def _missing(_before: Record, _after: Record, _seconds: float) -> float | None:
    return None


def _quantities(stage: str, channels: set[str]) -> dict[str, Quantity]:
    into, out = input_channel(stage, channels), output_channel(stage, channels)
    return {
        "tps": _per_second(items_path(stage)),
        "cpu_cores": _per_second(cpu_path(stage), 1 / 1000.0),
        "queue": _level(("channels", into, "mean_len")) if into else _missing,
        "blocked_share": (
            _per_second(("channels", out, "blocked_ms"), 1 / 1000.0) if out else _missing
        ),
    }


def stage_timelines(processes: Sequence[ProcessMetrics], load_start_ms: float) -> dict[str, Any]:
    """`{"t_s": [0, 1, ...], "stages": {stage: {quantity: [value or None per second]}}}`."""
    # stage -> quantity -> second -> values of the processes
    bins: dict[str, dict[str, dict[int, list[float]]]] = {}
    seconds_seen: set[int] = set()
    for process in processes:
        channels = _names(process, "channels")
        for stage in stages_in(process.records):
            quantities = _quantities(stage, channels)
            for before, after in consecutive(process.records):
                elapsed = (float(after["time_ms"]) - float(before["time_ms"])) / 1000.0
                if elapsed <= 0:
                    continue
                second = int((float(after["time_ms"]) - load_start_ms) // 1000)
                seconds_seen.add(second)
                for name, quantity in quantities.items():
                    value = quantity(before, after, elapsed)
                    if value is not None:
                        bins.setdefault(stage, {}).setdefault(name, {}).setdefault(
                            second, []
                        ).append(value)
    seconds = sorted(seconds_seen)
    return {
        "t_s": seconds,
        "stages": {
            stage: {
                name: [mean(bins[stage].get(name, {}).get(s, [])) for s in seconds]
                for name in STAGE_QUANTITIES
            }
            for stage in sorted(bins)
        },
    }


# ---- Commits per node: commits over time and catch-up after restarts ------------------------


@dataclass(frozen=True)
class CommitsPoint:
    t: float  # seconds from the start of the clients
    life: int
    round: float | None  # the node's consensus round
    committed_blocks: float | None
    committed_txs: float | None
    executed: float | None


@dataclass(frozen=True)
class CatchUp:
    """How long a node took to reach what the others had when it came back: restarted after a
    crash, or healed after a partition (`after`). `restart_t` is when it came back."""

    node: int
    restart_t: float
    target: float  # the others' count when it came back
    caught_up_after: float | None  # seconds after it came back; None: did not catch up
    reached: float  # the highest count it reported after it came back
    after: str = "restart"  # "restart" or "heal"


@dataclass
class CommitsTimeline:
    start_ms: float
    nodes: dict[int, list[CommitsPoint]] = field(default_factory=dict)
    catch_ups: list[CatchUp] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_ms": self.start_ms,
            "nodes": {str(i): [asdict(p) for p in points] for i, points in self.nodes.items()},
            "catch_ups": [asdict(c) for c in self.catch_ups],
        }


def _commits_point(record: Record, life: int, start_ms: float) -> CommitsPoint:
    return CommitsPoint(
        t=round((float(record["time_ms"]) - start_ms) / 1000.0, 3),
        life=life,
        round=number(record, ("consensus", "round")),
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


def build_commits_timeline(
    run: RunMetrics, faults: FaultLog, pipeline: Pipeline
) -> CommitsTimeline:
    nodes = node_lives(run, faults)
    start_ms = faults.start_ms
    if start_ms is None:  # no fault log: count from the first node line
        firsts = [float(n.records[0]["time_ms"]) for n in nodes if n.records]
        start_ms = min(firsts) if firsts else 0.0
    timeline = CommitsTimeline(start_ms=start_ms)
    for node in nodes:
        timeline.nodes[node.index] = [
            _commits_point(record, life, start_ms)
            for life, records in enumerate(node.lives)
            for record in records
        ]
    # How far a node got: its count of done transactions (executed, or committed where nothing
    # executes).
    path = pipeline.done_counter
    by_index = {node.index: node for node in nodes}
    comebacks = sorted(faults.restarts() + faults.heals(), key=lambda e: e.time_ms)
    for event in comebacks:
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
        timeline.catch_ups.append(
            CatchUp(event.node, event.t, target, caught, reached, after=event.kind)
        )
    return timeline
