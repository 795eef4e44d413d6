"""Nodes of V virtual CPUs (`fab local --vcpus=V`, with `--dilation=K`): a virtual CPU is 1/K of
a real core, and dilation slows the processes' clocks K times (`run_clock.py`), so a virtual
second holds as much CPU work as a real second of a full core. That is how one machine holds a
cluster K times its size (DieCast, NSDI 2008).

What a node gets. Its cgroup (`node-i`) holds it to V/K of a core; each of its threads, in a
group of its own below (`node-i/t-TID`), to 1/K: a one-thread stage reaches one virtual CPU, not
the node's whole budget, as on a machine of V cores. Thread groups are made only when V > 1 (at
most one virtual CPU, the node's own quota already holds every thread to it). The node sizes its
thread pools as on V cores (`node run --cores`).

Quotas are the kernel's CFS bandwidth control: a group runs at most `quota` µs per `period` µs,
summed over its threads, on whichever cores. The smallest quota is 1 ms, so 1/K of a core is
1 ms every K ms: in the processes' time, a thread runs one millisecond's work every millisecond,
in a burst. The shortest period whose quota is at least 1 ms keeps those bursts short: V virtual
CPUs are V·x ms every K·x ms with x = max(1, 1/V) ms of the processes' time.

Threads that appear after the node started (tokio's blocking pool, a restarted node's) are
placed too: `ThreadPlacer` lists every node's threads a few times a second and gives each new
one its group; until then a new thread runs in its creator's group, still inside the node's.
cgroup v1's cpu controller takes thread ids in `tasks`; v2 takes them in `cgroup.threads` of a
group made `threaded` (the node's group is then the root of a threaded subtree).

When. A node boots before its budget holds it (keys, genesis, the Move VM's modules: work of no
measured window, which a quota would stretch K times), and is held once every node listens
(`hold_nodes`); a node the fault schedule restarts boots held. The clients. Their transactions
cost CPU too, and a client slowed K times sends K times fewer per
real second: together they get `client_vcpus` virtual CPUs in their group, from the moment every
client sends (they sign their load before, which the quota would stretch K times for nothing).

The budgets must fit: the nodes' and clients' virtual CPUs, 1/K of a core each, within the
machine's cores less a share kept for the harness and the kernel (`fits`). Beyond that the
quotas would no longer be what each node gets, only what it may take.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cgroups import REMOVE_TIMEOUT, CgroupError, CgroupFs, CpuHierarchy, RunGroups, read_stat

MIN_QUOTA_US = 1_000
MAX_PERIOD_US = 1_000_000
# What the budgets leave of the machine for the harness, the kernel's work outside any quota and
# whatever else runs: a tenth of its cores, at least 0.2 of one.
RESERVE_SHARE = 0.1
MIN_RESERVE_CORES = 0.2
# The clients' CFS period in the processes' time (`client_quota`).
CLIENT_PERIOD_US = 100_000
# How often the placer looks for new threads (real seconds).
PLACE_EVERY_S = 0.2


@dataclass(frozen=True)
class Quota:
    quota_us: int
    period_us: int

    @property
    def cores(self) -> float:
        return self.quota_us / self.period_us


def vcpu_quota(vcpus: float, dilation: int) -> Quota:
    """`vcpus` virtual CPUs at `dilation`: vcpus/dilation of a core over the shortest period
    whose quota is the kernel's 1 ms or more."""
    virtual_period_us = max(MIN_QUOTA_US, math.ceil(MIN_QUOTA_US / vcpus))
    quota = Quota(round(vcpus * virtual_period_us), dilation * virtual_period_us)
    if quota.period_us > MAX_PERIOD_US:
        raise CgroupError(
            f"{vcpus:g} virtual CPUs at --dilation={dilation} need a CFS period of"
            f" {quota.period_us:,} µs, beyond the kernel's {MAX_PERIOD_US:,}"
        )
    return quota


def client_quota(vcpus: float, dilation: int) -> Quota:
    """The clients' `vcpus` at `dilation`, over periods of `CLIENT_PERIOD_US` of the processes'
    time (the kernel's longest, 1 s, when K times that is longer). A client writes its load in a
    burst every 50 ms of its time: over periods shorter than a burst's work, the quota held the
    bursts back, so that the clients sent far less than their share of CPU allowed, and a load
    generator held back measures itself, not the nodes."""
    period = min(MAX_PERIOD_US, CLIENT_PERIOD_US * dilation)
    return Quota(max(MIN_QUOTA_US, round(vcpus * period / dilation)), period)


def reserve_cores(machine_cores: float) -> float:
    return max(MIN_RESERVE_CORES, RESERVE_SHARE * machine_cores)


@dataclass(frozen=True)
class Fit:
    """Whether `nodes` of `vcpus` and the clients' `client_vcpus` fit the machine at a factor."""

    nodes: int
    vcpus: float
    client_vcpus: float
    dilation: int
    machine_cores: float

    @property
    def virtual_cpus(self) -> float:
        return self.nodes * self.vcpus + self.client_vcpus

    @property
    def cores_needed(self) -> float:
        return self.virtual_cpus / self.dilation

    @property
    def cores_available(self) -> float:
        return self.machine_cores - reserve_cores(self.machine_cores)

    @property
    def fits(self) -> bool:
        return self.cores_needed <= self.cores_available + 1e-9

    @property
    def smallest_dilation(self) -> int:
        return max(1, math.ceil(self.virtual_cpus / self.cores_available - 1e-9))

    def refusal(self) -> str | None:
        """One line saying why the budgets do not fit, None when they do."""
        if self.fits:
            return None
        return (
            f"{self.nodes} nodes of {self.vcpus:g} virtual CPUs and {self.client_vcpus:g} for the"
            f" clients are {self.virtual_cpus:g} virtual CPUs, {self.cores_needed:.2f} cores at"
            f" --dilation={self.dilation}; this machine has {self.machine_cores:g} and keeps"
            f" {reserve_cores(self.machine_cores):g} for the harness: use --dilation="
            f"{self.smallest_dilation} or more, or fewer virtual CPUs"
        )


@dataclass
class VcpuBudget(RunGroups):
    """The groups of one dilated run, under the parent `name`: `node-i` (V/K of a core), its
    threads' `t-TID` (1/K each, when V > 1), `clients` (their virtual CPUs once they send)."""

    hierarchy: CpuHierarchy
    name: str
    dilation: int
    vcpus: float
    client_vcpus: float
    nodes: int
    fs: CgroupFs = field(default_factory=CgroupFs)
    warnings: list[str] = field(default_factory=list)
    # Every group made, parents first; the threads' groups by node and thread id.
    _created: list[Path] = field(default_factory=list)
    _threads: dict[int, dict[int, Path]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _held: dict[str, Any] | None = None

    @property
    def node_quota(self) -> Quota:
        return vcpu_quota(self.vcpus, self.dilation)

    @property
    def thread_quota(self) -> Quota:
        return vcpu_quota(1.0, self.dilation)

    @property
    def client_quota(self) -> Quota:
        return client_quota(self.client_vcpus, self.dilation)

    @property
    def places_threads(self) -> bool:
        return self.vcpus > 1

    def describe(self) -> str:
        node, thread = self.node_quota, self.thread_quota
        threads = (
            f", each thread at most 1 ({thread.quota_us} µs per {thread.period_us} µs)"
            if self.places_threads
            else ""
        )
        return (
            f"Dilated ×{self.dilation}: nodes of {self.vcpus:g} virtual CPUs ({node.quota_us} µs"
            f" per {node.period_us} µs){threads}; clients {self.client_vcpus:g} virtual CPUs once"
            f" they send: cgroup v{self.hierarchy.version} groups under {self.parent}"
        )

    def create(self) -> None:
        for quota in (self.node_quota, self.thread_quota, self.client_quota):
            if quota.quota_us < MIN_QUOTA_US:
                raise CgroupError(f"a quota of {quota.quota_us} µs is below the kernel's 1 ms")
        self._make_groups()
        if self.hierarchy.version == 2 and self.places_threads:
            for index in range(self.nodes):
                self._enable_cpu(self.node_group(index))

    def hold_nodes(self) -> None:
        """Every node's quota, once they all booted."""
        for index in range(self.nodes):
            self._hold(self.node_group(index), self.node_quota)

    def hold_clients(self) -> None:
        """The clients' quota, once every one of them sends."""
        self._hold(self.clients_group, self.client_quota)

    def _hold(self, group: Path, quota: Quota) -> None:
        self._set_quota(group, quota.quota_us, quota.period_us)

    # -- threads -------------------------------------------------------------------------------

    def place_thread(self, node: int, tid: int) -> bool:
        """Gives thread `tid` of node `node` its own group of one virtual CPU; False when the
        thread was gone before it could be moved."""
        group = self.node_group(node) / f"t-{tid}"
        with self._lock:
            placed = self._threads.setdefault(node, {})
            if tid in placed:
                return True
            try:
                self.fs.mkdir(group)
            except FileExistsError:
                pass
            except OSError as error:
                raise CgroupError(f"cannot create {group}: {error.strerror or error}") from error
            placed[tid] = group
            if self.hierarchy.version == 2:
                self._write(group / "cgroup.type", "threaded")
            self._hold(group, self.thread_quota)
            member_file = "tasks" if self.hierarchy.version == 1 else "cgroup.threads"
            try:
                self.fs.write(group / member_file, str(tid))
            except OSError as error:
                if error.errno in (errno.ESRCH, errno.ENOENT):
                    self._forget(node, tid)
                    return False
                raise CgroupError(
                    f"cannot move thread {tid} into {group}: {error.strerror or error}"
                ) from error
            return True

    def forget_ended(self, node: int, live: set[int]) -> None:
        """Removes the groups of node `node`'s threads that are no longer in `live`."""
        with self._lock:
            for tid in [t for t in self._threads.get(node, {}) if t not in live]:
                self._forget(node, tid)

    def _forget(self, node: int, tid: int) -> None:
        group = self._threads.get(node, {}).get(tid)
        if group is None:
            return
        try:
            self.fs.rmdir(group)
        except FileNotFoundError:
            pass
        except OSError:
            # A thread that just ended may hold its group a moment longer: removed at the end.
            return
        del self._threads[node][tid]

    def placed(self, node: int) -> set[int]:
        with self._lock:
            return set(self._threads.get(node, {}))

    def _thread_groups(self) -> list[Path]:
        with self._lock:
            return [g for threads in self._threads.values() for g in threads.values()]

    # -- the end of the run ----------------------------------------------------------------------

    def lift(self) -> None:
        """Every quota off, groups kept (the measured part is over; stopping processes drain
        what their connections hold), the counters kept as they were for `stats`."""
        self._held = self.stats()
        self._lift(self.groups(), self.node_quota.period_us)
        for group in self._thread_groups():
            # A thread that ended meanwhile took its group's files with it.
            with contextlib.suppress(CgroupError):
                self._lift([group], self.thread_quota.period_us)

    def stats(self) -> dict[str, Any]:
        """The budget and every node's and the clients' `cpu.stat` (throttled periods and time),
        with how many threads each node had placed: `cpu-budget.json`."""
        if self._held is not None:
            return self._held
        with self._lock:
            threads = {f"node-{n}": len(tids) for n, tids in self._threads.items()}
        node, thread = self.node_quota, self.thread_quota
        return {
            "cgroup_version": self.hierarchy.version,
            "parent": str(self.parent),
            "dilation": self.dilation,
            "vcpus_per_node": self.vcpus,
            "client_vcpus": self.client_vcpus,
            "node_quota_us": node.quota_us,
            "node_period_us": node.period_us,
            "thread_quota_us": thread.quota_us if self.places_threads else None,
            "thread_period_us": thread.period_us if self.places_threads else None,
            "threads_placed": threads,
            "groups": {group.name: read_stat(group) for group in self.groups()},
        }

    def remove(self, timeout: float = REMOVE_TIMEOUT) -> None:
        """Removes the threads' groups, then the others (the processes are stopped by now)."""
        for group in self._thread_groups():
            with contextlib.suppress(OSError):
                self.fs.rmdir(group)
        with self._lock:
            self._threads.clear()
        super().remove(timeout)


def thread_ids(pid: int, proc: Path = Path("/proc")) -> set[int]:
    """The ids of process `pid`'s threads (empty once it is gone)."""
    try:
        return {int(entry.name) for entry in (proc / str(pid) / "task").iterdir()}
    except (OSError, ValueError):
        return set()


@dataclass
class ThreadPlacer:
    """Places every thread of every node in its own group, a few times a second, while a run
    goes: `pids()` names the node processes of the moment (a node the fault schedule restarted
    has a new one)."""

    budget: VcpuBudget
    pids: Any  # Callable[[], list[int | None]]: node i's pid, None while it is down
    proc: Path = Path("/proc")
    every: float = PLACE_EVERY_S
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def place_once(self) -> None:
        if not self.budget.places_threads:
            return
        for node, pid in enumerate(self.pids()):
            live = thread_ids(pid, self.proc) if pid is not None else set()
            for tid in sorted(live - self.budget.placed(node)):
                self.budget.place_thread(node, tid)
            self.budget.forget_ended(node, live)

    def __enter__(self) -> ThreadPlacer:
        if self.budget.places_threads:
            self._thread = threading.Thread(target=self._run, name="thread-placer", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.place_once()
            except CgroupError as error:
                # Said once per kind; the run goes on, its budget line will show it.
                if str(error) not in self.errors:
                    self.errors.append(str(error))
            self._stop.wait(self.every)


def machine_cores() -> int:
    return os.cpu_count() or 1
