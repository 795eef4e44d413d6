"""Nodes of virtual CPUs in a dilated run (`--dilation=K --vcpus=V`, runners/vcpus.py and
run_clock.py) against a fake cgroup tree and a fake /proc: the quotas the harness writes for a
node, for each of its threads and for the clients, threads that appear or end while the run goes,
the refusals, and the clock the harness times the processes on. The real kernel's side is the
e2e test's (`test_dilation_e2e.py`)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from benchmark.config import BenchParameters, ConfigError
from benchmark.run_clock import RunClock
from benchmark.runners.cgroups import CgroupError
from benchmark.runners.local import BenchError, LocalBench
from benchmark.runners.vcpus import (
    Fit,
    Quota,
    ThreadPlacer,
    VcpuBudget,
    client_quota,
    thread_ids,
    vcpu_quota,
)

from .test_cgroups import FakeCgroupFs, fake_tree


def _budget(tmp_path: Path, version: int = 1, vcpus: float = 4, nodes: int = 2) -> VcpuBudget:
    cgroups = fake_tree(tmp_path, version)
    return VcpuBudget(cgroups.hierarchy(), "hotmove-1-run", 8, vcpus, 1.0, nodes, fs=cgroups.fs)


def _read(path: Path) -> str:
    return path.read_text().strip()


def test_a_virtual_cpu_is_a_millisecond_every_k_milliseconds() -> None:
    assert vcpu_quota(1, 8) == Quota(1_000, 8_000)
    # Several virtual CPUs: their milliseconds in the same period.
    assert vcpu_quota(4, 30) == Quota(4_000, 30_000)
    # Less than one: the quota stays at the kernel's 1 ms and the period grows.
    assert vcpu_quota(0.4, 8) == Quota(1_000, 20_000)
    assert vcpu_quota(0.4, 1) == Quota(1_000, 2_500)
    assert vcpu_quota(0.4, 8).cores == pytest.approx(0.05)
    with pytest.raises(CgroupError, match="beyond the kernel's 1,000,000"):
        vcpu_quota(0.01, 20)


def test_the_clients_quota_spans_their_bursts() -> None:
    # 100 ms of the processes' time, or the kernel's longest period, 1 s, when that is shorter.
    assert client_quota(0.2, 1) == Quota(20_000, 100_000)
    assert client_quota(1, 28) == Quota(35_714, 1_000_000)


def test_budgets_that_do_not_fit_the_machine_are_refused_with_the_factor_that_would() -> None:
    # 48 nodes of one virtual CPU and the clients' one: 49 virtual CPUs, 2 cores less 0.2.
    assert Fit(48, 1, 1, 28, 2).fits
    refused = Fit(48, 1, 1, 27, 2).refusal()
    assert refused is not None
    assert "49 virtual CPUs, 1.81 cores at --dilation=27" in refused
    assert "use --dilation=28 or more" in refused
    # Undilated, 4 nodes of 0.4 and the clients' 0.2 fit 2 cores.
    assert Fit(4, 0.4, 0.2, 1, 2).refusal() is None
    assert not Fit(4, 0.5, 0.2, 1, 2).fits


def test_nodes_threads_and_clients_get_their_quotas_v1(tmp_path: Path) -> None:
    with _budget(tmp_path, 1) as budget:
        node = budget.node_group(0)
        # A node boots at full speed, and is held once every node listens.
        assert _read(node / "cpu.cfs_quota_us") == "-1"
        budget.hold_nodes()
        assert _read(node / "cpu.cfs_quota_us") == "4000"
        assert _read(node / "cpu.cfs_period_us") == "8000"
        # The clients sign at full speed; they are held once they send.
        assert _read(budget.clients_group / "cpu.cfs_quota_us") == "-1"
        assert budget.place_thread(0, 4242)
        thread = node / "t-4242"
        assert _read(thread / "tasks") == "4242"
        assert (_read(thread / "cpu.cfs_quota_us"), _read(thread / "cpu.cfs_period_us")) == (
            "1000",
            "8000",
        )
        budget.hold_clients()
        # Their one virtual CPU over 100 ms of their time: 800 ms here, of which 100.
        assert _read(budget.clients_group / "cpu.cfs_quota_us") == "100000"
        assert _read(budget.clients_group / "cpu.cfs_period_us") == "800000"
        stats = budget.stats()
        assert stats["threads_placed"] == {"node-0": 1}
        assert (stats["node_quota_us"], stats["thread_period_us"]) == (4000, 8000)
        budget.lift()
        for group in (node, thread, budget.clients_group):
            assert _read(group / "cpu.cfs_quota_us") == "-1"
        # What the run counted is what was held when the quotas went.
        assert budget.stats() == stats
        parent = budget.parent
    assert not parent.exists()


def test_threads_go_in_threaded_groups_under_cgroup_v2(tmp_path: Path) -> None:
    with _budget(tmp_path, 2) as budget:
        node = budget.node_group(1)
        budget.hold_nodes()
        assert _read(node / "cpu.max") == "4000 8000"
        assert "cpu" in _read(node / "cgroup.subtree_control")
        budget.place_thread(1, 77)
        assert _read(node / "t-77" / "cgroup.type") == "threaded"
        assert _read(node / "t-77" / "cgroup.threads") == "77"
        assert _read(node / "t-77" / "cpu.max") == "1000 8000"


def test_a_thread_gone_before_it_is_moved_leaves_no_group(tmp_path: Path) -> None:
    class GoneFs(FakeCgroupFs):
        def write(self, path: Path, text: str) -> None:
            if path.name == "tasks":
                raise OSError(errno.ESRCH, "No such process", str(path))
            super().write(path, text)

    cgroups = fake_tree(tmp_path, 1)
    cgroups.fs = GoneFs(1)
    with VcpuBudget(cgroups.hierarchy(), "hotmove-1-run", 8, 2, 1, 1, fs=cgroups.fs) as budget:
        assert not budget.place_thread(0, 99)
        assert not (budget.node_group(0) / "t-99").exists()
        assert budget.placed(0) == set()


def _proc(tmp_path: Path, threads: dict[int, list[int]]) -> Path:
    proc = tmp_path / "proc"
    for pid, tids in threads.items():
        for tid in tids:
            (proc / str(pid) / "task" / str(tid)).mkdir(parents=True, exist_ok=True)
    return proc


def test_the_placer_follows_new_ended_and_restarted_threads(tmp_path: Path) -> None:
    proc = _proc(tmp_path, {100: [100, 101], 200: [200]})
    pids: list[int | None] = [100, 200]
    with _budget(tmp_path) as budget:
        placer = ThreadPlacer(budget, lambda: pids, proc=proc)
        placer.place_once()
        assert (budget.placed(0), budget.placed(1)) == ({100, 101}, {200})
        # A thread appears, another ends; node 1 is down.
        (proc / "100" / "task" / "102").mkdir()
        (proc / "100" / "task" / "101").rmdir()
        pids[1] = None
        placer.place_once()
        assert (budget.placed(0), budget.placed(1)) == ({100, 102}, set())
        assert not (budget.node_group(0) / "t-101").exists()
        # Node 1 restarted: a new process, its threads placed in the same node's group.
        _proc(tmp_path, {300: [300, 301]})
        pids[1] = 300
        placer.place_once()
        assert budget.placed(1) == {300, 301}
    assert thread_ids(12345, proc) == set()


def test_nodes_of_one_virtual_cpu_or_less_need_no_thread_groups(tmp_path: Path) -> None:
    proc = _proc(tmp_path, {100: [100, 101]})
    with _budget(tmp_path, vcpus=1) as budget:
        assert not budget.places_threads
        with ThreadPlacer(budget, lambda: [100], proc=proc, every=0.01) as placer:
            assert placer._thread is None
            placer.place_once()
        assert budget.placed(0) == set()


def test_the_run_clock_reads_and_waits_in_the_processes_time() -> None:
    now = [1_000.0]
    clock = RunClock(factor=4, origin=1_000.0, real=lambda: now[0])
    now[0] = 1_040.0
    assert clock.now() == 1_010.0
    assert (clock.stretch(2.5), clock.shrink(10.0)) == (10.0, 2.5)
    assert clock.origin_ms() == 1_000_000
    assert clock.label() == "dilated ×4"
    real = RunClock()
    assert not real.dilated
    assert real.label() == ""
    assert real.stretch(3.0) == 3.0


def test_settings_dilation_needs_and_refuses() -> None:
    with pytest.raises(ConfigError, match="give --vcpus too"):
        BenchParameters(dilation=8)
    with pytest.raises(ConfigError, match="--vcpus or --node-cpus, not both"):
        BenchParameters(vcpus=1, node_cpus=0.5)
    with pytest.raises(ConfigError, match="movevm runs one process"):
        BenchParameters(mode="movevm", vcpus=1)
    with pytest.raises(ConfigError, match="must be positive"):
        BenchParameters(vcpus=0)
    assert BenchParameters(vcpus=0.4).dilation == 1


def test_local_runs_refuse_what_the_machine_cannot_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cgroups = fake_tree(tmp_path, 1)
    runner = LocalBench(repo_root=tmp_path, cgroups=cgroups)
    monkeypatch.setattr("benchmark.runners.local.machine_cores", lambda: 2)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    with pytest.raises(BenchError, match="use --dilation=4 or more"):
        runner.check_vcpus(BenchParameters(nodes=4, dilation=2, vcpus=1.5))
    runner.check_vcpus(BenchParameters(nodes=4, dilation=4, vcpus=1.5))
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(BenchError, match="run as root"):
        runner.check_vcpus(BenchParameters(nodes=4, dilation=4, vcpus=1.5))
