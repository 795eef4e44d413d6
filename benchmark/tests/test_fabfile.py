"""The `fab` entry points: tasks are listed and bad flags fail cleanly, without a traceback."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TextIO

import pytest
from invoke import Context
from invoke.exceptions import Exit

from benchmark.config import REMOTE_DEFAULTS, BenchParameters
from benchmark.flags import BENCH_FLAGS, BENCH_SWITCHES
from benchmark.runners import sweep

from .conftest import REPO_ROOT, fab, fab_fails

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


def test_fab_list() -> None:
    result = fab("--list")
    assert result.returncode == 0, result.stderr
    listed = {
        line.split()[0]
        for line in result.stdout.splitlines()[1:]
        if line.startswith("  ") and line.strip()
    }
    assert set(TASKS) <= listed


def test_the_experiments_are_listed_from_their_modules() -> None:
    from benchmark.experiments import EXPERIMENTS  # noqa: PLC0415

    # The help keeps no list of its own: it says how to get one.
    result = fab("--help", "experiment")
    assert result.returncode == 0, result.stderr
    assert "--name=list" in result.stdout
    listed = fab("experiment", "--name=list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split(":", 1)[0] for line in listed.stdout.splitlines()]
    assert names == list(EXPERIMENTS)
    # An unknown name lists them too.
    assert ", ".join(EXPERIMENTS) in fab_fails("experiment", "--name=nonesuch")


def test_bad_parameters_fail_with_a_message() -> None:
    stderr = fab_fails("local", "--nodes=4", "--faults=2", "--no-build")
    assert "faults must be between 0 and 1" in stderr
    stderr = fab_fails("remote", "--nodes=4,x", "--no-build")
    assert "--nodes must be comma-separated integers" in stderr
    stderr = fab_fails("local", "--rate=20000,fast", "--no-build")
    assert "--rate must be comma-separated integers" in stderr

    # A bad rate late in a sweep fails before any run starts.
    stderr = fab_fails("local", "--rate=20000,0", "--no-build", "--binaries=missing")
    assert "rate must be positive, got 0" in stderr
    assert "does not exist" not in stderr

    stderr = fab_fails("local", "--mode=movevm", "--rate=1000,2000", "--no-build")
    assert "movevm has no input rate to sweep" in stderr

    # Remote sweeps are checked before settings.json or AWS are read, whichever spelling is used.
    for flag in ("--rate", "--rates"):
        stderr = fab_fails("remote", f"{flag}=20000,0", "--no-build", "--settings=missing.json")
        assert "rate must be positive, got 0" in stderr
        assert "missing.json" not in stderr

    stderr = fab_fails("remote", "--rate=1000", "--rates=2000", "--no-build")
    assert "--rate and --rates are the same flag" in stderr
    # What the binaries take is theirs to say (here the stand-ins', which print what the real
    # binaries describe).
    stderr = fab_fails(
        "local",
        "--mode=movevm",
        "--workload=ycsb",
        "--no-build",
        "--binaries=benchmark/tests/standins",
    )
    assert "unknown --workload 'ycsb'; expected one of transfer" in stderr


def _fabfile(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    return importlib.import_module("fabfile")


class _Hosts:
    """Stands for a connected RemoteBench: the sweep is what is under test here."""

    def __enter__(self) -> _Hosts:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass


Sweeps = list[tuple[str, list[object]]]


def _recorded_sweeps(
    monkeypatch: pytest.MonkeyPatch, fields: Callable[[BenchParameters], object]
) -> tuple[ModuleType, Sweeps]:
    """The fabfile with its sweep replaced by a recorder and the remote hosts by `_Hosts`, and
    what the recorder saw: each sweep's runner and `fields` of each of its points."""
    sweeps: Sweeps = []

    def recording_sweep(
        points: Sequence[BenchParameters],
        runner: object,
        out: TextIO,
        before_runs: Callable[[], None] | None = None,
    ) -> list[object]:
        # The runner is a plan over the transport the task chose.
        transport = getattr(runner, "transport", runner)
        sweeps.append((type(transport).__name__, [fields(p) for p in points]))
        return []

    monkeypatch.setattr(sweep, "run_sweep", recording_sweep)
    fabfile = _fabfile(monkeypatch)
    monkeypatch.setattr(fabfile, "_remote_bench", lambda *_args: _Hosts())
    return fabfile, sweeps


def test_local_and_remote_run_through_the_same_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    fabfile, sweeps = _recorded_sweeps(monkeypatch, lambda p: (p.nodes, p.rate, p.duration))
    context = Context()
    fabfile.local(context, nodes="4,7", rate="1000,2000", build=False)
    fabfile.remote(context, nodes="4", rates="3000,4000", build=False)
    fabfile.remote(context, rate="5000", duration="12", build=False)
    local_duration = BenchParameters().duration
    remote_duration = REMOTE_DEFAULTS["duration"]
    assert sweeps == [
        (
            "LocalBench",
            [(n, r, local_duration) for n in (4, 7) for r in (1000, 2000)],
        ),
        ("_Hosts", [(4, 3000, remote_duration), (4, 4000, remote_duration)]),
        ("_Hosts", [(4, 5000, 12)]),
    ]


def test_local_and_remote_pass_the_workload_on(monkeypatch: pytest.MonkeyPatch) -> None:
    fabfile, sweeps = _recorded_sweeps(
        monkeypatch, lambda p: (p.mode, p.workload, p.workload_arg, p.store)
    )
    context = Context()
    fabfile.local(context, mode="movevm", workload="kvstore", workload_arg="8", build=False)
    fabfile.remote(context, mode="hotmove", workload="smallbank", store=True, build=False)
    assert sweeps == [
        ("LocalBench", [("movevm", "kvstore", 8, False)]),
        ("_Hosts", [("hotmove", "smallbank", None, True)]),
    ]


def test_local_and_remote_take_every_bench_flag() -> None:
    """Both tasks' bench flags are built from the one list: each is an option of both, a switch
    without a value, any other taking one."""
    for task in ("local", "remote"):
        result = fab(task, "--help")
        assert result.returncode == 0, result.stderr
        options = {line.split()[0] for line in result.stdout.splitlines() if "  --" in line}
        for flag in BENCH_FLAGS:
            name = "--" + flag.replace("_", "-")
            expected = name if flag in BENCH_SWITCHES else f"{name}=STRING"
            assert expected in options, (task, expected)


def test_plot_without_results_is_a_clear_error(tmp_path: object) -> None:
    stderr = fab_fails("plot", "--mode=hotstuff", f"--results={tmp_path}")
    assert "no saved results for mode hotstuff" in stderr


def _bad_inputs(tmp_path: Path, standins: Path) -> list[tuple[str, dict[str, object], str]]:
    """(task, its arguments, what the error says): a user's mistakes, one of each kind."""
    missing = tmp_path / "missing.json"
    unreadable = tmp_path / "broken.json"
    unreadable.write_text('{"key": ')
    partial = tmp_path / "partial.json"
    partial.write_text('{"key": {"name": "k", "path": "k.pem"}}')
    example = json.loads((REPO_ROOT / "benchmark" / "settings.example.json").read_text())
    example["instances"]["disk_gb"] = "big"
    bad_disk = tmp_path / "bad-disk.json"
    bad_disk.write_text(json.dumps(example))
    matrix = tmp_path / "matrix.csv"
    matrix.write_text("0,10\n10,x\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    results = tmp_path / "results"
    results.mkdir()
    local = {"build": False, "binaries": str(standins)}
    return [
        ("local", {"mode": "bogus", **local}, "unknown mode 'bogus'"),
        ("local", {"nodes": "0", **local}, "nodes must be positive, got 0"),
        ("local", {"duration": "x", **local}, "--duration must be int, got 'x'"),
        ("local", {"batch_size": "0", **local}, "batch_size must be at least 1, got 0"),
        ("local", {"invalid_share": "2", **local}, "--invalid-share must be at most 1, got 2"),
        ("local", {"delay": "soon", **local}, "--delay must be int, got 'soon'"),
        ("local", {"node_cpus": "0", **local}, "node_cpus must be at least 0.01 cores"),
        ("local", {"node_cpus": "2", "mode": "movevm", **local}, "node_cpus caps nodes"),
        ("local", {"bandwidth": "0", **local}, "--bandwidth must be a positive rate"),
        ("local", {"delay_matrix": str(missing), **local}, f"cannot read {missing}"),
        ("local", {"delay_matrix": str(matrix), "nodes": "2", **local}, "row 1"),
        ("local", {"crash": ["1@5:3"], **local}, "the restart (3 s) must come after 5 s"),
        ("local", {"crash": ["9@5"], **local}, "node 9 is not a booted node"),
        ("local", {"partition": ["x"], **local}, "is not NODES@T1-T2"),
        ("local", {"kill_leader_every": "0", **local}, "must be positive"),
        ("local", {"base_port": "x", **local}, "--base-port must be an integer, got 'x'"),
        ("local", {"prometheus_port": "x", **local}, "--prometheus-port must be an integer"),
        ("local", {"instance_price": "x", **local}, "--instance-price must be a number"),
        ("local", {"build": False, "binaries": str(tmp_path)}, "does not exist; build"),
        # A --logs the system refuses: below a file, not a directory.
        ("local", {"logs": str(a_file / "logs"), **local}, str(a_file / "logs")),
        ("remote", {"settings": str(missing), "build": False}, "not found: copy"),
        ("remote", {"settings": str(unreadable), "build": False}, f"cannot read {unreadable}"),
        ("remote", {"settings": str(partial), "build": False}, "missing 'instances'"),
        ("remote", {"mode": "movevm", "build": False}, "use `fab local --mode=movevm`"),
        ("remote", {"rate": "1", "rates": "2", "build": False}, "are the same flag"),
        ("create", {"nodes": "x", "settings": str(missing)}, "--nodes must be an integer"),
        ("create", {"nodes": "0", "settings": str(missing)}, "--nodes must be a positive"),
        ("create", {"settings": str(partial)}, "missing 'instances'"),
        ("create", {"settings": str(bad_disk)}, "'instances.disk_gb' must be GB"),
        ("install", {"settings": str(missing)}, "not found: copy"),
        ("kill", {"settings": str(unreadable)}, f"cannot read {unreadable}"),
        ("logs", {"settings": str(missing)}, "not found: copy"),
        ("destroy", {"settings": str(missing)}, "not found: copy"),
        ("plot", {"max_latency": "x", "results": str(results)}, "--max-latency must be"),
        ("plot", {"max_latency": "0", "results": str(results)}, "must be positive, got 0"),
        ("plot", {"results": str(results)}, "no saved results for mode hotcrypto"),
        ("plot", {"results": str(missing)}, "no saved results for mode hotcrypto"),
    ]


def test_a_users_mistakes_get_one_line_and_exit_code_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, standins: Path
) -> None:
    """Through the tasks' own code: every mistake ends in invoke's `Exit` with code 1 and one
    line naming it (fab prints it instead of a traceback), before anything runs."""
    fabfile = _fabfile(monkeypatch)
    for task, arguments, expected in _bad_inputs(tmp_path, standins):
        with pytest.raises(Exit) as caught:
            getattr(fabfile, task)(Context(), **arguments)
        message = str(caught.value.message)
        assert caught.value.code == 1, (task, arguments, message)
        assert message.startswith("Error: "), (task, arguments, message)
        assert expected in message, (task, arguments, message)
        assert "\n" not in message, (task, arguments, message)


def test_flags_invoke_parses_fail_without_a_traceback() -> None:
    """Flags whose type invoke would convert itself (an int default) raised ValueError inside
    invoke's parser, a traceback: they are read as text and converted by the task."""
    for args, expected in (
        (("local", "--base-port=x", "--no-build"), "--base-port must be an integer, got 'x'"),
        (("create", "--nodes=two"), "--nodes must be an integer, got 'two'"),
    ):
        assert fab_fails(*args).strip() == f"Error: {expected}"


def test_plot_names_the_files_it_cannot_read(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fixtures: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmark.analysis import results  # noqa: PLC0415 - matplotlib is only for the plot tests
    from benchmark.analysis.metrics import load_run  # noqa: PLC0415
    from benchmark.analysis.run_summary import summarize  # noqa: PLC0415

    folder = tmp_path / "results"
    config = {"mode": "hotcrypto", "nodes": 2, "rate": 1000}
    results.save(summarize(load_run(fixtures / "hotcrypto"), config), folder)
    (folder / "truncated.json").write_text('{"version": 1, "con')
    (folder / "list.json").write_text("[1, 2]")
    fabfile = _fabfile(monkeypatch)
    fabfile.plot(Context(), results=str(folder), output=str(tmp_path / "plots"))
    printed = capsys.readouterr().out
    assert f"skipped {folder / 'truncated.json'}: cannot read it" in printed
    assert f"skipped {folder / 'list.json'}: not a saved result of version 1" in printed
    assert (tmp_path / "plots" / "robustness-hotcrypto.png").is_file()
