"""Progress lines while a run is going, from the METRICS lines the processes are writing."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..analysis.metrics import MalformedLineError, Record, parse_line
from ..json_path import number
from ..run_clock import RunClock


@dataclass
class LogFollower:
    """Reads the complete lines appended to a log file since the last call."""

    path: Path
    offset: int = 0
    pending: bytes = b""
    latest: Record | None = None

    def poll(self) -> Record | None:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return self.latest
        self.offset += len(chunk)
        data = self.pending + chunk
        lines = data.split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            try:
                record = parse_line(line.decode("utf-8", errors="replace"))
            except MalformedLineError:
                continue
            if record is not None:
                self.latest = record
        return self.latest


@dataclass
class Progress:
    """Prints one line per `every` seconds: elapsed time and the latest counters, in the
    processes' time (a dilated run's line says so)."""

    out: TextIO
    duration: float
    logs: list[Path]
    clock: RunClock = field(default_factory=RunClock)
    every: float = 1.0
    started: float = field(default_factory=time.monotonic)
    followers: list[LogFollower] = field(default_factory=list)
    last_print: float = 0.0

    def __post_init__(self) -> None:
        self.followers = [LogFollower(path) for path in self.logs]

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_print < self.every:
            return
        self.last_print = now
        records = [r for r in (f.poll() for f in self.followers) if r is not None]
        elapsed = self.clock.shrink(now - self.started)
        dilated = f", {self.clock.label()}" if self.clock.dilated else ""
        line = f"[{elapsed:5.1f}s / {self.duration:.0f}s{dilated}] {describe(records)}"
        if self.out.isatty():
            self.out.write("\r" + line.ljust(100))
        else:
            self.out.write(line + "\n")
        self.out.flush()

    def has_reported(self, log: Path) -> bool:
        """Whether `log` holds a METRICS line yet (it reads what was appended since)."""
        return any(f.path == log and f.poll() is not None for f in self.followers)

    def finish(self) -> None:
        if self.out.isatty():
            self.out.write("\n")
            self.out.flush()


def describe(records: list[Record]) -> str:
    """A short status from the latest record of each process (node 0's view for consensus)."""
    nodes = [r for r in records if r.get("role") == "node"]
    clients = [r for r in records if r.get("role") == "client"]
    movevm = [r for r in records if r.get("role") == "movevm"]
    parts = []
    if nodes:
        first = nodes[0]
        parts.append(f"round {number(first, ('consensus', 'round')) or 0:,.0f}")
        parts.append(f"committed {number(first, ('consensus', 'committed_txs')) or 0:,.0f} tx")
        executed = number(first, ("stages", "executor", "executed"))
        if executed is not None:
            parts.append(f"executed {executed:,.0f}")
    if clients:
        sent = sum(number(r, ("sent",)) or 0 for r in clients)
        parts.append(f"sent {sent:,.0f} tx ({len(clients)} clients)")
    for record in movevm:
        executed = number(record, ("stages", "executor", "executed"))
        parts.append(f"executed {executed or 0:,.0f} tx")
    return " | ".join(parts) if parts else "waiting for the first METRICS lines"
