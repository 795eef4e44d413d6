"""`fab experiment NAME --rewrite`: the page written again from the logs of the last run,
without running anything."""

from __future__ import annotations

import functools
import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from benchmark.errors import HarnessError
from benchmark.experiments import records, results_page, runner
from benchmark.experiments.experiment import Configuration, Experiment, Outcome
from benchmark.experiments.measures import capacity, fmt
from benchmark.experiments.page import Page
from benchmark.runners.local import LocalBench
from benchmark.runners.plan import Transport

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


def _stand_in_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """`run_experiment` of TWO_RATES on the stand-in binaries, logs under `tmp_path/logs`; the
    caller names the page's output (and `only`)."""
    # The stand-ins' ledger is not consistent: their audit must not stop the runs.
    monkeypatch.setattr(
        runner, "LocalBench", functools.partial(LocalBench, enforce_audit=False, grace=2.0)
    )
    monkeypatch.setattr(runner, "SECONDS", 0.01)  # the speed probe, kept short
    return functools.partial(
        runner.run_experiment,
        TWO_RATES,
        quick=False,
        repo_root=tmp_path,
        logs_dir=tmp_path / "logs",
        results_dir=tmp_path / "results",
        work_dir=tmp_path / "work",
        out=StringIO(),
        binaries=STANDINS,
        build=False,
        base_port=free_port(COMMITTEE_PORTS),
    )


def test_a_page_written_again_from_the_logs_is_the_page_its_runs_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    first = _stand_in_runs(tmp_path, monkeypatch)(output=tmp_path / "first").read_text()
    assert "| faster |" in first
    assert records.record_path(logs, "two-rates", quick=False).is_file()
    # How long its configurations took, which a page's time goal is held to.
    assert re.search(r"^- Time: \d+ min of real time for the 2 configurations \(", first, re.M)

    again = results_page.rewrite_experiment(
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
    changed = results_page.rewrite_experiment(
        longer, quick=False, repo_root=tmp_path, output=tmp_path / "changed", logs_dir=logs
    ).read_text()
    assert "`fab local --mode=hotstuff --nodes=1 --rate=500 --duration=1`" in changed
    assert "--duration=5" not in changed


def test_rewriting_without_a_recorded_run_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"run `fab experiment --name=two-rates --quick` first"):
        results_page.rewrite_experiment(
            TWO_RATES,
            quick=True,
            repo_root=tmp_path,
            output=tmp_path / "pages",
            logs_dir=tmp_path / "logs",
        )


def test_only_reruns_the_configurations_it_names_and_keeps_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    run = _stand_in_runs(tmp_path, monkeypatch)
    first = run(output=tmp_path / "first").read_text()
    before = {e["label"]: e for e in _saved(logs)["configurations"]}
    again = run(output=tmp_path / "again", only="faster").read_text()
    after = {e["label"]: e for e in _saved(logs)["configurations"]}
    # "slow" is the first run's, logs and all; "faster" ran again.
    assert after["slow"]["runs"] == before["slow"]["runs"]
    assert after["faster"]["runs"] != before["faster"]["runs"]
    assert len(after["faster"]["runs"]) == 2
    slow_row = next(line for line in first.splitlines() if line.startswith("| slow |"))
    assert slow_row in again
    assert "- Only the configurations whose label contains `faster` ran at this commit" in again
    with pytest.raises(HarnessError, match="no configuration of two-rates has 'fastest'"):
        run(output=tmp_path / "none", only="fastest")


def test_a_page_says_which_commit_each_configuration_ran_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    run = _stand_in_runs(tmp_path, monkeypatch)
    checkout = {"commit": "aaa"}
    monkeypatch.setattr(runner, "commit_of", lambda _root: checkout["commit"])
    run(output=tmp_path / "first")
    checkout["commit"] = "bbb"
    run(output=tmp_path / "second", only="faster")

    # A record written before configurations kept their commit: the others are the run before's.
    saved = _saved(logs)
    for entry in saved["configurations"]:
        del entry["commit"]
    records.record_path(logs, "two-rates", quick=False).write_text(json.dumps(saved))
    old = results_page.rewrite_experiment(
        TWO_RATES, quick=False, repo_root=tmp_path, output=tmp_path / "old", logs_dir=logs
    ).read_text()
    assert "- Commit: `bbb`." in old
    assert "  - at `aaa`: slow." in old

    # Twice `--only`: "slow" is still the first run's, not the second's.
    checkout["commit"] = "ccc"
    third = run(output=tmp_path / "third", only="faster").read_text()
    assert {e["label"]: e["commit"] for e in _saved(logs)["configurations"]} == {
        "slow": "aaa",
        "faster": "ccc",
    }
    assert "- Commit: `ccc`." in third
    assert (
        "- Only the configurations whose label contains `faster` ran at this commit (`--only`);"
        " the others are from earlier runs:\n  - at `aaa`: slow.\n"
    ) in third
    assert "bbb" not in third


def _saved(logs: Path) -> dict:
    return json.loads(records.record_path(logs, "two-rates", quick=False).read_text())


def test_a_page_names_the_commit_its_runs_started_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checkout changes while the runs go on (someone edits the code): the page names the
    # commit the binaries were built from, not the tree as it is when the page is written.
    results = tmp_path / "results"

    def commit_of(_repo: Path) -> str:
        edited = results.is_dir() and any(results.iterdir())
        return "abc123 (with uncommitted changes)" if edited else "abc123"

    monkeypatch.setattr(runner, "commit_of", commit_of)
    page = _stand_in_runs(tmp_path, monkeypatch)(output=tmp_path / "page").read_text()
    assert "abc123" in page
    assert "with uncommitted changes" not in page
    assert _saved(tmp_path / "logs")["commit"] == "abc123"


def test_a_run_stopped_halfway_goes_on_from_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = tmp_path / "logs"
    run = _stand_in_runs(tmp_path, monkeypatch)
    with pytest.raises(HarnessError, match="no usable record"):
        run(output=tmp_path / "nothing", resume=True)

    # The session closes while the second configuration runs.
    real = runner._run_configuration

    def stopped_at_faster(where: Transport, outcome: Outcome, *args: Any, **kw: Any) -> None:
        if outcome.configuration.label == "faster":
            raise KeyboardInterrupt
        real(where, outcome, *args, **kw)

    monkeypatch.setattr(runner, "_run_configuration", stopped_at_faster)
    with pytest.raises(KeyboardInterrupt):
        run(output=tmp_path / "first")
    unfinished = records.unfinished_path(logs, "two-rates", quick=False)
    halfway = json.loads(unfinished.read_text())
    assert [e["label"] for e in halfway["configurations"]] == ["slow"]
    # The probe that began "faster" is "slow"'s after-probe: kept though "faster" never ended.
    assert halfway["configurations"][0]["probe_after"] is not None
    assert not records.record_path(logs, "two-rates", quick=False).exists()

    # Another commit's runs do not go on this page.
    monkeypatch.setattr(runner, "_run_configuration", real)
    monkeypatch.setattr(runner, "commit_of", lambda _root: "0123456789ab")
    with pytest.raises(HarnessError, match="is of commit unknown, this checkout is 0123456789ab"):
        run(output=tmp_path / "other", resume=True)

    monkeypatch.setattr(runner, "commit_of", lambda _root: "unknown")
    page = run(output=tmp_path / "resumed", resume=True).read_text()
    saved = _saved(logs)
    # "slow" kept its runs from before the stop; only "faster" ran now.
    assert saved["configurations"][0]["runs"] == halfway["configurations"][0]["runs"]
    assert [len(e["runs"]) for e in saved["configurations"]] == [1, 2]
    assert saved["resumed"] == 1
    assert "went on with `--resume` at the same commit: 1 of its configurations ran" in page
    # Both in the table of probes and in the experiment's own.
    assert sum(line.startswith("| slow |") for line in page.splitlines()) == 2
    assert sum(line.startswith("| faster |") for line in page.splitlines()) == 2
    assert not unfinished.exists()

    # A record kept before the after-probe was saved at once: the row stays, its gap shown.
    saved["configurations"][0]["probe_after"] = None
    records.record_path(logs, "two-rates", quick=False).write_text(json.dumps(saved))
    gap = results_page.rewrite_experiment(
        TWO_RATES, quick=False, repo_root=tmp_path, output=tmp_path / "gap", logs_dir=logs
    ).read_text()
    slow_probe = next(
        line for line in gap.splitlines() if line.startswith("| slow |") and " / " in line
    )
    assert slow_probe.endswith(" / - | - |")


def test_a_page_is_written_again_from_the_record_beside_it_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runs' logs are not on this machine (a fresh clone): the record committed beside the
    # page is all there is, and the page comes out as it was.
    pages = tmp_path / "pages"
    first = _stand_in_runs(tmp_path, monkeypatch)(output=pages).read_bytes()
    committed = records.page_record_path(pages, "two-rates")
    assert committed.is_file()
    saved = json.loads(committed.read_text())
    assert [len(c["runs"]) for c in saved["configurations"]] == [1, 2]
    # Compact: no per-second series, no raw logs.
    run = saved["configurations"][1]["runs"][0]
    assert run["timeline"] == {}
    assert run["batch_sizes"] == {}
    assert committed.stat().st_size < 100_000
    shutil.rmtree(tmp_path / "logs")

    again = results_page.rewrite_experiment(
        TWO_RATES, quick=False, repo_root=tmp_path, output=pages, logs_dir=tmp_path / "logs"
    )
    assert again.read_bytes() == first
    assert records.page_record_path(pages, "two-rates").read_text() == committed.read_text()

    # `--only` keeps what it does not run from that record too.
    monkeypatch.setattr(runner, "commit_of", lambda _root: "bbb")
    page = _stand_in_runs(tmp_path, monkeypatch)(output=pages, only="faster").read_text()
    slow_row = next(line for line in first.decode().splitlines() if line.startswith("| slow |"))
    assert slow_row in page
    assert "  - at `unknown`: slow." in page

    # The record beside the page is of the full run: a `--quick` page is not written from it.
    with pytest.raises(HarnessError, match="it records a full run"):
        results_page.rewrite_experiment(
            TWO_RATES, quick=True, repo_root=tmp_path, output=pages, logs_dir=tmp_path / "none"
        )
    # No record anywhere: the error names both places.
    with pytest.raises(HarnessError, match="nor is there a record beside the page"):
        results_page.rewrite_experiment(
            TWO_RATES,
            quick=False,
            repo_root=tmp_path,
            output=tmp_path / "elsewhere",
            logs_dir=tmp_path / "none",
        )


def test_a_capacity_profiled_apart_is_recorded_and_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def line(outcome: Outcome) -> str:
        found = capacity(outcome.summaries)
        rates = [s.config["rate"] for s in outcome.profiled]
        profiles = sorted(
            p.name for s in outcome.profiled for p in Path(s.config["logs"]).glob("profile-*")
        )
        return (
            f"- {outcome.configuration.label}: {len(outcome.summaries)} runs, capacity"
            f" {found.rate if found else None}, profiled at {rates}, {profiles}"
        )

    profiled = replace(
        TWO_RATES,
        configurations=lambda quick: [
            replace(c, profile_at_capacity=c.label == "faster")
            for c in TWO_RATES.configurations(quick)
        ],
        write=lambda outcomes, page: page.add(*[line(o) for o in outcomes]),
    )
    logs = tmp_path / "logs"
    run = _stand_in_runs(tmp_path, monkeypatch)
    page = run.func(profiled, *run.args[1:], **run.keywords, output=tmp_path / "first").read_text()
    # The sweep's two runs, then one more at its capacity, profiled and kept apart.
    (faster,) = re.findall(
        r"^- faster: 2 runs, capacity (\d+), profiled at \[(\d+)\], "
        r"\['profile-node-0'\]$",
        page,
        re.M,
    )
    assert faster[0] == faster[1]
    assert re.search(r"^- slow: 1 runs, capacity \S+, profiled at \[\], \[\]$", page, re.M)
    saved = {e["label"]: e for e in _saved(logs)["configurations"]}
    assert [r["rate"] for r in saved["faster"]["profiled"]] == [int(faster[1])]
    assert saved["slow"]["profiled"] == []
    again = results_page.rewrite_experiment(
        profiled, quick=False, repo_root=tmp_path, output=tmp_path / "again", logs_dir=logs
    ).read_text()
    assert page.splitlines()[-2:] == again.splitlines()[-2:]


def test_labels_from_earlier_runs_are_named_by_their_case() -> None:
    labels = [
        "clock",
        "hotstuff, kept up: K=1: run 1",
        "hotstuff, kept up: K=2: run 1",
        "hotcrypto, kept up: K=1: run 1",
        "hotstuff, kept up: K=1: run 2",
    ]
    assert results_page.grouped(labels) == (
        "clock; hotstuff, kept up (3 configurations); hotcrypto, kept up: K=1: run 1"
    )
