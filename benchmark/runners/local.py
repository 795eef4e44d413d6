"""Local runs: every node and client is a plain subprocess of this machine, on loopback ports.

Node i listens on base+3i (consensus), base+3i+1 (mempool) and base+3i+2 (transactions). The last
`faults` nodes of the committee and their clients are never booted. Each process writes stdout
(METRICS) and stderr (prose) to `<logs>/<run>/node-i.log` or `client-i.log`, and with a
`prometheus_port` also serves `GET /metrics` (addresses in `prometheus.py`). With `profile`, node i
(or the movevm process) writes its flame graph and folded stacks to `<logs>/<run>/profile-node-i/`
when it stops. The summary knows this machine's cores (`os.cpu_count()`) for its CPU verdict.
With `node_cpus` (`--node-cpus`), each node runs in a cgroup of its own capped at that many cores
and the clients in another (`cgroups.py`); the groups last as long as the run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..analysis import pipeline as pipelines
from ..analysis.options import AnalysisOptions
from ..analysis.resources.energy import EnergyMeter
from ..analysis.resources.profiles import PROFILE_GRACE
from ..analysis.run_summary import Summary
from ..config import NODE_MODES, PORTS_PER_NODE, BenchParameters, Ports, RunFiles, write_run_files
from ..errors import HarnessError
from ..faults.injector import FaultInjector
from ..faults.leader import committee_names
from ..faults.net_emulation import (
    LOCAL_PARTITION_LEAD_S,
    check_links,
    wait_for_clients_start,
    write_node_file_if_emulating,
)
from ..faults.schedule import FaultSchedule
from .cgroups import Cgroups, CpuBudget, in_group
from .commands import client_command, movevm_command, node_command
from .finish import finish_run
from .local_control import LocalNodeControl
from .processes import DEFAULT_GRACE, ManagedProcess, ProcessSet, signals_interrupt
from .progress import Progress
from .prometheus import MAX_PORT, MetricsEndpoints, check_ports, local_endpoints

DEFAULT_BASE_PORT = 4000
LOOPBACK = "127.0.0.1"
# Nodes have this long to open their transaction ports.
STARTUP_TIMEOUT = 30.0
# Clients may run this long beyond --duration (waiting for the nodes, final METRICS line),
# counted from their first METRICS line: crypto clients sign their whole load before sending,
# which on a busy machine took 40 s for 1.3 M transactions.
EXIT_MARGIN = 30.0
# How long a client may take to start sending (signing included).
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
    """When processes that run for `duration` must have exited: `EXIT_MARGIN` after the duration
    counted from the moment all of them sent (their first METRICS line), and they have
    `LOAD_START_TIMEOUT` to get there."""

    duration: float
    start_by: float = field(default_factory=lambda: time.monotonic() + LOAD_START_TIMEOUT)
    end_by: float | None = None

    def check(self, processes: list[ManagedProcess], progress: Progress) -> None:
        now = time.monotonic()
        if self.end_by is None:
            silent = [p for p in processes if p.running() and not progress.has_reported(p.log_path)]
            if not silent:
                self.end_by = now + self.duration + EXIT_MARGIN
            elif now > self.start_by:
                raise _failure(silent[0], f"sent nothing within {LOAD_START_TIMEOUT:.0f} s")
        elif now > self.end_by:
            late = next((p for p in processes if p.running()), processes[0])
            raise _failure(late, f"still running {EXIT_MARGIN:.0f} s after its duration")


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

    def run(self, bench: BenchParameters) -> list[Summary]:
        """Run `bench.runs` times; each run prints and saves its summary."""
        bench = self.fault_schedule.bench_for(bench)
        self.check(bench)
        for binary in (self.node_binary, self.client_binary):
            if not binary.is_file():
                raise BenchError(f"{binary} does not exist; build the binaries first")
        summaries = []
        with signals_interrupt():
            for index in range(bench.runs):
                summaries.append(self.run_once(bench, index))
        return summaries

    def run_once(self, bench: BenchParameters, index: int = 0) -> Summary:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_id = f"{bench.mode}-{stamp}-run{index}"
        log_dir = (self.logs_dir or self.repo_root / "logs") / run_id
        config_dir = (self.work_dir or self.repo_root / ".bench") / run_id
        log_dir.mkdir(parents=True, exist_ok=True)
        self.out.write(f"Run {index + 1}/{bench.runs} ({bench.mode}), logs in {log_dir}\n")
        endpoints = self.metrics_endpoints(bench)
        if endpoints is not None:
            self.out.write(endpoints.describe())
        grace = max(self.grace, PROFILE_GRACE) if self.profile else self.grace
        # What the mode runs, asked of the node and kept beside the logs for their analysis.
        pipeline = pipelines.describe(self.node_binary, bench.mode)
        pipelines.save(pipeline, log_dir)
        budget = self._budget(bench, run_id)
        try:
            # The budget's groups go once every process has stopped (ProcessSet exits first).
            with budget or contextlib.nullcontext(), ProcessSet(grace) as processes:
                if pipeline.consensus:
                    self._run_nodes(bench, processes, config_dir, log_dir, budget)
                else:
                    self._run_movevm(bench, processes, log_dir)
                if budget is not None:
                    # What the groups counted (throttled periods) is read before they go.
                    processes.stop_all()
                    budget.save_stats(log_dir)
        finally:
            for warning in budget.warnings if budget is not None else ():
                self.out.write(f"Warning: {warning}\n")
        if not self.keep_stores:
            remove_stores(log_dir, self.out)
        summary, _ = finish_run(
            log_dir,
            bench,
            self.results_dir or self.repo_root / "results",
            self.out,
            extra={
                "run": index,
                "where": "local",
                "cores": os.cpu_count(),
                "profile": self.profile,
            },
            options=self.analysis,
            enforce_audit=self.enforce_audit,
        )
        return summary

    def _budget(self, bench: BenchParameters, run_id: str) -> CpuBudget | None:
        if bench.node_cpus is None:
            return None
        budget = self.cgroups.budget(run_id, bench.node_cpus, bench.live_nodes)
        self.out.write(budget.describe() + "\n")
        return budget

    def _run_nodes(
        self,
        bench: BenchParameters,
        processes: ProcessSet,
        config_dir: Path,
        log_dir: Path,
        budget: CpuBudget | None = None,
    ) -> None:
        files = write_run_files(
            bench,
            self.node_binary,
            config_dir,
            [LOOPBACK] * bench.nodes,
            Ports.consecutive(self.base_port),
        )
        live = bench.live_nodes
        endpoints = self.metrics_endpoints(bench)
        names = committee_names(files.committee_file)
        # With partitions the clients' start is fixed now: the nodes' windows count from it.
        partitions = self.fault_schedule.partitions
        start_at = time.time() + self.partition_lead if partitions else None
        emulation = write_node_file_if_emulating(config_dir, names, bench, partitions, start_at)
        nodes = [
            processes.start(
                f"node-{i}",
                _placed(
                    self._node_command(bench, files, i, log_dir, emulation),
                    budget.node_group(i) if budget is not None else None,
                ),
                log_dir / f"node-{i}.log",
            )
            for i in range(live)
        ]
        addresses = files.committee.transactions_addresses(live)
        wait_for_ports(addresses, nodes, self.startup_timeout)
        wait_for_clients_start(start_at, self.partition_lead, self.out)
        genesis = str(files.genesis_file) if files.genesis_file else None
        clients = [
            processes.start(
                f"client-{i}",
                _placed(
                    client_command(
                        str(self.client_binary),
                        bench=bench,
                        target=addresses[i],
                        nodes=addresses,
                        index=i,
                        genesis=genesis,
                        prometheus=endpoints.clients[i].listen if endpoints else None,
                    ),
                    budget.clients_group if budget is not None else None,
                ),
                log_dir / f"client-{i}.log",
            )
            for i in range(live)
        ]
        control = LocalNodeControl(processes, nodes)
        faults = FaultInjector(
            self.fault_schedule, control, names, live, self.out, duration=bench.duration
        )
        faults.start(at=start_at)
        meter = EnergyMeter()
        meter.start()
        try:
            self._wait(bench, clients, nodes, [p.log_path for p in nodes + clients], faults)
            meter.stop(log_dir)
            # Clients are done: stop the nodes so each prints its final METRICS line, without
            # their budgets so that they drain their connections in the time a stop is given.
            if budget is not None:
                budget.lift()
            processes.stop(nodes)
        finally:
            meter.stop(log_dir)
            faults.log.save(log_dir)

    def _profile_dir(self, log_dir: Path, name: str) -> str | None:
        return str(log_dir / f"profile-{name}") if self.profile else None

    def _node_command(
        self,
        bench: BenchParameters,
        files: RunFiles,
        index: int,
        log_dir: Path,
        emulation: Path | None = None,
    ) -> list[str]:
        endpoints = self.metrics_endpoints(bench)
        return node_command(
            str(self.node_binary),
            keys=str(files.key_files[index]),
            committee=str(files.committee_file),
            parameters=str(files.parameters_file),
            genesis=str(files.genesis_file) if files.genesis_file else None,
            bench=bench,
            prometheus=endpoints.nodes[index].listen if endpoints else None,
            profile=self._profile_dir(log_dir, f"node-{index}"),
            # In the run's log directory: a restart (fault schedule) reopens the same file.
            store=str(log_dir / f"store-node-{index}.redb") if bench.store else None,
            net_emulation=str(emulation) if emulation is not None else None,
        )

    def _run_movevm(self, bench: BenchParameters, processes: ProcessSet, log_dir: Path) -> None:
        endpoints = self.metrics_endpoints(bench)
        prometheus = endpoints.clients[0].listen if endpoints else None
        process = processes.start(
            "movevm",
            movevm_command(
                str(self.client_binary), bench, prometheus, self._profile_dir(log_dir, "movevm")
            ),
            log_dir / "movevm.log",
        )
        meter = EnergyMeter()
        meter.start()
        try:
            self._wait(bench, [process], watched=[], logs=[process.log_path])
        finally:
            meter.stop(log_dir)

    def _wait(
        self,
        bench: BenchParameters,
        finishing: list[ManagedProcess],
        watched: list[ManagedProcess],
        logs: list[Path],
        faults: FaultInjector | None = None,
    ) -> None:
        """Wait for `finishing` to exit on their own while `watched` must keep running, except
        where `faults` killed a node (process i of either list belongs to node i)."""
        progress = Progress(self.out, float(bench.duration), logs)
        deadline = ExitDeadline(float(bench.duration))
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
                progress.tick()
                time.sleep(POLL_INTERVAL)
            progress.tick(force=True)
        finally:
            progress.finish()
        for i, process in enumerate(finishing):
            if process.returncode != 0 and not (faults and faults.ever_crashed(i)):
                raise _failure(process, f"failed with code {process.returncode}")
