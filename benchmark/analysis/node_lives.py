"""A node's METRICS records cut into lives: a restarted node appends to the same log, and its
counters start again from zero, so every number is read within one life of the process."""

from __future__ import annotations

from dataclasses import dataclass

from ..faults.events import RESTART, FaultLog
from .counters import LIFE
from .metrics import ProcessMetrics, Record, RunMetrics


def index_of(process: ProcessMetrics) -> int | None:
    """`node-3.log` -> 3 (the harness names logs after the process's index)."""
    stem = process.source.rsplit(".", 1)[0]
    number = stem.rpartition("-")[2]
    return int(number) if number.isdigit() else None


@dataclass
class NodeLives:
    index: int
    name: str
    lives: list[list[Record]]
    crashed: bool  # the schedule crashed it at least once: it did not run through the run

    @property
    def last(self) -> Record | None:
        """The latest record of its latest life that reported anything."""
        for life in reversed(self.lives):
            if life:
                return life[-1]
        return None

    @property
    def records(self) -> list[Record]:
        return [record for life in self.lives for record in life]


def node_lives(run: RunMetrics, faults: FaultLog) -> list[NodeLives]:
    crashed = faults.crashed()
    result = []
    for position, process in enumerate(run.nodes):
        index = index_of(process)
        index = position if index is None else index
        cuts = sorted(e.time_ms for e in faults.events if e.kind == RESTART and e.node == index)
        lives: list[list[Record]] = [[] for _ in range(len(cuts) + 1)]
        for record in process.records:
            life = sum(1 for cut in cuts if float(record["time_ms"]) >= cut)
            lives[life].append(record)
        result.append(NodeLives(index, process.name, lives, index in crashed))
    return sorted(result, key=lambda n: n.index)


def mark_lives(run: RunMetrics, faults: FaultLog) -> RunMetrics:
    """Stamp every record of a restarted node's later lives with its life number (in place), so
    counters are read within a life wherever the records go (`counters.increase`)."""
    for node in node_lives(run, faults):
        for number, life in enumerate(node.lives):
            for record in life:
                if number:
                    record[LIFE] = number
    return run
