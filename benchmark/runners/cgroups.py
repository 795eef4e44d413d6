"""A CPU budget per node (`fab local --node-cpus=X`): every node runs in a cgroup of its own whose
CFS quota is X cores, the clients in another without a quota.

Where. The cpu controller is found from this process's mounts (`/proc/self/mountinfo`): a cgroup
v1 hierarchy that has it (`cpu.cfs_quota_us`, `cpu.cfs_period_us`) or the cgroup2 hierarchy when
its `cgroup.controllers` offers it (`cpu.max`). A machine has the controller in one of them at
most. A run's groups go in a parent of their own, `hotmove-<pid>-<run>`, at the top of that
hierarchy as this process sees it (its mount point), as container runtimes place theirs: cgroup v2
lets a group hand a controller down to children only when it holds no process itself (the root
excepted), and the harness's own group holds the harness. In a container the mount point is the
container's group, so the budgets stay inside its limits. Under v2 the cpu controller is enabled in
the top's `cgroup.subtree_control` when it is not yet (and left so: other groups may rely on it),
and in the run's parent.

How a process gets in. It starts through `sh -c 'echo $$ >> GROUP/cgroup.procs && exec CMD'`: the
shell writes its own pid, then becomes the node (same pid, so signals and the process group are
unchanged). Nothing of the node runs outside its group, and it matters beyond the first
milliseconds: the node sizes its thread pools at startup from what `available_parallelism` says,
which reads the cgroup's quota, so a node moved in after it started would have sized them for the
whole machine. (Python's `preexec_fn` would do the same without the shell, but is unsafe in a
process with threads.) A node the fault schedule restarts runs the same command, so it returns to
its group.

The clients get a group without a quota: their CPU is theirs, not charged to any node's budget,
and they are not capped either (a load generator held back would measure itself, not the nodes).

The budget holds while the clients send. Once they have stopped, the quotas are lifted (`lift`)
before the nodes are: a node stopping drains what its connections still hold (the audit counts
it), and at a budget sized for the load that drain would outlast the time a stop is given. It
happens after the measured window, so no figure of the run sees it.

The groups are removed when the run ends, however it ends: the runner stops every process first,
then `CpuBudget.remove` takes the groups away (retrying while the kernel lets the last exits
settle). Before that, each group's `cpu.stat` (periods, throttled periods, throttled time) is saved
beside the logs as `cpu-budget.json`.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from ..errors import HarnessError
from .released import Released

MOUNTINFO = Path("/proc/self/mountinfo")
# The CFS period of every group (µs): the kernel's default. X cores is a quota of X periods' worth
# of CPU time per period, summed over every thread of the group.
PERIOD_US = 100_000
# The smallest quota the kernel accepts (µs).
MIN_QUOTA_US = 1_000
CLIENTS = "clients"
# What `remove` waits for processes that were just killed to leave their group.
REMOVE_TIMEOUT = 5.0
STATS_FILE = "cpu-budget.json"


class CgroupError(HarnessError):
    """No cgroup cpu controller this process can write, or one of its files refused a write."""


@dataclass(frozen=True)
class CpuHierarchy:
    """The cgroup hierarchy that has the cpu controller: its version (1 or 2) and mount point."""

    version: int
    root: Path

    def quota_text(self, quota_us: int, period_us: int) -> str:
        """What the quota file takes: v1 the quota alone (the period has its own file)."""
        return str(quota_us) if self.version == 1 else f"{quota_us} {period_us}"

    def no_quota_text(self, period_us: int) -> str:
        return "-1" if self.version == 1 else f"max {period_us}"

    @property
    def quota_file(self) -> str:
        return "cpu.cfs_quota_us" if self.version == 1 else "cpu.max"


def _unescape(field: str) -> str:
    """mountinfo writes a space, tab, newline and backslash of a path as octal escapes."""
    for code in ("040", "011", "012", "134"):
        field = field.replace(f"\\{code}", chr(int(code, 8)))
    return field


@dataclass(frozen=True)
class Mount:
    fstype: str
    point: Path
    options: frozenset[str]
    super_options: frozenset[str]


def cgroup_mounts(mountinfo: Path = MOUNTINFO) -> list[Mount]:
    """The cgroup (v1) and cgroup2 mounts of this process."""
    try:
        text = mountinfo.read_text()
    except OSError as error:
        raise CgroupError(f"cannot read {mountinfo}: {error}") from error
    mounts = []
    for line in text.splitlines():
        # ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 6 or len(tail) < 3:
            continue
        if tail[0] in ("cgroup", "cgroup2"):
            mounts.append(
                Mount(
                    fstype=tail[0],
                    point=Path(_unescape(fields[4])),
                    options=frozenset(fields[5].split(",")),
                    super_options=frozenset(tail[2].split(",")),
                )
            )
    return mounts


def _v2_controllers(root: Path) -> set[str]:
    try:
        return set((root / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def find_cpu_hierarchy(mountinfo: Path = MOUNTINFO) -> CpuHierarchy:
    """The hierarchy that has the cpu controller, if this process may write it; else an error
    that says what was found."""
    seen = []
    for mount in cgroup_mounts(mountinfo):
        if mount.fstype == "cgroup" and "cpu" in mount.super_options:
            found = CpuHierarchy(1, mount.point)
        elif mount.fstype == "cgroup2":
            controllers = _v2_controllers(mount.point)
            if "cpu" not in controllers:
                offered = " ".join(sorted(controllers)) or "none"
                seen.append(f"cgroup2 at {mount.point} does not offer cpu (it offers: {offered})")
                continue
            found = CpuHierarchy(2, mount.point)
        else:
            continue
        if "ro" in mount.options or not os.access(mount.point, os.W_OK):
            seen.append(f"cgroup v{found.version} cpu at {mount.point} is not writable here")
            continue
        return found
    detail = "; ".join(seen) if seen else "no cgroup mount has it"
    raise CgroupError(
        f"--node-cpus needs a writable cgroup cpu controller (v1 cpu.cfs_quota_us or v2 cpu.max),"
        f" usually as root: {detail}"
    )


class CgroupFs:
    """The kernel's side of a group: `mkdir` makes it with its interface files, `rmdir` removes it
    once no process is left in it, `write` sets one of its files (which the kernel may refuse).
    The tests put a fake tree of plain files in its place."""

    def mkdir(self, path: Path) -> None:
        path.mkdir()

    def rmdir(self, path: Path) -> None:
        path.rmdir()

    def write(self, path: Path, text: str) -> None:
        path.write_text(text)


def write_stats(log_dir: Path, stats: dict[str, Any]) -> Path:
    """A run's budget and its groups' counters, beside its logs (`cpu-budget.json`)."""
    path = log_dir / STATS_FILE
    path.write_text(json.dumps(stats, indent=2) + "\n")
    return path


def in_group(command: Sequence[str], group: Path) -> list[str]:
    """`command` started so that it runs in `group` from its first instruction: a shell writes
    its own pid into the group, then executes the command in its place (same pid)."""
    procs = group / "cgroup.procs"
    # Appending moves the pid in as writing does; a fake tree of plain files (the tests) keeps
    # every pid written.
    return ["/bin/sh", "-c", 'echo $$ >> "$0" && exec "$@"', str(procs), *command]


def read_stat(group: Path) -> dict[str, int]:
    """A group's `cpu.stat` (v1: nr_periods, nr_throttled, throttled_time in ns; v2 also
    usage_usec and throttled_usec); empty when it cannot be read."""
    try:
        text = (group / "cpu.stat").read_text()
    except OSError:
        return {}
    stat = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            stat[key] = int(value)
    return stat


class RunGroups(Released):
    """What the budgets of a run share: a parent group `name` at the top of the hierarchy, a
    group per node and one for the clients under it; making them (the controller handed down
    under cgroup v2), writing their files, and removing them, children first. A context manager:
    the groups exist inside the `with` (`create`) and are removed on the way out, whatever
    ended it. The budgets (`CpuBudget` here, `vcpus.VcpuBudget`) are dataclasses with these
    fields."""

    hierarchy: CpuHierarchy
    name: str
    nodes: int
    fs: CgroupFs
    # Where `remove` says what it could not remove (a warning, not an error: the run's own
    # outcome matters more than an empty directory left in /sys/fs/cgroup).
    warnings: list[str]
    _created: list[Path]

    def create(self) -> None:
        raise NotImplementedError

    @property
    def parent(self) -> Path:
        return self.hierarchy.root / self.name

    def node_group(self, index: int) -> Path:
        return self.parent / f"node-{index}"

    @property
    def clients_group(self) -> Path:
        return self.parent / CLIENTS

    def groups(self) -> list[Path]:
        return [*(self.node_group(i) for i in range(self.nodes)), self.clients_group]

    def __enter__(self) -> Self:
        try:
            self.create()
        except BaseException:
            self.remove()
            raise
        return self

    def release(self) -> None:
        self.remove()

    def _make_groups(self) -> None:
        """The parent, a group per node and the clients' one, none with a quota yet."""
        if self.hierarchy.version == 2:
            self._enable_cpu(self.hierarchy.root)
        self._mkdir(self.parent)
        if self.hierarchy.version == 2:
            self._enable_cpu(self.parent)
        for group in self.groups():
            self._mkdir(group)

    def _set_quota(self, group: Path, quota_us: int, period_us: int) -> None:
        if self.hierarchy.version == 1:
            self._write(group / "cpu.cfs_period_us", str(period_us))
        self._write(
            group / self.hierarchy.quota_file, self.hierarchy.quota_text(quota_us, period_us)
        )

    def _lift(self, groups: list[Path], period_us: int) -> None:
        for group in groups:
            self._write(group / self.hierarchy.quota_file, self.hierarchy.no_quota_text(period_us))

    def _write(self, path: Path, text: str) -> None:
        try:
            self.fs.write(path, text)
        except OSError as error:
            why = error.strerror or str(error)
            raise CgroupError(f"cannot write {text!r} to {path}: {why}") from error

    def _enable_cpu(self, group: Path) -> None:
        """cgroup v2: hand the cpu controller down to `group`'s children, unless it already is."""
        control = group / "cgroup.subtree_control"
        try:
            enabled = control.read_text().split()
        except OSError as error:
            raise CgroupError(f"cannot read {control}: {error.strerror or error}") from error
        if "cpu" in enabled:
            return
        try:
            self.fs.write(control, "+cpu")
        except OSError as error:
            why = error.strerror or str(error)
            if error.errno == errno.EBUSY:
                why += (
                    " (cgroup v2 hands a controller down only from a group without processes of"
                    " its own: run the harness where the top of the cgroup2 mount holds none)"
                )
            raise CgroupError(f"cannot enable the cpu controller in {control}: {why}") from error

    def _mkdir(self, path: Path) -> None:
        try:
            self.fs.mkdir(path)
        except OSError as error:
            raise CgroupError(
                f"cannot create the cgroup {path}: {error.strerror or error}"
            ) from error
        self._created.append(path)

    def pids(self, group: Path) -> list[int]:
        try:
            text = (group / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(line) for line in text.split() if line.isdigit()]

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    def save_stats(self, log_dir: Path) -> Path:
        return write_stats(log_dir, self.stats())

    def remove(self, timeout: float = REMOVE_TIMEOUT) -> None:
        """Remove every group this budget created, children first, waiting up to `timeout` for
        each to empty (processes that were just killed take a moment to leave it)."""
        for path in reversed(self._created):
            left = self._remove_one(path, timeout)
            if left is not None:
                self.warnings.append(f"could not remove the cgroup {path}: {left}")
        self._created = [p for p in self._created if p.exists()]

    def _remove_one(self, path: Path, timeout: float) -> str | None:
        """None once `path` is gone, else why not."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.fs.rmdir(path)
            except FileNotFoundError:
                return None
            except OSError as error:
                if error.errno != errno.EBUSY:
                    return error.strerror or str(error)
                if time.monotonic() > deadline:
                    pids = ", ".join(str(pid) for pid in self.pids(path)) or "none listed"
                    return f"still busy after {timeout:.0f} s (processes: {pids})"
            else:
                return None
            time.sleep(0.05)


@dataclass
class CpuBudget(RunGroups):
    """The groups of one run: `nodes` groups with a quota of `cores` each and one for the clients,
    under the parent `name`."""

    hierarchy: CpuHierarchy
    name: str
    cores: float
    nodes: int
    fs: CgroupFs = field(default_factory=CgroupFs)
    period_us: int = PERIOD_US
    warnings: list[str] = field(default_factory=list)
    _created: list[Path] = field(default_factory=list)
    # The groups' `cpu.stat` when the quotas were lifted (`lift`): what the run itself counted.
    _held: dict[str, Any] | None = None

    @property
    def quota_us(self) -> int:
        return round(self.cores * self.period_us)

    def describe(self) -> str:
        return (
            f"Nodes capped at {self.cores:g} cores each (CFS quota {self.quota_us} µs per"
            f" {self.period_us} µs), clients uncapped: cgroup v{self.hierarchy.version} groups"
            f" under {self.parent}"
        )

    def create(self) -> None:
        quota = self.quota_us
        if quota < MIN_QUOTA_US:
            raise CgroupError(
                f"--node-cpus={self.cores:g} is a quota of {quota} µs per {self.period_us} µs"
                f" period; the kernel's smallest is {MIN_QUOTA_US} µs"
            )
        self._make_groups()
        # No quota for the clients: their group only keeps their CPU apart from the nodes'.
        for index in range(self.nodes):
            self._set_quota(self.node_group(index), quota, self.period_us)

    def lift(self) -> None:
        """Take every node's quota away, its group kept: the run's measured part is over (the
        clients stopped), and a node stopping drains what its connections still hold, which a
        budget sized for the load would stretch past the time a stop is given. The groups'
        counters are kept as they were here, for `stats`."""
        self._held = self.stats()
        self._lift([self.node_group(i) for i in range(self.nodes)], self.period_us)

    def stats(self) -> dict[str, Any]:
        """The budget and every group's `cpu.stat`, as `cpu-budget.json` holds them (as they were
        when the quotas were lifted, if they were)."""
        if self._held is not None:
            return self._held
        return {
            "cgroup_version": self.hierarchy.version,
            "parent": str(self.parent),
            "cores_per_node": self.cores,
            "period_us": self.period_us,
            "quota_us": self.quota_us,
            "groups": {group.name: read_stat(group) for group in self.groups()},
        }


@dataclass
class Cgroups:
    """This machine's cpu controller, found once from the mounts, and the budgets of runs."""

    mountinfo: Path = MOUNTINFO
    fs: CgroupFs = field(default_factory=CgroupFs)
    _hierarchy: CpuHierarchy | None = None

    def hierarchy(self) -> CpuHierarchy:
        if self._hierarchy is None:
            self._hierarchy = find_cpu_hierarchy(self.mountinfo)
        return self._hierarchy

    def budget(self, name: str, cores: float, nodes: int) -> CpuBudget:
        """The budget of one run (its groups are made when its `with` starts)."""
        return CpuBudget(self.hierarchy(), f"hotmove-{os.getpid()}-{name}", cores, nodes, self.fs)

    def check(self, cores: float) -> None:
        """Whether a budget of `cores` can be made here: one node group is made and removed, so
        a run that cannot have its budget fails before anything starts."""
        with self.budget("check", cores, 1):
            pass
