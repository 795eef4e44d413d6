"""`fab experiment NAME --rewrite`: the page written again from the logs of the last run,
without running anything."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from io import StringIO
from pathlib import Path

import pytest

from benchmark.errors import HarnessError
from benchmark.experiments import runner
from benchmark.experiments.experiment import Configuration, Experiment, Outcome
from benchmark.experiments.measures import fmt
from benchmark.experiments.page import Page
from benchmark.runners.local import LocalBench

from .conftest import STANDINS
from .sshhosts import COMMITTEE_PORTS, free_port


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    page.table(
        ["configuration", "delivered", "runs"],
        [
            [
                o.configuration.label,
                " / ".join(fmt(s.end_to_end.tps) for s in o.summaries),
                str(len(o.summaries)),
            ]
            for o in outcomes
        ],
    )


TWO_RATES = Experiment(
    name="two-rates",
    title="Two rates",
    question="What do the stand-ins deliver at two rates?",
    configurations=lambda quick: [
        Configuration("slow", {"mode": "hotstuff", "nodes": "1", "rate": "500", "duration": "1"}),
        Configuration(
            "faster",
            {"mode": "hotstuff", "nodes": "1", "rate": "1000,2000", "duration": "1"},
        ),
    ],
    write=_write,
)


def test_a_page_written_again_from_the_logs_is_the_page_its_runs_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stand-ins' ledger is not consistent: their audit must not stop the runs.
    monkeypatch.setattr(
        runner, "LocalBench", functools.partial(LocalBench, enforce_audit=False, grace=2.0)
    )
    logs = tmp_path / "logs"
    first = runner.run_experiment(
        TWO_RATES,
        quick=False,
        repo_root=tmp_path,
        output=tmp_path / "first",
        logs_dir=logs,
        results_dir=tmp_path / "results",
        work_dir=tmp_path / "work",
        out=StringIO(),
        binaries=STANDINS,
        build=False,
        base_port=free_port(COMMITTEE_PORTS),
    ).read_text()
    assert "| faster |" in first
    assert runner.record_path(logs, "two-rates", quick=False).is_file()

    again = runner.rewrite_experiment(
        TWO_RATES, quick=False, repo_root=tmp_path, output=tmp_path / "again", logs_dir=logs
    ).read_text()
    written_again = (
        "- Written again from these runs' logs by `fab experiment two-rates --rewrite`, with the"
        " analysis of commit `unknown`.\n"
    )
    assert written_again in again
    # Everything else, the machine before the runs and every figure, is the first page's.
    assert again.replace(written_again, "") == first

    # The experiment's flags changed since: the page still quotes what ran.
    longer = replace(
        TWO_RATES,
        configurations=lambda quick: [
            replace(c, flags={**c.flags, "duration": "5"}) for c in TWO_RATES.configurations(quick)
        ],
    )
    changed = runner.rewrite_experiment(
        longer, quick=False, repo_root=tmp_path, output=tmp_path / "changed", logs_dir=logs
    ).read_text()
    assert "`fab local --mode=hotstuff --nodes=1 --rate=500 --duration=1`" in changed
    assert "--duration=5" not in changed


def test_rewriting_without_a_recorded_run_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"run `fab experiment --name=two-rates --quick` first"):
        runner.rewrite_experiment(
            TWO_RATES,
            quick=True,
            repo_root=tmp_path,
            output=tmp_path / "pages",
            logs_dir=tmp_path / "logs",
        )
