"""Saved results: one JSON file per run, and their aggregation over repeated runs."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .json_path import lookup
from .summary import Summary

RESULT_VERSION = 1

# A result belongs to the same point as another when all of these match.
KEY_FIELDS: tuple[str, ...] = (
    "mode",
    "nodes",
    "faults",
    "rate",
    "tx_size",
    "batch_size",
    "max_batch_delay",
    "verifier_threads",
    # Emulated links: a run with added latency is another point than one without.
    "delay_ms",
    "delay_matrix",
)

Result = dict[str, Any]


def result_name(summary: Summary, stamp: str) -> str:
    config = summary.config
    if summary.mode == "movevm":
        return f"movevm-{stamp}-run{config.get('run', 0)}.json"
    return (
        f"{summary.mode}-n{config.get('nodes')}-f{config.get('faults', 0)}-r{config.get('rate')}"
        f"-{stamp}-run{config.get('run', 0)}.json"
    )


def save(summary: Summary, directory: Path, stamp: str | None = None) -> Path:
    """Write one run's summary as JSON; the name says mode, nodes, faults, rate, time, run."""
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / result_name(summary, stamp)
    copy = 1
    while path.exists():  # two runs of one configuration within a second
        path = directory / result_name(summary, f"{stamp}.{copy}")
        copy += 1
    data = {"version": RESULT_VERSION, "saved_at": time.time(), **summary.to_dict()}
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def load(directory: Path, mode: str | None = None) -> list[Result]:
    """Every saved result of a directory (optionally of one mode); unreadable files are skipped."""
    results = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(data, dict) or data.get("version") != RESULT_VERSION:
            continue
        if mode is not None and lookup(data, ("config", "mode")) != mode:
            continue
        data["file"] = path.name
        results.append(data)
    return results


@dataclass(frozen=True)
class Stat:
    mean: float | None
    std: float | None

    @classmethod
    def of(cls, values: Iterable[Any]) -> Stat:
        present = [
            float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)
        ]
        if not present:
            return cls(None, None)
        std = statistics.stdev(present) if len(present) > 1 else 0.0
        return cls(statistics.fmean(present), std)


@dataclass(frozen=True)
class Point:
    """The runs of one configuration, as mean and standard deviation."""

    key: tuple[Any, ...]
    runs: int
    tps: Stat
    bps: Stat
    latency_p50: Stat
    latency_p99: Stat
    latency_mean: Stat
    consensus_tps: Stat
    consensus_latency: Stat
    sent_tps: Stat
    bottlenecks: tuple[str, ...]

    def field(self, name: str) -> Any:  # noqa: ANN401 - one of KEY_FIELDS' values
        return self.key[KEY_FIELDS.index(name)]

    @property
    def mode(self) -> str:
        return str(self.field("mode"))

    @property
    def nodes(self) -> int:
        return int(self.field("nodes") or 0)

    @property
    def faults(self) -> int:
        return int(self.field("faults") or 0)

    @property
    def rate(self) -> int:
        return int(self.field("rate") or 0)


def key_of(result: Result) -> tuple[Any, ...]:
    return tuple(lookup(result, ("config", name)) for name in KEY_FIELDS)


def aggregate(results: Sequence[Result]) -> list[Point]:
    groups: dict[tuple[Any, ...], list[Result]] = {}
    for result in results:
        groups.setdefault(key_of(result), []).append(result)

    def stat(items: list[Result], *path: str) -> Stat:
        return Stat.of(lookup(item, path) for item in items)

    points = [
        Point(
            key=key,
            runs=len(items),
            tps=stat(items, "end_to_end", "tps"),
            bps=stat(items, "end_to_end", "bps"),
            latency_p50=stat(items, "end_to_end", "latency", "p50_ms"),
            latency_p99=stat(items, "end_to_end", "latency", "p99_ms"),
            latency_mean=stat(items, "end_to_end", "latency", "mean_ms"),
            consensus_tps=stat(items, "consensus", "tps"),
            consensus_latency=stat(items, "consensus", "latency", "mean_ms"),
            sent_tps=stat(items, "clients", "sent_tps"),
            bottlenecks=tuple(str(lookup(item, ("bottleneck", "stage"))) for item in items),
        )
        for key, items in groups.items()
    ]
    return sorted(points, key=lambda p: tuple(str(v) if v is None else v for v in p.key))


def batch_sizes(results: Sequence[Result]) -> dict[str, list[float]]:
    """All per-interval batch sizes of the results, by stage."""
    merged: dict[str, list[float]] = {}
    for result in results:
        series = result.get("batch_sizes")
        if not isinstance(series, dict):
            continue
        for stage, values in series.items():
            if isinstance(values, list):
                merged.setdefault(str(stage), []).extend(
                    float(v) for v in values if isinstance(v, int | float)
                )
    return merged
