"""The `fab` entry points: tasks are listed and bad flags fail cleanly, without a traceback."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TextIO

import pytest
from invoke import Context

from benchmark import sweep
from benchmark.config import REMOTE_DEFAULTS, BenchParameters

from .conftest import REPO_ROOT

TASKS = (
    "local",
    "create",
    "start",
    "stop",
    "destroy",
    "info",
    "install",
    "remote",
    "kill",
    "logs",
    "plot",
)


def _fab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fabric", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_fab_list() -> None:
    result = _fab("--list")
    assert result.returncode == 0, result.stderr
    listed = {
        line.split()[0]
        for line in result.stdout.splitlines()[1:]
        if line.startswith("  ") and line.strip()
    }
    assert set(TASKS) <= listed


def test_bad_parameters_fail_with_a_message() -> None:
    result = _fab("local", "--nodes=4", "--faults=2", "--no-build")
    assert result.returncode == 1
    assert "faults must be between 0 and 1" in result.stderr
    assert "Traceback" not in result.stderr

    result = _fab("remote", "--nodes=4,x", "--no-build")
    assert result.returncode == 1
    assert "--nodes must be comma-separated integers" in result.stderr

    result = _fab("local", "--rate=20000,fast", "--no-build")
    assert result.returncode == 1
    assert "--rate must be comma-separated integers" in result.stderr

    # A bad rate late in a sweep fails before any run starts.
    result = _fab("local", "--rate=20000,0", "--no-build", "--binaries=missing")
    assert result.returncode == 1
    assert "rate must be positive, got 0" in result.stderr
    assert "does not exist" not in result.stderr

    result = _fab("local", "--mode=movevm", "--rate=1000,2000", "--no-build")
    assert result.returncode == 1
    assert "movevm has no input rate to sweep" in result.stderr
    assert "Traceback" not in result.stderr

    # Remote sweeps are checked before settings.json or AWS are read, whichever spelling is used.
    for flag in ("--rate", "--rates"):
        result = _fab("remote", f"{flag}=20000,0", "--no-build", "--settings=missing.json")
        assert result.returncode == 1
        assert "rate must be positive, got 0" in result.stderr
        assert "missing.json" not in result.stderr

    result = _fab("remote", "--rate=1000", "--rates=2000", "--no-build")
    assert result.returncode == 1
    assert "--rate and --rates are the same flag" in result.stderr

    result = _fab("local", "--mode=movevm", "--workload=ycsb", "--no-build")
    assert result.returncode == 1
    assert "unknown workload 'ycsb'" in result.stderr
    assert "Traceback" not in result.stderr


def _fabfile(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    return importlib.import_module("fabfile")


class _Hosts:
    """Stands for a connected RemoteBench: the sweep is what is under test here."""

    def __enter__(self) -> _Hosts:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass


def test_local_and_remote_run_through_the_same_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[tuple[int, int, int]]]] = []

    def recording_sweep(
        points: Sequence[BenchParameters],
        runner: object,
        out: TextIO,
        before_runs: Callable[[], None] | None = None,
    ) -> list[object]:
        calls.append((type(runner).__name__, [(p.nodes, p.rate, p.duration) for p in points]))
        return []

    monkeypatch.setattr(sweep, "run_sweep", recording_sweep)
    fab = _fabfile(monkeypatch)
    monkeypatch.setattr(fab, "_remote_bench", lambda *_args: _Hosts())
    context = Context()
    fab.local(context, nodes="4,7", rate="1000,2000", build=False)
    fab.remote(context, nodes="4", rates="3000,4000", build=False)
    fab.remote(context, rate="5000", duration="12", build=False)
    local_duration = BenchParameters().duration
    remote_duration = REMOTE_DEFAULTS["duration"]
    assert calls == [
        (
            "LocalBench",
            [(n, r, local_duration) for n in (4, 7) for r in (1000, 2000)],
        ),
        ("_Hosts", [(4, 3000, remote_duration), (4, 4000, remote_duration)]),
        ("_Hosts", [(4, 5000, 12)]),
    ]


def test_local_and_remote_pass_the_workload_on(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[tuple[str, str, int | None]]] = []

    def recording_sweep(
        points: Sequence[BenchParameters],
        runner: object,
        out: TextIO,
        before_runs: Callable[[], None] | None = None,
    ) -> list[object]:
        calls.append([(p.mode, p.workload, p.workload_arg) for p in points])
        return []

    monkeypatch.setattr(sweep, "run_sweep", recording_sweep)
    fab = _fabfile(monkeypatch)
    monkeypatch.setattr(fab, "_remote_bench", lambda *_args: _Hosts())
    context = Context()
    fab.local(context, mode="movevm", workload="kvstore", workload_arg="8", build=False)
    fab.remote(context, mode="hotmove", workload="smallbank", build=False)
    assert calls == [[("movevm", "kvstore", 8)], [("hotmove", "smallbank", None)]]


def test_plot_without_results_is_a_clear_error(tmp_path: object) -> None:
    result = _fab("plot", "--mode=hotstuff", f"--results={tmp_path}")
    assert result.returncode == 1
    assert "no saved results for mode hotstuff" in result.stderr
