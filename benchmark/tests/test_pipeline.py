"""The node's description of a mode's pipeline: read beside the logs, refused when malformed, and
missing from older logs and results with an error that says how to add it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmark.analysis import results
from benchmark.analysis.metrics import load_run
from benchmark.analysis.pipeline import FILE, Pipeline, PipelineError, describe
from benchmark.analysis.run_summary import SummaryError, summarize
from benchmark.config import ConfigError
from benchmark.plots.graphs import plot_all

from .conftest import described
from .synthetic import write_run

MODES = ("hotstuff", "hotcrypto", "hotmove", "movevm")


@pytest.mark.parametrize("mode", MODES)
def test_the_stand_in_describes_as_the_fixtures_say(standins: Path, mode: str) -> None:
    assert describe(standins / "node", mode) == described(mode)


def test_what_is_done_follows_the_description() -> None:
    assert [described(m).done for m in MODES] == ["commit", "execute", "execute", "execute"]
    assert described("hotstuff").done_verb == "committed"
    assert described("movevm").process == "movevm"
    assert described("hotmove").runs_move
    assert not described("hotcrypto").runs_move


def test_logs_without_a_description_are_refused_with_the_fix(tmp_path: Path) -> None:
    logs = write_run(tmp_path / "logs")
    (logs / FILE).unlink()
    with pytest.raises(PipelineError, match=rf"{logs} has no {FILE}.*node describe --mode"):
        summarize(load_run(logs), {"mode": "hotcrypto"})


def test_a_description_of_another_mode_is_refused(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "logs", mode="hotstuff"))
    with pytest.raises(SummaryError, match="mode hotcrypto, but its pipeline is hotstuff's"):
        summarize(run, {"mode": "hotcrypto"})


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: d.pop("done_counter"), "no 'done_counter'"),
        (lambda d: d.update(done="seal"), "done is 'seal'"),
        (lambda d: d.update(stages="consensus"), "expected a list"),
        (lambda d: d.update(consensus="yes"), "expected true or false"),
    ],
)
def test_a_malformed_description_is_refused(change: object, error: str) -> None:
    data = described("hotcrypto").to_json()
    change(data)  # type: ignore[operator]
    with pytest.raises(PipelineError, match=error):
        Pipeline.from_json(data, "node describe")


def test_a_description_round_trips() -> None:
    for mode in MODES:
        pipeline = described(mode)
        assert Pipeline.from_json(json.loads(json.dumps(pipeline.to_json())), "") == pipeline


def test_a_result_without_the_description_is_refused_by_the_plots(tmp_path: Path) -> None:
    summary = summarize(load_run(write_run(tmp_path / "logs")), {"mode": "hotcrypto"})
    saved = results.save(summary, tmp_path / "results")
    assert json.loads(saved.read_text())["pipeline"] == described("hotcrypto").to_json()
    data = json.loads(saved.read_text())
    del data["pipeline"]
    saved.write_text(json.dumps(data))
    with pytest.raises(PipelineError, match=rf"{saved.name} has no key `pipeline`"):
        plot_all(tmp_path / "results", tmp_path / "plots", "hotcrypto")


def test_a_missing_node_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        describe(tmp_path / "node", "hotcrypto")
    broken = tmp_path / "bin"
    shutil.copytree(Path(__file__).parent / "standins", broken)
    with pytest.raises(ConfigError, match="failed with code"):
        describe(broken / "node", "nosuchmode")
