"""Cumulative counters of METRICS records read over a time window.

Every counter a process reports is cumulative, so the value at any instant is interpolated
linearly between the records around it, and a rate over a window is the difference at its two
ends divided by its length: a lost line loses nothing.

A node restarted by the fault schedule appends a second life to the same log, whose counters start
again from zero; its records carry the life they belong to (`LIFE`, stamped by
`node_lives.mark_lives`; no stamp is the first life). Growth is counted within each life and
summed: neither the drop to zero at a restart nor what a restarted node adopted from a checkpoint
before its first line counts as work done in the window.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ..json_path import number
from .metrics import Record

LIFE = "life"


@dataclass(frozen=True)
class Window:
    start_ms: float
    end_ms: float
    load_start_ms: float

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    def contains(self, t_ms: float) -> bool:
        return self.start_ms <= t_ms <= self.end_ms


def value_at(records: Sequence[Record], path: Sequence[str], t_ms: float) -> float | None:
    """A cumulative counter at time t_ms, linear between records and clamped at both ends."""
    points = [(float(r["time_ms"]), v) for r in records if (v := number(r, path)) is not None]
    if not points:
        return None
    if t_ms <= points[0][0]:
        return points[0][1]
    for (t0, v0), (t1, v1) in pairwise(points):
        if t0 <= t_ms <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t_ms - t0) / (t1 - t0)
    return points[-1][1]


def life_of(record: Record) -> int:
    life = record.get(LIFE, 0)
    return life if isinstance(life, int) else 0


def lives(records: Sequence[Record]) -> list[list[Record]]:
    """The records cut where their life changes (one list for a process never restarted)."""
    cut: list[list[Record]] = []
    for record in records:
        if not cut or life_of(cut[-1][-1]) != life_of(record):
            cut.append([])
        cut[-1].append(record)
    return cut


def consecutive(records: Sequence[Record]) -> Iterator[tuple[Record, Record]]:
    """Pairs of consecutive records of the same life (a counter's step between two lines)."""
    for life in lives(records):
        yield from pairwise(life)


def increase(records: Sequence[Record], path: Sequence[str], window: Window) -> float | None:
    """How much a cumulative counter grew over the window, summed over the process's lives."""
    grown: float | None = None
    for life in lives(records):
        start = value_at(life, path, window.start_ms)
        end = value_at(life, path, window.end_ms)
        if start is not None and end is not None:
            grown = (grown or 0.0) + end - start
    return grown


def rate(records: Sequence[Record], path: Sequence[str], window: Window) -> float | None:
    """Per-second increase of a cumulative counter over the window."""
    grown = increase(records, path, window)
    if grown is None or window.seconds <= 0:
        return None
    return grown / window.seconds


def last_number(records: Sequence[Record], path: Sequence[str]) -> float | None:
    for record in reversed(records):
        value = number(record, path)
        if value is not None:
            return value
    return None


def in_window(records: Sequence[Record], window: Window) -> list[Record]:
    return [r for r in records if window.contains(r["time_ms"])]
