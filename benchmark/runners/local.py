"""Local runs: every node and client is a plain subprocess of this machine, on loopback ports.

Node i listens on base+3i (consensus), base+3i+1 (mempool) and base+3i+2 (transactions). The last
`faults` nodes of the committee and their clients are never booted. A run's processes are a
`LocalSession` (`local_session.py`); with a `prometheus_port` each also serves `GET /metrics`
(addresses in `prometheus.py`). The summary knows this machine's cores (`os.cpu_count()`) for
its CPU verdict. With `node_cpus` (`--node-cpus`), each node runs in a cgroup of its own capped
at that many cores and the clients in another (`cgroups.py`); the groups last as long as the
run. With `vcpus` (`--vcpus`, and `--dilation`), each node is a machine of that many virtual
CPUs, each of its threads at most one, the clients a budget of their own (`vcpus.py`), and every
process's clock runs `dilation` times slower (`run_clock.py`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..analysis.options import AnalysisOptions
from ..analysis.resources.profiles import PROFILE_GRACE
from ..binary_modes import runs_committee
from ..config import BenchParameters
from ..faults.net_emulation import LOCAL_PARTITION_LEAD_S, check_links
from ..run_files import PORTS_PER_NODE, Ports
from .cgroups import CgroupError, Cgroups, CpuBudget
from .local_session import BenchError, LocalSession
from .plan import RunSetup
from .processes import DEFAULT_GRACE, ProcessSet
from .prometheus import MAX_PORT, MetricsEndpoints, check_ports, local_endpoints
from .vcpus import Fit, VcpuBudget, machine_cores

DEFAULT_BASE_PORT = 4000
LOOPBACK = "127.0.0.1"
# Nodes have this long to open their transaction ports.
STARTUP_TIMEOUT = 30.0


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
    analysis: AnalysisOptions = field(default_factory=AnalysisOptions)
    startup_timeout: float = STARTUP_TIMEOUT
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
        if not runs_committee(bench.mode):
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

    def ready(self) -> None:
        for binary in (self.node_binary, self.client_binary):
            if not binary.is_file():
                raise BenchError(f"{binary} does not exist; build the binaries first")

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

    def described_hosts(self) -> str | None:
        return None

    @contextlib.contextmanager
    def session(self, run: RunSetup) -> Iterator[LocalSession]:
        bench, clock = run.bench, run.clock
        grace = max(self.grace, PROFILE_GRACE) if run.profile else self.grace
        budget = self._budget(bench, run.run_id)
        try:
            # The budget's groups go once every process has stopped (ProcessSet exits first).
            with budget or contextlib.nullcontext(), ProcessSet(clock.stretch(grace)) as processes:
                session = LocalSession(
                    bench,
                    processes,
                    run.log_dir,
                    budget,
                    binaries=self.binaries_dir,
                    endpoints=self.metrics_endpoints(bench),
                    out=self.out,
                    startup_timeout=self.startup_timeout,
                    profile=run.profile,
                    clock=clock,
                )
                try:
                    yield session
                finally:
                    session.stop_placing()
                if budget is not None:
                    # What the groups counted (throttled periods) is read before they go.
                    processes.stop_all()
                    budget.save_stats(run.log_dir)
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
