"""CPU and memory of every process, and how full each machine's cores were.

Every process reports `process: {cpu_ms, rss_bytes, cores}`: the cumulative CPU time of all its
threads, its resident memory and the CPUs available to it. From them:

* per process, CPU (cores) and RSS each second, saved with the run;
* per role (nodes, clients), the mean CPU over the steady window and the mean RSS;
* per machine, the CPU all its processes used against the cores it has. A local run is one
  machine whose cores the harness read itself (`os.cpu_count()`, passed in as `cores`); remote
  host i runs node i and client i (logs `node-i.log`, `client-i.log`), and its cores are the
  `process.cores` its processes report;
* with a CPU budget per node (`fab local --node-cpus=X`), each node is also a machine of X cores
  of its own (`budget`): its CPU against its quota, which is what the CPU-bound verdict judges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...json_path import number
from ..counters import Window, consecutive, in_window, rate
from ..metrics import ProcessMetrics, RunMetrics
from ..stats import maximum, mean

CPU_MS = ("process", "cpu_ms")
RSS_BYTES = ("process", "rss_bytes")
CORES = ("process", "cores")
MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class RoleUsage:
    """Mean per process of one role; None when no process of the role reported it."""

    processes: int
    cpu_cores: float | None
    rss_mib: float | None


@dataclass(frozen=True)
class Machine:
    name: str
    cores: float | None
    cpu_used: float | None
    # The cores are a node's CPU budget (its cgroup's quota), not a machine's.
    budget: bool = False
    # The flag that set the budget: `--node-cpus` (cores), or `--vcpus` (virtual CPUs).
    budget_flag: str = "--node-cpus"

    @property
    def share(self) -> float | None:
        if self.cores is None or self.cpu_used is None or self.cores <= 0:
            return None
        return self.cpu_used / self.cores


@dataclass(frozen=True)
class Resources:
    nodes: RoleUsage
    clients: RoleUsage
    machines: tuple[Machine, ...]
    # What `nodes` are: the nodes, or the one movevm process.
    node_role: str = "node"
    # The cores each node was capped at (`--node-cpus`, or its `--vcpus`); None: no budget.
    node_cpus: float | None = None
    # K of a dilated run (cores are virtual CPUs then), 1 in real time.
    dilation: int = 1
    # Whether the budgets are nodes of virtual CPUs (`--vcpus`) rather than `--node-cpus`.
    virtual: bool = False
    # Per process (log name): t_s (seconds since the load started), cpu_cores, rss_mib.
    series: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


def process_label(process: ProcessMetrics) -> str:
    """`node-2` for the process of `node-2.log` (node names are long public keys)."""
    return process.source.removesuffix(".log") or process.name


def cpu_cores(process: ProcessMetrics, window: Window) -> float | None:
    used = rate(process.records, CPU_MS, window)
    return None if used is None else used / 1000.0


def rss_mib(process: ProcessMetrics, window: Window) -> float | None:
    value = mean(number(r, RSS_BYTES) for r in in_window(process.records, window))
    return None if value is None else value / MIB


def role_usage(processes: Sequence[ProcessMetrics], window: Window) -> RoleUsage:
    return RoleUsage(
        processes=len(processes),
        cpu_cores=mean(cpu_cores(p, window) for p in processes),
        rss_mib=mean(rss_mib(p, window) for p in processes),
    )


def per_second(process: ProcessMetrics, load_start_ms: float) -> dict[str, list[Any]]:
    """CPU between consecutive records of a life and RSS at the later one, stamped with its
    time (nothing for the time a restarted node was down)."""
    series: dict[str, list[Any]] = {"t_s": [], "cpu_cores": [], "rss_mib": []}
    for before, after in consecutive(process.records):
        elapsed_ms = float(after["time_ms"]) - float(before["time_ms"])
        if elapsed_ms <= 0:
            continue
        start, end = number(before, CPU_MS), number(after, CPU_MS)
        rss = number(after, RSS_BYTES)
        series["t_s"].append(round((float(after["time_ms"]) - load_start_ms) / 1000.0, 3))
        series["cpu_cores"].append(
            None if start is None or end is None else (end - start) / elapsed_ms
        )
        series["rss_mib"].append(None if rss is None else rss / MIB)
    return series


def _sum_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _host_of(process: ProcessMetrics) -> str:
    """Host i runs node-i and client-i: the index in the log's name."""
    return process_label(process).rpartition("-")[2]


def budgets(
    run: RunMetrics, window: Window, node_cpus: float, flag: str = "--node-cpus"
) -> tuple[Machine, ...]:
    """Every node against its budget of `node_cpus` cores (a restarted node's lives are one
    process: the same group), set by `flag`."""
    return tuple(
        Machine(process_label(p), node_cpus, cpu_cores(p, window), budget=True, budget_flag=flag)
        for p in run.nodes
    )


def machines(
    run: RunMetrics,
    window: Window,
    local_cores: int | None,
    hosts: Sequence[str] = (),
    *,
    node_cpus: float | None = None,
    flag: str = "--node-cpus",
) -> tuple[Machine, ...]:
    """A local run (`local_cores` known) is one machine, and with `node_cpus` every node one more
    (its budget, set by `flag`); otherwise one machine per host."""
    processes = run.all_processes
    if local_cores is not None:
        used = _sum_or_none([cpu_cores(p, window) for p in processes])
        machine = Machine("this machine", float(local_cores), used)
        own = budgets(run, window, node_cpus, flag) if node_cpus is not None else ()
        return (machine, *own)
    groups: dict[str, list[ProcessMetrics]] = {}
    for process in processes:
        groups.setdefault(_host_of(process), []).append(process)
    found = []
    for key, group in sorted(groups.items()):
        name = hosts[int(key)] if key.isdigit() and int(key) < len(hosts) else f"host {key}"
        cores = maximum(number(r, CORES) for p in group for r in p.records)
        found.append(Machine(name, cores, _sum_or_none([cpu_cores(p, window) for p in group])))
    return tuple(found)


def resources(
    run: RunMetrics,
    window: Window,
    local_cores: int | None,
    hosts: Sequence[str] = (),
    *,
    node_cpus: float | None = None,
    dilation: int = 1,
    virtual: bool = False,
) -> Resources:
    nodes = run.nodes or run.movevm
    return Resources(
        dilation=dilation,
        virtual=virtual,
        node_role="node" if run.nodes else "movevm",
        nodes=role_usage(nodes, window),
        clients=role_usage(run.clients, window),
        machines=machines(
            run,
            window,
            local_cores,
            hosts,
            node_cpus=node_cpus,
            flag="--vcpus" if virtual else "--node-cpus",
        ),
        node_cpus=node_cpus,
        series={process_label(p): per_second(p, window.load_start_ms) for p in run.all_processes},
    )
