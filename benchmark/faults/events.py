"""What the fault injector did during a run, saved next to the logs as `faults.json`.

The summary, the audit and `fab plot` read it back, so a run's faults are known wherever its logs
go (`fab logs` included). Times are both seconds from the start of the clients (`t`) and wall
clock milliseconds (`time_ms`, the clock of the METRICS lines).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FILE_NAME = "faults.json"
CRASH = "crash"
RESTART = "restart"
# A node cut off from the others by an emulated partition, and the partition's end.
PARTITION = "partition"
HEAL = "heal"


@dataclass(frozen=True)
class FaultEvent:
    kind: str  # CRASH, RESTART, PARTITION or HEAL
    node: int
    t: float
    time_ms: float
    cause: str  # "schedule" (--crash, --partition) or "leader" (--kill-leader-every)
    round: int | None = None  # the round whose leader was killed

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultEvent:
        return cls(
            kind=str(data["kind"]),
            node=int(data["node"]),
            t=float(data["t"]),
            time_ms=float(data["time_ms"]),
            cause=str(data.get("cause", "schedule")),
            round=int(data["round"]) if data.get("round") is not None else None,
        )


@dataclass
class FaultLog:
    """The schedule asked for, the clients' start, every crash and restart done, and when each
    node was cut off and healed (one event per node of a partition)."""

    start_ms: float | None = None
    schedule: dict[str, Any] = field(default_factory=dict)
    events: list[FaultEvent] = field(default_factory=list)
    never_booted: list[int] = field(default_factory=list)

    def crashed(self) -> set[int]:
        return {e.node for e in self.events if e.kind == CRASH}

    def down_at_end(self) -> set[int]:
        """Nodes whose last event is a crash: they did not run to the end."""
        last: dict[int, str] = {}
        for event in sorted(self.events, key=lambda e: e.time_ms):
            if event.kind in (CRASH, RESTART):
                last[event.node] = event.kind
        return {node for node, kind in last.items() if kind == CRASH}

    def restarts(self) -> list[FaultEvent]:
        return [e for e in self.events if e.kind == RESTART]

    def heals(self) -> list[FaultEvent]:
        return [e for e in self.events if e.kind == HEAL]

    def partitioned(self) -> set[int]:
        """Nodes cut off by a partition at some point of the run."""
        return {e.node for e in self.events if e.kind == PARTITION}

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_ms": self.start_ms,
            "schedule": self.schedule,
            "never_booted": self.never_booted,
            "events": [asdict(e) for e in self.events],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultLog:
        events = [FaultEvent.from_dict(e) for e in data.get("events", []) if isinstance(e, dict)]
        return cls(
            start_ms=data.get("start_ms"),
            schedule=dict(data.get("schedule") or {}),
            events=events,
            never_booted=[int(n) for n in data.get("never_booted", [])],
        )

    def save(self, log_dir: Path) -> Path:
        path = log_dir / FILE_NAME
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, log_dir: Path) -> FaultLog:
        """The run's fault log; an empty one when the run had none (or an older harness ran it)."""
        path = log_dir / FILE_NAME
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return cls()
        return cls.from_dict(data) if isinstance(data, dict) else cls()
