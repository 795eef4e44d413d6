"""The local side of a fault schedule: kill and restart node processes of this machine."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..faults.injector import RoundView, round_view
from .processes import ManagedProcess, ProcessSet
from .progress import LogFollower


@dataclass
class LocalNodeControl:
    """Node i is `nodes[i]`; a restart replaces it in that list, which the runner watches."""

    processes: ProcessSet
    nodes: list[ManagedProcess]
    followers: list[LogFollower] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.followers = [LogFollower(node.log_path) for node in self.nodes]

    def kill(self, node: int) -> None:
        process = self.nodes[node]
        # SIGKILL to the whole group: a crash, not a shutdown (no final METRICS line).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.popen.wait()

    def restart(self, node: int) -> None:
        old = self.nodes[node]
        self.nodes[node] = self.processes.start(old.name, old.command, old.log_path, append=True)

    def latest_round(self, nodes: Sequence[int], since_ms: float) -> RoundView | None:
        views = []
        for index in nodes:
            record = self.followers[index].poll()
            if record is None or float(record["time_ms"]) < since_ms:
                continue
            views.extend(round_view(record))
        return max(views, key=lambda view: view.round, default=None)
