"""`fab experiment`: the commands a page quotes, the verdicts it draws, and each `--quick`
experiment run for real (marked `e2e`), its page checked: the tables hold numbers parsed from
the runs it made, the figures exist, the machine and commit are said."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.experiments import EXPERIMENTS, Configuration
from benchmark.experiments.overload import verdict
from benchmark.metrics import load_run
from benchmark.summary import Summary, summarize

from .conftest import REPO_ROOT
from .sshhosts import COMMITTEE_PORTS, free_port
from .synthetic import write_run


def test_a_configuration_is_the_command_a_user_types() -> None:
    configuration = Configuration(
        "with a store",
        {"mode": "hotstuff", "rate": "1000,2000", "store": True},
        crash=("2@5:15",),
        kill_leader_every="5",
    )
    assert configuration.command() == (
        "fab local --mode=hotstuff --rate=1000,2000 --store --crash=2@5:15 --kill-leader-every=5"
    )


@pytest.fixture(scope="module")
def run_summary(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    logs = write_run(tmp_path_factory.mktemp("run"))
    return summarize(load_run(logs), {"mode": "hotcrypto", "nodes": 2})


def _at(summary: Summary, rate: int, delivered: float) -> Summary:
    """`summary` as a run asked for `rate` that delivered `delivered` tx/s."""
    return replace(
        summary,
        config={**summary.config, "rate": rate},
        end_to_end=replace(summary.end_to_end, tps=delivered),
    )


def test_the_overload_verdict_finds_the_capacity_and_the_holes(run_summary: Summary) -> None:
    runs = [
        _at(run_summary, 100, 99),
        _at(run_summary, 200, 199),
        _at(run_summary, 300, 150),  # one run of 300 fell behind: a hole below the capacity
        _at(run_summary, 300, 299),
        _at(run_summary, 400, 398),
        _at(run_summary, 600, 420),
    ]
    lines = verdict(runs)
    assert lines[0] == "- Capacity (highest rate at which every run kept up): 400 tx/s."
    assert "at: 300 tx/s" in lines[1]
    assert "worst run delivered 420 tx/s, 100% of the best" in lines[2]
    above = verdict(
        [_at(run_summary, 100, 100), _at(run_summary, 200, 150), _at(run_summary, 300, 100)]
    )
    assert above[1] == "- Every run at every rate below it kept up."
    assert "worst run delivered 100 tx/s, 67% of the best run (150 tx/s" in above[2]


NUMBER = re.compile(r"\d[\d,]*")


@pytest.mark.e2e
@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_each_quick_experiment_writes_its_page(
    name: str, tmp_path: Path, release_binaries: Path
) -> None:
    command = [
        sys.executable, "-m", "fabric", "experiment", f"--name={name}", "--quick", "--no-build",
        f"--output={tmp_path / 'pages'}", f"--logs={tmp_path / 'logs'}",
        f"--results={tmp_path / 'results'}", f"--binaries={release_binaries}",
        f"--base-port={free_port(COMMITTEE_PORTS)}",
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (tmp_path / "pages" / f"{name}.md").read_text()
    assert "Runs that did not finish" not in page, page
    assert "- Machine: " in page
    assert " cores, " in page
    assert re.search(r"- Commit: `[0-9a-f]{12}", page)
    configurations = EXPERIMENTS[name].configurations(True)
    for configuration in configurations:
        assert f"`{configuration.command()}`" in page
    # Every table row has its figures, and they came from runs: no dashes where numbers go.
    rows = [line for line in page.splitlines() if line.startswith("| ") and "---" not in line]
    body = [row for row in rows if not row.startswith("| rate asked") and "scenario" not in row]
    assert body, page
    for row in body:
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
        assert all(NUMBER.search(cell) for cell in cells[:3]), row
    for figure in re.findall(r"\]\(([^)]+\.png)\)", page):
        assert (tmp_path / "pages" / figure).stat().st_size > 0
