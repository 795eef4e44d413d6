"""The remote side of a fault schedule: kill and restart node i on host i over SSH.

A kill sends SIGKILL to the node's process group (the `setsid` wrapper included, so it writes no
exit file: the node is simply gone); a restart runs the node's exact command again through the
same wrapper, appending to its log. Rounds are read from the last METRICS line of each node's
log; their `time_ms` is the host's clock, assumed NTP-synchronised with this machine's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..analysis.metrics import MalformedLineError, parse_line
from ..faults.injector import RoundView, round_view


@dataclass
class RemoteNodeControl:
    run: Callable[[int, str], str]  # run a shell command on host i, return its stdout
    bench_dir: str
    # Node i's start command, as `host_scripts.background_script(..., append=True)` makes it.
    restart_scripts: dict[int, str]

    def kill(self, node: int) -> None:
        pid_file = f"{self.bench_dir}/pids/node-{node}.pid"
        self.run(node, f'kill -KILL -- "-$(cat {pid_file})" 2>/dev/null || true')

    def restart(self, node: int) -> None:
        self.run(node, self.restart_scripts[node])

    def latest_round(self, nodes: Sequence[int], since_ms: float) -> RoundView | None:
        views = []
        for index in nodes:
            text = self.run(
                index,
                f"grep '^METRICS ' {self.bench_dir}/logs/node-{index}.log | tail -n 1 || true",
            )
            try:
                record = parse_line(text.strip())
            except MalformedLineError:
                continue
            if record is None or float(record["time_ms"]) < since_ms:
                continue
            views.extend(round_view(record))
        return max(views, key=lambda view: view.round, default=None)
