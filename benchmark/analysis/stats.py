"""Order statistics and means over values that may be missing (None: "not reported")."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) over sorted values."""
    if not ordered:
        raise ValueError("percentile of no values")
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def maximum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


@dataclass(frozen=True)
class LatencyStats:
    count: int
    mean_ms: float | None
    p50_ms: float | None
    p99_ms: float | None

    @classmethod
    def of(cls, values: Iterable[float]) -> LatencyStats:
        ordered = sorted(values)
        if not ordered:
            return cls(0, None, None, None)
        return cls(
            count=len(ordered),
            mean_ms=sum(ordered) / len(ordered),
            p50_ms=percentile(ordered, 50),
            p99_ms=percentile(ordered, 99),
        )
