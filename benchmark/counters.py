"""Cumulative counters of METRICS records read over a time window.

Every counter a process reports is cumulative, so the value at any instant is interpolated
linearly between the records around it, and a rate over a window is the difference at its two
ends divided by its length: a lost line loses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from .json_path import number
from .metrics import Record


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


def increase(records: Sequence[Record], path: Sequence[str], window: Window) -> float | None:
    """How much a cumulative counter grew over the window."""
    start = value_at(records, path, window.start_ms)
    end = value_at(records, path, window.end_ms)
    return None if start is None or end is None else end - start


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
