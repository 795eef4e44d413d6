"""Saved results: one JSON file per run, and their aggregation over repeated runs."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import BenchParameters
from ..flags import FIELD_OF_FLAG, flag_name
from ..json_path import lookup
from ..parameters import NodeParameters
from . import pipeline as pipelines
from .pipeline import Pipeline
from .run_summary import Summary

RESULT_VERSION = 1

# Bench settings that change what a run measures, and the value meaning "not given" (the
# harness's default, or None). Node parameters join them (None: the node's default). A run that
# differs in any of them is another point and another line of a graph; the run's count, duration
# and where its numbers were analysed (projection, price) are not part of a point.
SETTING_DEFAULTS: dict[str, Any] = {
    name: getattr(BenchParameters(), name)
    for name in (
        "tx_size",
        "verifier_threads",
        "executor_delay_us",
        "store",
        "no_instrumentation",
        "accounts",
        "invalid_share",
        "vm",
        "payload",
        "workload",
        "workload_arg",
        # Whom the transactions pay: the contention of the load.
        "dest",
        # How the executor runs batches, on how many threads, and when fees are credited.
        "exec",
        "exec_threads",
        "fees",
        # Who checked signatures: every node, or attesters.
        "verify",
        "delay_ms",
        "delay_matrix",
        # The CPU budget of every node (`fab local --node-cpus`): the cores axis on one machine.
        "node_cpus",
        # A cluster in slow motion (`fab local --dilation --vcpus`): figures in dilated time.
        "dilation",
        "vcpus",
        "client_vcpus",
        "bandwidth_mbit",
    )
} | dict.fromkeys(NodeParameters.names())

Result = dict[str, Any]


def pipeline_of(result: Result) -> Pipeline:
    """The pipeline a saved run ran, as the node described it; an error for a result saved
    before results carried it."""
    where = str(result.get("file", "a saved result"))
    if "pipeline" not in result:
        raise pipelines.missing_in_result(where)
    return Pipeline.from_json(result["pipeline"], where)


def result_name(summary: Summary, stamp: str) -> str:
    config = summary.config
    if not summary.pipeline.consensus:
        return f"{summary.mode}-{stamp}-run{config.get('run', 0)}.json"
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


def load(
    directory: Path, mode: str | None = None, skipped: list[str] | None = None
) -> list[Result]:
    """Every saved result of a directory (optionally of one mode). Files that are not saved
    results are left out; with `skipped`, each is named there with the reason."""
    results = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            if skipped is not None:
                skipped.append(f"{path}: cannot read it ({error})")
            continue
        if (
            not isinstance(data, dict)
            or data.get("version") != RESULT_VERSION
            or not isinstance(data.get("config"), dict)
        ):
            if skipped is not None:
                skipped.append(f"{path}: not a saved result of version {RESULT_VERSION}")
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
    """The runs of one configuration, as mean and standard deviation. `settings` are the ones
    the runs were given beyond mode, committee and rate, as flags (`("--store",)`)."""

    mode: str
    nodes: int
    faults: int
    rate: int
    settings: tuple[str, ...]
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

    @property
    def key(self) -> tuple[str, int, int, int, tuple[str, ...]]:
        return (self.mode, self.nodes, self.faults, self.rate, self.settings)


def _count(value: object) -> int:
    """A committee size, fault count or rate of a saved config; 0 when missing or not a count."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


def _flag(name: str, value: object) -> str:
    flag = flag_name(next((f for f, field in FIELD_OF_FLAG.items() if field == name), name))
    if value is True:
        return flag
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return f"{flag}={text}"


def _schedule_flags(schedule: object) -> list[str]:
    """The fault schedule a run was given (`faults.schedule` of a result), as its flags."""
    if not isinstance(schedule, dict):
        return []

    def seconds(value: object) -> str:
        return f"{value:g}" if isinstance(value, int | float) else str(value)

    flags = []
    for crash in schedule.get("crashes") or []:
        if isinstance(crash, dict):
            restart = crash.get("restart_at")
            back = "" if restart is None else f":{seconds(restart)}"
            flags.append(f"--crash={crash.get('node')}@{seconds(crash.get('at'))}{back}")
    if schedule.get("kill_leader_every") is not None:
        flags.append(f"--kill-leader-every={seconds(schedule['kill_leader_every'])}")
    for partition in schedule.get("partitions") or []:
        if isinstance(partition, dict):
            nodes = ",".join(str(n) for n in partition.get("nodes") or [])
            span = f"{seconds(partition.get('start'))}-{seconds(partition.get('end'))}"
            flags.append(f"--partition={nodes}@{span}")
    return flags


def settings_of(result: Result) -> tuple[str, ...]:
    """What a run was given beyond mode, committee and rate, as flags, in a stable order: the
    settings that differ from their defaults (a setting missing from an older result is its
    default), its fault schedule, and `remote` for a run on remote hosts."""
    config = result.get("config")
    config = config if isinstance(config, dict) else {}
    flags = [
        _flag(name, config[name])
        for name, default in SETTING_DEFAULTS.items()
        if config.get(name) is not None and config[name] != default
    ]
    flags += _schedule_flags(lookup(result, ("faults", "schedule")))
    if config.get("where") == "remote":
        flags.append("remote")
    return tuple(flags)


def key_of(result: Result) -> tuple[str, int, int, int, tuple[str, ...]]:
    config = result.get("config")
    config = config if isinstance(config, dict) else {}
    return (
        str(config.get("mode")),
        _count(config.get("nodes")),
        _count(config.get("faults")),
        _count(config.get("rate")),
        settings_of(result),
    )


def aggregate(results: Sequence[Result]) -> list[Point]:
    """One point per configuration (`key_of`), ordered by mode, committee, rate and settings."""
    groups: dict[tuple[str, int, int, int, tuple[str, ...]], list[Result]] = {}
    for result in results:
        groups.setdefault(key_of(result), []).append(result)

    def stat(items: list[Result], *path: str) -> Stat:
        return Stat.of(lookup(item, path) for item in items)

    points = [
        Point(
            mode=mode,
            nodes=nodes,
            faults=faults,
            rate=rate,
            settings=settings,
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
        for (mode, nodes, faults, rate, settings), items in groups.items()
    ]
    # Every part of a key has one type (text, counts, tuples of text): the order is total.
    return sorted(points, key=lambda p: p.key)


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
