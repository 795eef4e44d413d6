"""`fab plot` on a results folder as a user fills it in a day: runs of one mode with and without
every optional setting (`--batch-size`, `--delay`, `--delay-matrix`, `--store`, `--nodes=1`,
`--faults`, a crash schedule, ...), a sweep of two rates for some, plus a result saved before some
settings existed. Every result is saved the way `fab local` saves it (`finish_run` over a run's
logs, with the bench parameters the task's flags make), and the folder is plotted through the
`plot` task.
"""

from __future__ import annotations

import importlib
import io
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from invoke import Context

from benchmark.analysis import results
from benchmark.faults.events import FaultLog
from benchmark.faults.schedule import schedule_from_flags
from benchmark.flags import sweep_from_flags
from benchmark.runners.finish import finish_run

from .conftest import REPO_ROOT
from .synthetic import restart_node, write_run

# The flags of each kind of run, as the `fab local` task receives them (text; switches as True).
VARIANTS: dict[str, dict[str, object]] = {
    "defaults": {},
    "batch size": {"batch_size": "500000"},
    "batch delay": {"batch_delay": "50"},
    "channel capacity": {"channel_capacity": "200"},
    "verifier threads": {"verifier_threads": "1"},
    "tx size": {"tx_size": "512"},
    "delay": {"delay": "25"},
    "delay matrix": {"delay_matrix": "MATRIX"},  # replaced by the file's path
    "bandwidth": {"bandwidth": "100"},
    "store": {"store": True},
    "one node": {"nodes": "1"},
    "seven nodes, two faulty": {"nodes": "7", "faults": "2"},
    "batch size and store": {"batch_size": "500000", "store": True},
    "node cpus": {"node_cpus": "0.5"},
}
CRYPTO_VARIANTS: dict[str, dict[str, object]] = {
    "invalid share": {"invalid_share": "0.1"},
    "accounts": {"accounts": "500"},
}
# Swept over two rates (a line of two points); the other variants run at the default rate.
SWEPT = ("defaults", "store", "one node")
RATES = "1000,2000"
CRASH = "1@5.5:6"


def _fabfile(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    return importlib.import_module("fabfile")


def _save_runs(
    mode: str, flags: dict[str, object], logs: Path, folder: Path, crash: list[str] | None = None
) -> list[Path]:
    """Save one result per point of the sweep the flags ask for, over `logs`."""
    schedule = schedule_from_flags(crash, None)
    saved = []
    for bench in sweep_from_flags({"mode": mode, **flags}):
        if not schedule.empty:
            log = FaultLog.load(logs)
            log.schedule = schedule.to_dict()
            log.save(logs)
        _, path = finish_run(
            logs,
            bench,
            folder,
            io.StringIO(),
            extra={"run": 0, "where": "local", "cores": 2, "profile": False},
            enforce_audit=False,
        )
        assert path is not None
        saved.append(path)
    return saved


def _mixed_folder(mode: str, tmp_path: Path, fixtures: Path) -> Path:
    folder = tmp_path / "results"
    matrix = tmp_path / "regions.csv"
    # Seven nodes (the committee it is given to), 40 ms one way between any two.
    rows = [",".join("0" if i == j else "40" for j in range(7)) for i in range(7)]
    matrix.write_text("\n".join(rows) + "\n")
    if mode == "hotstuff":
        logs = tmp_path / "hotstuff-logs"
        shutil.copytree(fixtures / "hotstuff", logs)
    else:
        logs = write_run(tmp_path / "logs", mode=mode)
    variants = {**VARIANTS, **(CRYPTO_VARIANTS if mode != "hotstuff" else {})}
    for name, flags in variants.items():
        given = {k: str(matrix) if v == "MATRIX" else v for k, v in flags.items()}
        if "delay_matrix" in given:
            given["nodes"] = "7"
        if name in SWEPT:
            given["rate"] = RATES
        _save_runs(mode, given, logs, folder)
    # The defaults again: a second run of one rate (a point of two runs).
    _save_runs(mode, {"rate": "2000"}, logs, folder)
    # A crash and restart, on logs where node 1 is down from 5.5 s to 6 s.
    crashed = write_run(tmp_path / "crash-logs", mode=mode)
    restart_node(crashed, 1, crash_s=5.5, restart_s=6)
    _save_runs(mode, {}, crashed, folder, crash=[CRASH])
    # A result saved before the link and store settings existed: the keys are missing.
    old = _save_runs(mode, {"batch_size": "250000"}, logs, folder)[0]
    data = json.loads(old.read_text())
    for key in ("delay_ms", "delay_matrix", "bandwidth_mbit", "store", "faults"):
        del data["config"][key]
    old.write_text(json.dumps(data))
    return folder


@pytest.fixture(scope="module", params=["hotstuff", "hotcrypto"])
def mixed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, fixtures: Path
) -> tuple[str, Path]:
    """A mode and its folder of mixed results."""
    mode = str(request.param)
    return mode, _mixed_folder(mode, tmp_path_factory.mktemp(mode), fixtures)


def test_fab_plot_draws_a_folder_of_mixed_runs(
    mixed: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode, folder = mixed
    fab = _fabfile(monkeypatch)
    fab.plot(Context(), mode=mode, results=str(folder), output=str(tmp_path / "plots"))
    for graph in ("robustness", "latency", "tps", "batches"):
        for ext in ("png", "pdf"):
            path = tmp_path / "plots" / f"{graph}-{mode}.{ext}"
            assert path.stat().st_size > 1_000, path
    # Every run's commits per node and its timeline.
    saved = results.load(folder, mode)
    assert len(list((tmp_path / "plots" / "commits").glob("*.png"))) == len(saved)
    assert len(list((tmp_path / "plots" / "timelines").glob("*.png"))) == len(saved)


def test_runs_with_different_settings_are_different_points(mixed: tuple[str, Path]) -> None:
    """A point is one configuration: `--store` runs are not averaged with runs without it, a
    crash run not with a healthy one, and every setting a run was given names its line."""
    mode, folder = mixed
    points = results.aggregate(results.load(folder, mode))
    by_key = {(p.nodes, p.faults, p.settings, p.rate): p for p in points}
    assert len(by_key) == len(points)
    variants = len(VARIANTS) + (len(CRYPTO_VARIANTS) if mode != "hotstuff" else 0)
    # One point per variant and rate, + the crash run and the old result.
    assert len(points) == variants + len(SWEPT) + 2
    assert by_key[(4, 0, (), 1000)].runs == 1
    assert by_key[(4, 0, (), 2000)].runs == 2  # run twice
    assert by_key[(1, 0, (), 2000)].runs == 1
    assert by_key[(7, 2, (), 20_000)].runs == 1
    assert by_key[(4, 0, ("--store",), 1000)].runs == 1
    settings = {p.settings for p in points}
    for expected in (
        ("--batch-size=500000",),
        ("--batch-delay=50",),
        ("--store", "--batch-size=500000"),
        ("--delay=25",),
        ("--node-cpus=0.5",),
        ("--bandwidth=100",),
        (f"--delay-matrix={folder.parent / 'regions.csv'}",),
        (f"--crash={CRASH}",),
        ("--batch-size=250000",),  # the old result: its missing settings are defaults
    ):
        assert expected in settings
    assert {p.mode for p in points} == {mode}
