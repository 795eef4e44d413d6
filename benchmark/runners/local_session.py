"""A local run's processes: node i and client i (or the one `movevm` process) are subprocesses of
this machine, started, watched until the clients are done, and stopped.

Each process writes stdout (METRICS) and stderr (prose) to `<logs>/<run>/node-i.log` or
`client-i.log`. With `profile`, node i (or the movevm process) writes its flame graph and folded
stacks to `<logs>/<run>/profile-node-i/` when it stops. Under a CPU budget (`--node-cpus`,
`--vcpus`) the nodes start in their groups; with virtual CPUs each thread of a node gets one.
Whatever the harness times against the processes (boot, the run, the stop) is on the run's
clock, stretched when it is dilated.
"""

from __future__ import annotations

import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .. import binary_flags
from ..binary_flags import ModeFlags
from ..config import BenchParameters
from ..errors import HarnessError
from ..faults.injector import FaultInjector, NodeControl
from ..run_clock import RunClock
from ..run_files import RunFiles
from .cgroups import CpuBudget, in_group
from .commands import committee_client_command, movevm_command, node_command
from .local_control import LocalNodeControl
from .processes import ManagedProcess, ProcessSet
from .progress import Progress
from .prometheus import MetricsEndpoints
from .vcpus import ThreadPlacer, VcpuBudget

# Clients may run this long beyond --duration (waiting for the nodes, final METRICS line),
# counted from their first METRICS line: crypto clients sign their whole load before sending,
# which on a busy machine took 40 s for 1.3 M transactions.
EXIT_MARGIN = 30.0
# How long a client may take to start sending (signing included; a client's first METRICS line
# comes a second of its own time after it starts).
LOAD_START_TIMEOUT = 600.0
POLL_INTERVAL = 0.1


class BenchError(HarnessError):
    """A run could not complete (a process failed or hung); the message says which and why."""


def _failure(process: ManagedProcess, why: str) -> BenchError:
    tail = process.log_tail()
    return BenchError(
        f"{process.name} {why}{killed_by(process.returncode)} (log {process.log_path}):\n{tail}"
    )


def killed_by(code: int | None) -> str:
    """What a process's exit code says of who stopped it, where the harness did not: SIGKILL
    sent by no one here is the kernel's out-of-memory killer, which leaves no line in the log."""
    if code == -signal.SIGKILL:
        return (
            ", killed by SIGKILL, which the harness did not send: most likely the kernel's"
            " out-of-memory killer (see `dmesg`; the processes' memory exceeded the machine's)"
        )
    return ""


def wait_for_ports(addresses: list[str], processes: list[ManagedProcess], timeout: float) -> None:
    """Wait until every address accepts TCP connections, failing fast if a process dies."""
    deadline = time.monotonic() + timeout
    pending = list(zip(addresses, processes, strict=True))
    while pending:
        address, process = pending[0]
        if not process.running():
            raise _failure(process, f"exited with code {process.returncode} while starting")
        host, port = address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                pending.pop(0)
                continue
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise _failure(process, f"did not open {address} within {timeout:.0f} s")
        time.sleep(POLL_INTERVAL)


@dataclass
class ExitDeadline:
    """When processes that run for `duration` (of their own time) must have exited:
    `EXIT_MARGIN` after the duration counted from the moment all of them sent (their first
    METRICS line), and they have `LOAD_START_TIMEOUT` to get there; real seconds, stretched by
    the run's clock."""

    duration: float
    clock: RunClock = field(default_factory=RunClock)
    start_by: float = 0.0
    end_by: float | None = None

    @property
    def start_within(self) -> float:
        # A dilated client's first line comes a second of its time, K real ones, after it sends.
        return LOAD_START_TIMEOUT + self.clock.stretch(1.0) - 1.0

    def __post_init__(self) -> None:
        self.start_by = time.monotonic() + self.start_within

    @property
    def all_sent(self) -> bool:
        return self.end_by is not None

    def check(self, processes: list[ManagedProcess], progress: Progress) -> None:
        now = time.monotonic()
        margin = self.clock.stretch(EXIT_MARGIN)
        if self.end_by is None:
            silent = [p for p in processes if p.running() and not progress.has_reported(p.log_path)]
            if not silent:
                self.end_by = now + self.clock.stretch(self.duration) + margin
            elif now > self.start_by:
                raise _failure(silent[0], f"sent nothing within {self.start_within:.0f} s")
        elif now > self.end_by:
            late = next((p for p in processes if p.running()), processes[0])
            raise _failure(late, f"still running {margin:.0f} s after its duration")


def _placed(command: list[str], group: Path | None) -> list[str]:
    """`command` as it starts inside `group` (a restart reruns it, so it goes back in there)."""
    return command if group is None else in_group(command, group)


@dataclass
class LocalSession:
    """A run's processes on this machine: node i and client i are subprocesses, in their CPU
    budget's groups when the run has one."""

    bench: BenchParameters
    processes: ProcessSet
    log_dir: Path
    budget: CpuBudget | VcpuBudget | None
    # The directory of `node` and `client`.
    binaries: Path
    endpoints: MetricsEndpoints | None
    out: TextIO
    startup_timeout: float
    profile: bool = False
    clock: RunClock = field(default_factory=RunClock)
    nodes: list[ManagedProcess] = field(default_factory=list)
    clients: list[ManagedProcess] = field(default_factory=list)
    # Gives each thread of a node of several virtual CPUs its own group while the run goes.
    placer: ThreadPlacer | None = None

    @property
    def flags(self) -> ModeFlags:
        """What the binaries say the mode takes (asked once per build)."""
        return binary_flags.describe(self.binaries / "node", self.bench.mode)

    def start_nodes(self, files: RunFiles, emulation: Path | None) -> NodeControl:
        self.nodes = [
            self.processes.start(
                f"node-{i}",
                _placed(
                    self._node_command(files, i, emulation),
                    self.budget.node_group(i) if self.budget is not None else None,
                ),
                self.log_dir / f"node-{i}.log",
            )
            for i in range(self.bench.live_nodes)
        ]
        addresses = files.committee.transactions_addresses(self.bench.live_nodes)
        wait_for_ports(addresses, self.nodes, self.startup_timeout)
        if isinstance(self.budget, VcpuBudget):
            # Booted at full speed; from now on each a machine of its virtual CPUs.
            placer = ThreadPlacer(
                self.budget, lambda: [p.pid if p.running() else None for p in self.nodes]
            )
            placer.place_once()
            self.budget.hold_nodes()
            self.placer = placer.__enter__()
        # A restart replaces node i in `self.nodes`, which `wait` watches.
        return LocalNodeControl(self.processes, self.nodes)

    def start_clients(self, files: RunFiles) -> None:
        genesis = str(files.genesis_file) if files.genesis_file else None
        binary = str(self.binaries / "client")
        self.clients = [
            self.processes.start(
                f"client-{i}",
                _placed(
                    committee_client_command(
                        binary,
                        self.bench,
                        self.flags,
                        files,
                        i,
                        genesis=genesis,
                        endpoints=self.endpoints,
                        dilation_origin_ms=self._origin_ms,
                    ),
                    self.budget.clients_group if self.budget is not None else None,
                ),
                self.log_dir / f"client-{i}.log",
            )
            for i in range(self.bench.live_nodes)
        ]

    def wait(self, faults: FaultInjector) -> None:
        logs = [p.log_path for p in self.nodes + self.clients]
        self.wait_for(self.clients, self.nodes, logs, faults)

    def stop_placing(self) -> None:
        """The placer stops (before the processes and the groups go); what it could not do is
        said."""
        if self.placer is None:
            return
        placer, self.placer = self.placer, None
        placer.__exit__(None, None, None)
        for error in placer.errors:
            self.out.write(f"Warning: placing a node's threads: {error}\n")

    def stop_nodes(self) -> None:
        self.stop_placing()
        # Without their budgets, so that they drain their connections in the time a stop is given.
        if self.budget is not None:
            self.budget.lift()
        self.processes.stop(self.nodes)

    def collect(self, log_dir: Path) -> None:
        """Every process wrote its log into `log_dir` already."""

    def run_standalone(self) -> None:
        prometheus = self.endpoints.clients[0].listen if self.endpoints else None
        process = self.processes.start(
            "movevm",
            movevm_command(
                str(self.binaries / "client"),
                self.bench,
                self.flags,
                prometheus,
                self._profile_dir("movevm"),
            ),
            self.log_dir / "movevm.log",
        )
        self.wait_for([process], watched=[], logs=[process.log_path])

    def _profile_dir(self, name: str) -> str | None:
        return str(self.log_dir / f"profile-{name}") if self.profile else None

    def _node_command(self, files: RunFiles, index: int, emulation: Path | None) -> list[str]:
        bench = self.bench
        return node_command(
            str(self.binaries / "node"),
            keys=str(files.key_files[index]),
            committee=str(files.committee_file),
            parameters=str(files.parameters_file),
            genesis=str(files.genesis_file) if files.genesis_file else None,
            bench=bench,
            flags=self.flags,
            prometheus=self.endpoints.nodes[index].listen if self.endpoints else None,
            profile=self._profile_dir(f"node-{index}"),
            # In the run's log directory: a restart (fault schedule) reopens the same file.
            store=str(self.log_dir / f"store-node-{index}.redb") if bench.store else None,
            net_emulation=str(emulation) if emulation is not None else None,
            dilation_origin_ms=self._origin_ms,
            index=index,
        )

    @property
    def _origin_ms(self) -> int | None:
        return self.clock.origin_ms() if self.clock.dilated else None

    def wait_for(
        self,
        finishing: list[ManagedProcess],
        watched: list[ManagedProcess],
        logs: list[Path],
        faults: FaultInjector | None = None,
    ) -> None:
        """Wait for `finishing` to exit on their own while `watched` must keep running, except
        where `faults` killed a node (process i of either list belongs to node i)."""
        bench = self.bench
        progress = Progress(self.out, float(bench.duration), logs, clock=self.clock)
        deadline = ExitDeadline(float(bench.duration), self.clock)
        clients_held = False
        try:
            while any(p.running() for p in finishing) or (
                faults is not None and faults.holds_run(bench.duration)
            ):
                if faults is not None:
                    faults.tick()
                for i, process in enumerate(watched):
                    if not process.running() and not (faults and faults.is_expected_down(i)):
                        raise _failure(process, f"exited early with code {process.returncode}")
                for i, process in enumerate(finishing):
                    if faults is not None and faults.ever_crashed(i):
                        continue
                    if process.returncode not in (None, 0):
                        raise _failure(process, f"failed with code {process.returncode}")
                deadline.check(finishing, progress)
                if deadline.all_sent and not clients_held:
                    # The clients signed their load at full speed; sending, they keep to theirs.
                    clients_held = True
                    if isinstance(self.budget, VcpuBudget):
                        self.budget.hold_clients()
                progress.tick()
                time.sleep(POLL_INTERVAL)
            progress.tick(force=True)
        finally:
            progress.finish()
        for i, process in enumerate(finishing):
            if process.returncode != 0 and not (faults and faults.ever_crashed(i)):
                raise _failure(process, f"failed with code {process.returncode}")
