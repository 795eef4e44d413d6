"""The nodes' CPU budgets (`--node-cpus`, runners/cgroups.py) against a fake cgroup tree in
`tmp_path`: a mountinfo naming it, and plain files where the kernel would make its interface files.
What is checked is what the harness writes (quotas, the controller handed down, pids) and that
every group it made is gone after the run, however the run ended. The real kernel's side is the
e2e test's (`test_node_cpus_e2e.py`)."""

from __future__ import annotations

import errno
import json
import re
import subprocess
from io import StringIO
from pathlib import Path

import psutil
import pytest

from benchmark.aws.settings import Settings
from benchmark.config import BenchParameters, ConfigError
from benchmark.errors import HarnessError
from benchmark.flags import bench_from_flags
from benchmark.run_files import Ports
from benchmark.runners.cgroups import (
    CgroupError,
    CgroupFs,
    Cgroups,
    CpuBudget,
    CpuHierarchy,
    find_cpu_hierarchy,
    in_group,
)
from benchmark.runners.local import BenchError
from benchmark.runners.plan import RunPlan
from benchmark.runners.remote import Host, RemoteBench, RemoteError

from .conftest import standin_bench, standins_with

THROTTLED = "nr_periods 50\nnr_throttled 20\nthrottled_time 900000000\n"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class FakeCgroupFs(CgroupFs):
    """What the kernel does on mkdir and rmdir in a cgroup hierarchy, with plain files: a new group
    comes with its interface files; a group with a live process or a child group is busy; the
    pids a removed group held are kept in `held` (by group name) for the tests to read."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.held: dict[Path, list[int]] = {}
        self.busy_for = 0  # rmdir answers EBUSY this many more times
        self.refused: set[str] = set()  # names of the files whose writes it refuses (EBUSY)

    def mkdir(self, path: Path) -> None:
        path.mkdir()
        files = {"cgroup.procs": "", "cpu.stat": THROTTLED}
        if self.version == 1:
            files |= {"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}
        else:
            files |= {
                "cpu.max": "max 100000\n",
                "cgroup.controllers": "cpu memory\n",
                "cgroup.subtree_control": "",
            }
        for name, text in files.items():
            (path / name).write_text(text)

    def rmdir(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        children = [child for child in path.iterdir() if child.is_dir()]
        if self.busy_for > 0 or children or any(_alive(pid) for pid in pids):
            self.busy_for -= 1
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        self.held[path] = pids
        for file in path.iterdir():
            file.unlink()
        path.rmdir()

    def write(self, path: Path, text: str) -> None:
        if path.name in self.refused:
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        path.write_text(text)

    def run_groups(self) -> dict[str, list[int]]:
        """The pids each group of a run (not of a check) held, by the group's name."""
        return {
            path.name: pids
            for path, pids in self.held.items()
            if path.parent.name.startswith("hotmove-") and not path.parent.name.endswith("-check")
        }


def fake_tree(tmp_path: Path, version: int, controllers: str = "cpu memory") -> Cgroups:
    """A cgroup hierarchy at `tmp_path/cgroup` with the cpu controller (v1, or v2 offering
    `controllers`), and the mountinfo that names it beside a few other mounts."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.procs").write_text("1\n")
    lines = ["22 1 0:21 / /proc rw,nosuid - proc proc rw"]
    if version == 1:
        lines.append(f"32 31 0:29 / {root} rw,relatime - cgroup cgroup rw,cpu,cpuacct")
    else:
        (root / "cgroup.controllers").write_text(controllers + "\n")
        (root / "cgroup.subtree_control").write_text("memory\n")
        lines.append(f"41 31 0:38 / {root} rw,nosuid,relatime - cgroup2 cgroup2 rw")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("\n".join(lines) + "\n")
    return Cgroups(mountinfo=mountinfo, fs=FakeCgroupFs(version))


def _mountinfo(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text("\n".join(lines) + "\n")
    return path


# -- where the controller is ----------------------------------------------------------------------


def test_v1_is_found_from_the_mounts(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 1)
    assert cgroups.hierarchy() == CpuHierarchy(1, tmp_path / "cgroup")


def test_v2_is_found_when_it_offers_cpu(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 2)
    assert cgroups.hierarchy() == CpuHierarchy(2, tmp_path / "cgroup")


def test_a_hybrid_machine_uses_the_v1_hierarchy_that_has_cpu(tmp_path: Path) -> None:
    """Like this machine: cpu in a v1 hierarchy, a cgroup2 mount with no controller beside it."""
    unified, cpu = tmp_path / "unified", tmp_path / "cpu with space"
    unified.mkdir()
    cpu.mkdir()
    (unified / "cgroup.controllers").write_text("\n")
    mountinfo = _mountinfo(
        tmp_path,
        f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw",
        # mountinfo escapes a space in a path as \040.
        f"32 31 0:29 / {str(cpu).replace(' ', chr(92) + '040')} rw - cgroup cgroup rw,cpu",
    )
    assert find_cpu_hierarchy(mountinfo) == CpuHierarchy(1, cpu)


def test_no_cpu_controller_is_a_clear_error(tmp_path: Path) -> None:
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("hugetlb\n")
    mountinfo = _mountinfo(
        tmp_path,
        "22 1 0:21 / /proc rw - proc proc rw",
        f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw",
        f"35 31 0:32 / {tmp_path} rw - cgroup cgroup rw,memory",
    )
    with pytest.raises(CgroupError) as error:
        find_cpu_hierarchy(mountinfo)
    message = str(error.value)
    assert message.startswith("--node-cpus needs a writable cgroup cpu controller")
    assert f"cgroup2 at {unified} does not offer cpu (it offers: hugetlb)" in message
    with pytest.raises(CgroupError, match="no cgroup mount has it"):
        find_cpu_hierarchy(_mountinfo(tmp_path, "22 1 0:21 / /proc rw - proc proc rw"))


def test_a_read_only_mount_is_not_writable(tmp_path: Path) -> None:
    mountinfo = _mountinfo(tmp_path, f"32 31 0:29 / {tmp_path} ro,nosuid - cgroup cgroup ro,cpu")
    with pytest.raises(CgroupError, match=f"cgroup v1 cpu at {tmp_path} is not writable here"):
        find_cpu_hierarchy(mountinfo)


def test_an_unreadable_mountinfo_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="cannot read"):
        find_cpu_hierarchy(tmp_path / "missing")


# -- the groups of a run --------------------------------------------------------------------------


def test_v1_groups_get_the_quota_and_the_clients_none(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 1)
    with cgroups.budget("run0", 0.25, 3) as budget:
        assert budget.parent == tmp_path / "cgroup" / budget.name
        assert budget.name.startswith("hotmove-")
        assert budget.name.endswith("-run0")
        for index in range(3):
            group = budget.node_group(index)
            assert (group / "cpu.cfs_quota_us").read_text() == "25000"
            assert (group / "cpu.cfs_period_us").read_text() == "100000"
        assert (budget.clients_group / "cpu.cfs_quota_us").read_text() == "-1\n"
        assert sorted(p.name for p in budget.parent.iterdir() if p.is_dir()) == [
            "clients", "node-0", "node-1", "node-2",
        ]  # fmt: skip
        assert "CFS quota 25000 µs per 100000 µs" in budget.describe()
    assert not budget.parent.exists()
    assert budget.warnings == []


def test_v2_groups_hand_the_controller_down_and_write_cpu_max(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 2)
    root = tmp_path / "cgroup"
    with cgroups.budget("run0", 1.5, 2) as budget:
        # The top had memory only: cpu is enabled there, and in the run's parent.
        assert (root / "cgroup.subtree_control").read_text() == "+cpu"
        assert (budget.parent / "cgroup.subtree_control").read_text() == "+cpu"
        assert (budget.node_group(1) / "cpu.max").read_text() == "150000 100000"
        assert (budget.clients_group / "cpu.max").read_text() == "max 100000\n"
    assert not budget.parent.exists()


def test_lifting_the_budget_takes_every_quota_away_and_keeps_the_stats_of_the_run(
    tmp_path: Path,
) -> None:
    for version, unlimited in ((1, "-1"), (2, "max 100000")):
        (tmp_path / f"v{version}").mkdir()
        cgroups = fake_tree(tmp_path / f"v{version}", version)
        with cgroups.budget("run0", 0.25, 2) as budget:
            held = budget.stats()
            budget.lift()
            for index in range(2):
                group = budget.node_group(index)
                assert (group / cgroups.hierarchy().quota_file).read_text() == unlimited
            # What the groups count after the lift (the nodes' stop) is not the run's.
            (budget.node_group(0) / "cpu.stat").write_text("nr_periods 99\n")
            assert budget.stats() == held


def test_v2_leaves_a_controller_already_handed_down_alone(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 2)
    control = tmp_path / "cgroup" / "cgroup.subtree_control"
    control.write_text("cpu memory\n")
    with cgroups.budget("run0", 0.5, 1):
        assert control.read_text() == "cpu memory\n"


def test_v2_that_refuses_the_controller_is_a_clear_error(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 2)
    fs = cgroups.fs
    assert isinstance(fs, FakeCgroupFs)
    # What the kernel answers when the top holds processes (not the root of the machine).
    fs.refused.add("cgroup.subtree_control")
    with pytest.raises(CgroupError) as error:
        cgroups.check(0.5)
    assert str(error.value).startswith(
        f"cannot enable the cpu controller in {tmp_path / 'cgroup' / 'cgroup.subtree_control'}:"
        " Device or resource busy (cgroup v2 hands a controller down only from a group without"
    )
    assert [p.name for p in (tmp_path / "cgroup").iterdir() if p.name.startswith("hotmove")] == []


def test_a_quota_below_the_kernels_smallest_is_refused(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 1)
    with pytest.raises(CgroupError, match="the kernel's smallest is 1000 µs"):
        cgroups.check(0.005)
    with pytest.raises(ConfigError, match=r"node_cpus must be at least 0\.01 cores"):
        BenchParameters(mode="hotstuff", node_cpus=0.005)


def test_the_groups_go_when_the_run_fails_or_is_interrupted(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 1)
    for raised in (RuntimeError("a node failed"), KeyboardInterrupt()):
        budget = cgroups.budget("run0", 0.5, 2)
        made: list[bool] = []

        def run(
            budget: CpuBudget = budget, raised: BaseException = raised, made: list[bool] = made
        ) -> None:
            with budget:
                made.append(budget.node_group(1).is_dir())
                raise raised

        with pytest.raises(type(raised)):
            run()
        assert made == [True]
        assert not budget.parent.exists()


def test_a_failure_halfway_through_making_the_groups_removes_those_made(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 1)
    budget = cgroups.budget("run0", 0.5, 3)

    class FailsOnTheThirdGroup(FakeCgroupFs):
        def mkdir(self, path: Path) -> None:
            if path.name == "node-1":
                raise OSError(errno.ENOSPC, "No space left on device")
            super().mkdir(path)

    budget.fs = FailsOnTheThirdGroup(1)
    with pytest.raises(CgroupError, match=r"cannot create the cgroup .*node-1: No space left"):
        budget.__enter__()
    assert not budget.parent.exists()


def test_a_group_busy_for_a_moment_is_removed_and_one_busy_for_good_is_named(
    tmp_path: Path,
) -> None:
    cgroups = fake_tree(tmp_path, 1)
    fs = cgroups.fs
    assert isinstance(fs, FakeCgroupFs)
    with cgroups.budget("run0", 0.5, 1) as budget:
        fs.busy_for = 3  # processes that were just killed take a moment to leave
    assert not budget.parent.exists()
    assert budget.warnings == []

    budget = CpuBudget(cgroups.hierarchy(), "stuck", 0.5, 1, fs)
    budget.create()
    procs = budget.node_group(0) / "cgroup.procs"
    procs.write_text("4242\n")
    fs.busy_for = 10**6
    budget.remove(timeout=0.2)
    assert (
        f"could not remove the cgroup {budget.node_group(0)}: still busy after 0 s"
        " (processes: 4242)"
    ) in budget.warnings
    assert len(budget.warnings) == 3  # clients, node-0, the parent
    fs.busy_for = 0
    procs.write_text("")
    budget.remove()
    assert not budget.parent.exists()


def test_the_stats_of_every_group_are_saved(tmp_path: Path) -> None:
    cgroups = fake_tree(tmp_path, 1)
    with cgroups.budget("run0", 0.25, 2) as budget:
        saved = json.loads(budget.save_stats(tmp_path).read_text())
    assert saved["cgroup_version"] == 1
    assert (saved["cores_per_node"], saved["quota_us"], saved["period_us"]) == (
        0.25,
        25_000,
        100_000,
    )
    assert saved["groups"]["node-1"] == {
        "nr_periods": 50,
        "nr_throttled": 20,
        "throttled_time": 900_000_000,
    }
    assert set(saved["groups"]) == {"node-0", "node-1", "clients"}


# -- how a process gets in ------------------------------------------------------------------------


def test_a_process_writes_its_own_pid_before_it_runs(tmp_path: Path) -> None:
    group = tmp_path / "group"
    group.mkdir()
    (group / "cgroup.procs").write_text("")
    done = subprocess.run(
        in_group(["/bin/sh", "-c", 'echo "$$ $0 $1"', "shell", "argument"], group),
        capture_output=True,
        text=True,
        check=True,
    )
    pid, name, argument = done.stdout.split()
    # The command replaced the wrapper: the pid written is the command's own, arguments intact.
    assert (group / "cgroup.procs").read_text().split() == [pid]
    assert (name, argument) == ("shell", "argument")


def test_a_group_that_refuses_the_pid_stops_the_command(tmp_path: Path) -> None:
    done = subprocess.run(
        in_group(["/bin/echo", "ran"], tmp_path / "missing"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "ran" not in done.stdout


def test_a_local_run_puts_every_node_in_its_group_and_the_clients_in_theirs(
    tmp_path: Path,
) -> None:
    # Each stand-in node prints its pid first (then the stand-in takes its place, same pid).
    binaries = standins_with(tmp_path, "node", 'echo "PID $$" >&2\n')
    cgroups = fake_tree(tmp_path, 1)
    local = standin_bench(tmp_path, binaries, cgroups=cgroups)
    [summary] = RunPlan(local).run(
        BenchParameters(
            mode="hotcrypto", nodes=4, faults=1, rate=3_000, duration=2, accounts=40, node_cpus=0.25
        )
    )
    fs = cgroups.fs
    assert isinstance(fs, FakeCgroupFs)
    held = fs.run_groups()
    logs = Path(summary.config["logs"])
    for node in range(3):
        [pid_line] = [
            line for line in (logs / f"node-{node}.log").read_text().splitlines() if "PID" in line
        ]
        assert held[f"node-{node}"] == [int(pid_line.split()[1])]
    # The node left down (faults=1) gets no group; the three clients share theirs.
    assert sorted(held) == ["clients", "node-0", "node-1", "node-2"]
    assert len(held["clients"]) == 3
    assert [p for p in (tmp_path / "cgroup").iterdir() if p.is_dir()] == []
    stats = json.loads((logs / "cpu-budget.json").read_text())
    assert stats["quota_us"] == 25_000
    output = local.out.getvalue()  # type: ignore[attr-defined]
    assert "Nodes capped at 0.25 cores each (CFS quota 25000 µs per 100000 µs)" in output
    assert "RESOURCES (--node-cpus: every node capped at 0.25 cores" in output
    # No RAPL counters in a stand-in run: the energy is the model's, and says so.
    assert " + ENERGY (modelled): " in output
    [saved] = (tmp_path / "results").glob("*.json")
    assert json.loads(saved.read_text())["config"]["node_cpus"] == 0.25


def test_a_failed_run_leaves_no_group(tmp_path: Path) -> None:
    binaries = standins_with(tmp_path, "node", 'case "$1" in run) exit 3;; esac\n')
    cgroups = fake_tree(tmp_path, 2)
    local = standin_bench(tmp_path, binaries, cgroups=cgroups)
    with pytest.raises(BenchError, match="node-0 exited with code 3"):
        RunPlan(local).run(BenchParameters(mode="hotstuff", rate=1_000, duration=2, node_cpus=0.25))
    assert [p for p in (tmp_path / "cgroup").iterdir() if p.is_dir()] == []


# -- what a run may ask ---------------------------------------------------------------------------


def test_a_budget_the_machine_cannot_give_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    local = standin_bench(tmp_path, cgroups=fake_tree(tmp_path, 1))
    local.check(BenchParameters(mode="hotstuff", nodes=4, node_cpus=0.5))
    # Nodes left down take nothing from the machine.
    local.check(BenchParameters(mode="hotstuff", nodes=4, faults=1, node_cpus=0.6))
    with pytest.raises(BenchError) as error:
        local.check(BenchParameters(mode="hotstuff", nodes=4, node_cpus=0.75))
    assert str(error.value) == (
        "--node-cpus=0.75 for 4 nodes is 3 cores, more than this machine's 2:"
        " lower --node-cpus or --nodes"
    )


def test_a_machine_without_the_controller_fails_the_check(tmp_path: Path) -> None:
    mountinfo = _mountinfo(tmp_path, "22 1 0:21 / /proc rw - proc proc rw")
    local = standin_bench(tmp_path, cgroups=Cgroups(mountinfo=mountinfo))
    with pytest.raises(CgroupError, match="needs a writable cgroup cpu controller"):
        local.check(BenchParameters(mode="hotstuff", node_cpus=0.25))
    local.check(BenchParameters(mode="hotstuff"))  # no budget asked: no cgroup needed


def test_the_flag_is_a_number_above_zero_for_nodes() -> None:
    assert bench_from_flags({"mode": "hotstuff", "node_cpus": "0.25"}).node_cpus == 0.25
    assert BenchParameters().node_cpus is None
    assert BenchParameters(mode="hotstuff", node_cpus=2).to_dict()["node_cpus"] == 2
    for value, message in (
        ("0", "node_cpus must be at least 0.01 cores"),
        ("-1", "node_cpus must be at least 0.01 cores"),
        ("nan", "node_cpus must be at least 0.01 cores"),
        ("half", "--node-cpus must be float, got 'half'"),
    ):
        with pytest.raises(HarnessError, match=re.escape(message)):
            bench_from_flags({"mode": "hotstuff", "node_cpus": value})
    with pytest.raises(ConfigError, match="runs its generator and stages in one process"):
        BenchParameters(mode="movevm", node_cpus=1.0)


def test_remote_runs_refuse_a_budget(tmp_path: Path, standins: Path) -> None:
    settings = Settings(
        key_name="unused",
        key_path=tmp_path / "key",
        regions=("local",),
        instance_type="none",
        ports=Ports.consecutive(4000),
        repo_name="hotmove",
        repo_url="unused",
        branch="main",
    )
    bench = RemoteBench(
        settings,
        [Host(f"10.0.0.{i}", "u") for i in range(4)],
        local_node_binary=standins / "node",
        work_dir=tmp_path,
        logs_dir=tmp_path,
        results_dir=None,
        out=StringIO(),
    )
    with pytest.raises(RemoteError, match="a remote node has its host's cores"):
        bench.check(BenchParameters(mode="hotstuff", node_cpus=1.0))
