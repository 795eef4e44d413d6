"""Per-second series of every stage, saved with a run and drawn by `fab plot`.

For each pair of consecutive records of a process: the stage's transactions per second, the
cores its threads used, its input queue length (the later record's mean) and the share of the
interval it spent blocked on its full output channel. Intervals are stamped with the second
(since the load started) in which they end, and averaged over the processes in that second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from .json_path import number
from .metrics import ProcessMetrics, Record
from .stage_paths import CONSENSUS, cpu_path, input_channel, items_path, output_channel
from .stats import mean

QUANTITIES: tuple[str, ...] = ("tps", "cpu_cores", "queue", "blocked_share")
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
        stages = _names(process, "stages")
        if any(CONSENSUS in r for r in process.records):
            stages.add(CONSENSUS)
        channels = _names(process, "channels")
        for stage in stages:
            quantities = _quantities(stage, channels)
            for before, after in pairwise(process.records):
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
                for name in QUANTITIES
            }
            for stage in sorted(bins)
        },
    }
