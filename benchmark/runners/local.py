"""Local runs: every node and client is a plain subprocess of this machine, on loopback ports.

Node i listens on base+3i (consensus), base+3i+1 (mempool) and base+3i+2 (transactions). The last
`faults` nodes of the committee and their clients are never booted. Each process writes stdout
(METRICS) and stderr (prose) to `<logs>/<run>/node-i.log` or `client-i.log`, and with a
`prometheus_port` also serves `GET /metrics` (addresses in `prometheus.py`). With `profile`, node i
(or the movevm process) writes its flame graph and folded stacks to `<logs>/<run>/profile-node-i/`
when it stops. The summary knows this machine's cores (`os.cpu_count()`) for its CPU verdict.
With `node_cpus` (`--node-cpus`), each node runs in a cgroup of its own capped at that many cores
and the clients in another (`cgroups.py`); the groups last as long as the run. With `vcpus`
(`--vcpus`, and `--dilation`), each node is a machine of that many virtual CPUs, each of its
threads at most one, the clients a budget of their own (`vcpus.py`), and every process's clock
runs `dilation` times slower (`run_clock.py`): whatever the harness times against them (boot,
the run, the stop, the fault schedule) is stretched as much.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .. import binary_flags
from ..analysis.options import AnalysisOptions
from ..analysis.resources.profiles import PROFILE_GRACE
from ..analysis.run_summary import Summary
from ..binary_flags import ModeFlags
from ..config import NODE_MODES, PORTS_PER_NODE, BenchParameters, Ports, RunFiles
from ..errors import HarnessError
from ..faults.injector import FaultInjector, NodeControl
from ..faults.net_emulation import (
    LOCAL_PARTITION_LEAD_S,
    check_links,
)
from ..faults.schedule import FaultSchedule
from ..run_clock import RunClock
from .cgroups import CgroupError, Cgroups, CpuBudget, in_group
from .commands import committee_client_command, movevm_command, node_command
from .local_control import LocalNodeControl
from .plan import RunPlan
from .processes import DEFAULT_GRACE, ManagedProcess, ProcessSet
from .progress import Progress
from .prometheus import MAX_PORT, MetricsEndpoints, check_ports, local_endpoints
from .vcpus import Fit, ThreadPlacer, VcpuBudget, machine_cores

DEFAULT_BASE_PORT = 4000
LOOPBACK = "127.0.0.1"
# Nodes have this long to open their transaction ports.
STARTUP_TIMEOUT = 30.0
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


def build(repo_root: Path, out: TextIO) -> None:
    """`cargo build --release` in the repository root (binaries: target/release/node, client)."""
    out.write(f"Building release binaries in {repo_root} ...\n")
    out.flush()
    # On a terminal cargo shows its own progress; otherwise its output only matters on failure.
    show = out is sys.stdout
    try:
        result = subprocess.run(
            ["cargo", "build", "--release"],
            cwd=repo_root,
            capture_output=not show,
            text=True,
            check=False,
        )
    except FileNotFoundError as error:
        raise BenchError("cargo not found: install the Rust toolchain (rustup)") from error
    if result.returncode != 0:
        detail = "" if show else f":\n{result.stderr[-4000:]}"
        raise BenchError(f"cargo build --release failed with code {result.returncode}{detail}")


def _failure(process: ManagedProcess, why: str) -> BenchError:
    tail = process.log_tail()
    return BenchError(f"{process.name} {why} (log {process.log_path}):\n{tail}")


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


def remove_stores(log_dir: Path, out: TextIO) -> None:
    """Deletes the nodes' durable stores (`store-node-i.redb` and the files and directories
    beside it) from a run's log directory, once its nodes have stopped: a run at speed leaves
    tens of MB per node, one that fell behind GBs. The logs stay."""
    paths = sorted(log_dir.glob("store-node-*"))
    if not paths:
        return
    size = 0
    for path in paths:
        if path.is_dir():
            size += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            shutil.rmtree(path)
        else:
            size += path.stat().st_size
            path.unlink()
    out.write(f"Deleted the nodes' stores ({size / 1e6:,.0f} MB); --keep-stores keeps them\n")


@dataclass
class LocalBench:
    """Runs benchmarks on this machine; one instance serves every point of a sweep."""

    repo_root: Path
    base_port: int = DEFAULT_BASE_PORT
    binaries: Path | None = None
    work_dir: Path | None = None
    logs_dir: Path | None = None
    results_dir: Path | None = None
    # First port of the metrics endpoints (see prometheus.py); None: no endpoint.
    prometheus_port: int | None = None
    out: TextIO = field(default_factory=lambda: sys.stdout)
    grace: float = DEFAULT_GRACE
    # Nodes profile themselves (`node run --profile DIR`); see analysis/resources/profiles.py.
    profile: bool = False
    analysis: AnalysisOptions = field(default_factory=AnalysisOptions)
    startup_timeout: float = STARTUP_TIMEOUT
    # Crashes, restarts and leader kills during every run (faults/schedule.py).
    fault_schedule: FaultSchedule = field(default_factory=FaultSchedule)
    # Whether a failed audit fails the run (stand-in binaries make no consistent ledger).
    enforce_audit: bool = True
    # Seconds from writing the partition windows to the clients' start (faults/net_emulation.py).
    partition_lead: float = LOCAL_PARTITION_LEAD_S
    # Keep the nodes' durable stores (`--store`) in the log directory after the run; by default
    # they go once the run is summarised (a sweep would otherwise fill the disk).
    keep_stores: bool = False
    # Where the nodes' CPU budgets (`--node-cpus`) are made: this machine's cgroup cpu controller.
    cgroups: Cgroups = field(default_factory=Cgroups)

    @property
    def binaries_dir(self) -> Path:
        return self.binaries or self.repo_root / "target" / "release"

    @property
    def node_binary(self) -> Path:
        return self.binaries_dir / "node"

    @property
    def client_binary(self) -> Path:
        return self.binaries_dir / "client"

    def build(self) -> None:
        """`cargo build --release` in the repository (the sweep calls it once, after its checks)."""
        build(self.repo_root, self.out)

    def node_ports(self, bench: BenchParameters) -> range:
        """Node i listens on base+3i .. base+3i+2; movevm runs no node."""
        if bench.mode not in NODE_MODES:
            return range(0)
        return range(self.base_port, self.base_port + PORTS_PER_NODE * bench.nodes)

    def metrics_endpoints(self, bench: BenchParameters) -> MetricsEndpoints | None:
        if self.prometheus_port is None:
            return None
        return local_endpoints(self.prometheus_port, bench)

    def check(self, bench: BenchParameters) -> None:
        """Every port of the run is a valid port, and no two processes want the same one."""
        ports = self.node_ports(bench)
        if ports and not (ports[0] > 0 and ports[-1] <= MAX_PORT):
            raise BenchError(
                f"{bench.nodes} nodes from base port {self.base_port} need ports up to"
                f" {ports[-1]} (at most {MAX_PORT})"
            )
        if self.prometheus_port is not None:
            endpoints = local_endpoints(self.prometheus_port, bench)
            check_ports(endpoints, ports, self.prometheus_port)
        self.fault_schedule.check(bench)
        check_links(bench)
        if bench.node_cpus is not None:
            self.check_budget(bench.node_cpus, bench.live_nodes)
        if bench.vcpus is not None:
            self.check_vcpus(bench)

    def check_budget(self, cores: float, nodes: int) -> None:
        """The nodes' budgets fit in this machine's cores, and its cgroups can hold them."""
        machine = os.cpu_count() or 1
        # A budget the machine cannot give is not a budget: the quotas would only say how the
        # nodes were meant to share it, and the summary would judge them against cores they never
        # had. (Within the machine's cores a quota is still a cap, not a reservation: the summary
        # also judges the machine, so a node starved below its budget shows.)
        if nodes * cores > machine + 1e-9:
            raise BenchError(
                f"--node-cpus={cores:g} for {nodes} nodes is {nodes * cores:g} cores, more than"
                f" this machine's {machine}: lower --node-cpus or --nodes"
            )
        self.cgroups.check(cores)

    def check_vcpus(self, bench: BenchParameters) -> None:
        """A dilated cluster's budgets fit in this machine's cores (leaving the harness its
        share), and this process may make them: root, and a writable cpu controller."""
        fit = Fit(
            bench.live_nodes,
            bench.vcpus or 0.0,
            bench.client_vcpus,
            bench.dilation,
            machine_cores(),
        )
        refusal = fit.refusal()
        if refusal is not None:
            raise BenchError(refusal)
        if os.geteuid() != 0:
            raise BenchError(
                "--vcpus holds every thread of a node in a cgroup of its own: run as root"
            )
        try:
            with self._vcpu_budget(bench, "check", nodes=1):
                pass
        except CgroupError as error:
            raise BenchError(f"--vcpus: {error}") from error

    def run(self, bench: BenchParameters) -> list[Summary]:
        """Run `bench.runs` times (`plan.py`); each run prints and saves its summary."""
        for binary in (self.node_binary, self.client_binary):
            if not binary.is_file():
                raise BenchError(f"{binary} does not exist; build the binaries first")
        return RunPlan(self).run(bench)

    # -- the transport of `plan.py` ----------------------------------------------------------

    @property
    def where(self) -> str:
        return "local"

    @property
    def local_node_binary(self) -> Path:
        return self.node_binary

    @property
    def results_directory(self) -> Path:
        return self.results_dir or self.repo_root / "results"

    @property
    def ports(self) -> Ports:
        return Ports.consecutive(self.base_port)

    def run_id(self, bench: BenchParameters, index: int) -> str:
        return f"{bench.mode}-{time.strftime('%Y%m%d-%H%M%S')}-run{index}"

    def log_directory(self, run_id: str) -> Path:
        return (self.logs_dir or self.repo_root / "logs") / run_id

    def config_directory(self, run_id: str) -> Path:
        return (self.work_dir or self.repo_root / ".bench") / run_id

    def addresses(self, bench: BenchParameters) -> list[str]:
        return [LOOPBACK] * bench.nodes

    def announce(self, bench: BenchParameters, run_id: str, index: int, log_dir: Path) -> None:
        self.out.write(f"Run {index + 1}/{bench.runs} ({bench.mode}), logs in {log_dir}\n")

    @contextlib.contextmanager
    def session(
        self,
        bench: BenchParameters,
        run_id: str,
        log_dir: Path,
        files: RunFiles | None,
        clock: RunClock,
    ) -> Iterator[LocalSession]:
        grace = max(self.grace, PROFILE_GRACE) if self.profile else self.grace
        budget = self._budget(bench, run_id)
        try:
            # The budget's groups go once every process has stopped (ProcessSet exits first).
            with budget or contextlib.nullcontext(), ProcessSet(clock.stretch(grace)) as processes:
                session = LocalSession(self, bench, processes, log_dir, budget, clock)
                try:
                    yield session
                finally:
                    session.stop_placing()
                if budget is not None:
                    # What the groups counted (throttled periods) is read before they go.
                    processes.stop_all()
                    budget.save_stats(log_dir)
        finally:
            for warning in budget.warnings if budget is not None else ():
                self.out.write(f"Warning: {warning}\n")

    def measures_energy(self) -> bool:
        return True

    def result_fields(self, bench: BenchParameters) -> dict[str, Any]:
        return {"cores": os.cpu_count()}

    def after_run(self, log_dir: Path) -> None:
        if not self.keep_stores:
            remove_stores(log_dir, self.out)

    def _budget(self, bench: BenchParameters, run_id: str) -> CpuBudget | VcpuBudget | None:
        budget: CpuBudget | VcpuBudget
        if bench.vcpus is not None:
            budget = self._vcpu_budget(bench, run_id, bench.live_nodes)
        elif bench.node_cpus is not None:
            budget = self.cgroups.budget(run_id, bench.node_cpus, bench.live_nodes)
        else:
            return None
        self.out.write(budget.describe() + "\n")
        return budget

    def _vcpu_budget(self, bench: BenchParameters, name: str, nodes: int) -> VcpuBudget:
        return VcpuBudget(
            self.cgroups.hierarchy(),
            f"hotmove-{os.getpid()}-{name}",
            dilation=bench.dilation,
            vcpus=bench.vcpus or 0.0,
            client_vcpus=bench.client_vcpus,
            nodes=nodes,
            fs=self.cgroups.fs,
        )

    def _profile_dir(self, log_dir: Path, name: str) -> str | None:
        return str(log_dir / f"profile-{name}") if self.profile else None


@dataclass
class LocalSession:
    """A run's processes on this machine: node i and client i are subprocesses, in their CPU
    budget's groups when the run has one."""

    bench_runner: LocalBench
    bench: BenchParameters
    processes: ProcessSet
    log_dir: Path
    budget: CpuBudget | VcpuBudget | None
    clock: RunClock = field(default_factory=RunClock)
    nodes: list[ManagedProcess] = field(default_factory=list)
    clients: list[ManagedProcess] = field(default_factory=list)
    # Gives each thread of a node of several virtual CPUs its own group while the run goes.
    placer: ThreadPlacer | None = None

    @property
    def flags(self) -> ModeFlags:
        """What the binaries say the mode takes (asked once per build)."""
        return binary_flags.describe(self.bench_runner.node_binary, self.bench.mode)

    def start_nodes(self, files: RunFiles, emulation: Path | None) -> NodeControl:
        runner, bench = self.bench_runner, self.bench
        self.nodes = [
            self.processes.start(
                f"node-{i}",
                _placed(
                    self._node_command(files, i, emulation),
                    self.budget.node_group(i) if self.budget is not None else None,
                ),
                self.log_dir / f"node-{i}.log",
            )
            for i in range(bench.live_nodes)
        ]
        addresses = files.committee.transactions_addresses(bench.live_nodes)
        wait_for_ports(addresses, self.nodes, runner.startup_timeout)
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
        bench = self.bench
        endpoints = self.bench_runner.metrics_endpoints(bench)
        genesis = str(files.genesis_file) if files.genesis_file else None
        binary = str(self.bench_runner.client_binary)
        self.clients = [
            self.processes.start(
                f"client-{i}",
                _placed(
                    committee_client_command(
                        binary,
                        bench,
                        self.flags,
                        files,
                        i,
                        genesis=genesis,
                        endpoints=endpoints,
                        dilation_origin_ms=self._origin_ms,
                    ),
                    self.budget.clients_group if self.budget is not None else None,
                ),
                self.log_dir / f"client-{i}.log",
            )
            for i in range(bench.live_nodes)
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
            self.bench_runner.out.write(f"Warning: placing a node's threads: {error}\n")

    def stop_nodes(self) -> None:
        self.stop_placing()
        # Without their budgets, so that they drain their connections in the time a stop is given.
        if self.budget is not None:
            self.budget.lift()
        self.processes.stop(self.nodes)

    def collect(self, log_dir: Path) -> None:
        """Every process wrote its log into `log_dir` already."""

    def run_standalone(self) -> None:
        runner, bench = self.bench_runner, self.bench
        endpoints = runner.metrics_endpoints(bench)
        prometheus = endpoints.clients[0].listen if endpoints else None
        process = self.processes.start(
            "movevm",
            movevm_command(
                str(runner.client_binary),
                bench,
                self.flags,
                prometheus,
                runner._profile_dir(self.log_dir, "movevm"),
            ),
            self.log_dir / "movevm.log",
        )
        self.wait_for([process], watched=[], logs=[process.log_path])

    def _node_command(self, files: RunFiles, index: int, emulation: Path | None) -> list[str]:
        runner, bench = self.bench_runner, self.bench
        endpoints = runner.metrics_endpoints(bench)
        return node_command(
            str(runner.node_binary),
            keys=str(files.key_files[index]),
            committee=str(files.committee_file),
            parameters=str(files.parameters_file),
            genesis=str(files.genesis_file) if files.genesis_file else None,
            bench=bench,
            flags=self.flags,
            prometheus=endpoints.nodes[index].listen if endpoints else None,
            profile=runner._profile_dir(self.log_dir, f"node-{index}"),
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
        progress = Progress(self.bench_runner.out, float(bench.duration), logs, clock=self.clock)
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
