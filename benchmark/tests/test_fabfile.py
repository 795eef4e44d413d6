"""The `fab` entry points: tasks are listed and bad flags fail cleanly, without a traceback."""

from __future__ import annotations

import subprocess
import sys

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


def test_plot_without_results_is_a_clear_error(tmp_path: object) -> None:
    result = _fab("plot", "--mode=hotstuff", f"--results={tmp_path}")
    assert result.returncode == 1
    assert "no saved results for mode hotstuff" in result.stderr
