"""Parse `METRICS {json}` lines out of process logs.

A log file mixes prose (stderr) and METRICS lines (stdout). Anything that is not a METRICS line is
ignored; a METRICS line whose JSON does not parse (typically the last line of a process that was
killed mid-write) is counted as malformed and skipped. Counters are cumulative, so a lost line
loses no totals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import pipeline as pipelines
from .pipeline import Pipeline

PREFIX = "METRICS "

Record = dict[str, Any]


class MalformedLineError(ValueError):
    """A line carries the METRICS prefix but no valid JSON object."""


def parse_line(line: str) -> Record | None:
    """The record of a METRICS line, None for any other line; raises on a broken METRICS line."""
    start = line.find(PREFIX + "{")
    if start < 0:
        return None
    payload = line[start + len(PREFIX) :].strip()
    try:
        record = json.loads(payload)
    except json.JSONDecodeError as error:
        raise MalformedLineError(f"bad METRICS JSON: {error}") from error
    if not isinstance(record, dict) or not isinstance(record.get("role"), str):
        raise MalformedLineError("METRICS line is not an object with a 'role'")
    if not isinstance(record.get("time_ms"), int | float):
        raise MalformedLineError("METRICS line has no numeric 'time_ms'")
    return record


@dataclass
class ProcessMetrics:
    """The records of one process (role + name), sorted by time."""

    role: str
    name: str
    source: str
    records: list[Record] = field(default_factory=list)
    malformed: int = 0

    @property
    def last(self) -> Record | None:
        return self.records[-1] if self.records else None

    @property
    def has_final(self) -> bool:
        return any(r.get("final") is True for r in self.records)


def parse_text(text: str, source: str = "<text>") -> list[ProcessMetrics]:
    """Group the METRICS records of a log by process; malformed lines count on the first one."""
    processes: dict[tuple[str, str], ProcessMetrics] = {}
    malformed = 0
    for line in text.splitlines():
        try:
            record = parse_line(line)
        except MalformedLineError:
            malformed += 1
            continue
        if record is None:
            continue
        key = (record["role"], str(record.get("name", "")))
        if key not in processes:
            processes[key] = ProcessMetrics(role=key[0], name=key[1], source=source)
        processes[key].records.append(record)
    result = list(processes.values())
    for process in result:
        process.records.sort(key=lambda r: r["time_ms"])
    if result:
        result[0].malformed += malformed
    return result


def parse_file(path: Path) -> list[ProcessMetrics]:
    # errors="replace": a process killed mid-write may leave a partial UTF-8 sequence.
    text = path.read_text(encoding="utf-8", errors="replace")
    return parse_text(text, source=path.name)


@dataclass
class RunMetrics:
    """Every process of one run, by role, and the pipeline they ran as the node described it
    (`pipeline.json` beside the logs; None without one)."""

    nodes: list[ProcessMetrics] = field(default_factory=list)
    clients: list[ProcessMetrics] = field(default_factory=list)
    movevm: list[ProcessMetrics] = field(default_factory=list)
    unparsed_files: list[str] = field(default_factory=list)
    pipeline: Pipeline | None = None
    source: str = "the run's log directory"

    def described(self) -> Pipeline:
        """The run's pipeline; an error naming the logs when they hold no description."""
        if self.pipeline is None:
            raise pipelines.missing_in_logs(self.source)
        return self.pipeline

    def processes_of(self, role: str) -> list[ProcessMetrics]:
        roles = {"node": self.nodes, "client": self.clients, "movevm": self.movevm}
        return roles.get(role, [])

    def pipeline_processes(self) -> list[ProcessMetrics]:
        """The processes that ran the pipeline: the nodes, or the standalone process."""
        return self.processes_of(self.described().process)

    def reported_mode(self) -> str | None:
        """The mode the processes' records name, if any."""
        for process in self.all_processes:
            for record in process.records:
                if isinstance(record.get("mode"), str):
                    return str(record["mode"])
        return None

    @property
    def malformed_lines(self) -> int:
        return sum(p.malformed for p in self.nodes + self.clients + self.movevm)

    @property
    def all_processes(self) -> list[ProcessMetrics]:
        return self.nodes + self.clients + self.movevm


def load_run(directory: Path) -> RunMetrics:
    """Parse every `*.log` of a run's log directory; the role comes from the records themselves."""
    run = RunMetrics(pipeline=pipelines.load(directory), source=str(directory))
    for path in sorted(directory.glob("*.log"), key=_natural_key):
        processes = parse_file(path)
        if not processes:
            run.unparsed_files.append(path.name)
        for process in processes:
            if process.role == "node":
                run.nodes.append(process)
            elif process.role == "client":
                run.clients.append(process)
            elif process.role == "movevm":
                run.movevm.append(process)
            else:
                run.unparsed_files.append(f"{path.name} (role {process.role})")
    return run


def _natural_key(path: Path) -> tuple[str, int, str]:
    """node-2.log sorts before node-10.log."""
    stem = path.stem
    prefix, _, number = stem.rpartition("-")
    if number.isdigit():
        return (prefix, int(number), stem)
    return (stem, -1, stem)
