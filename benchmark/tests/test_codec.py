"""A run kept in a page's record is read back as it was (`analysis/codec.py`): the summary a page
is written from, and what a page read from the run's logs beyond it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis.codec import DecodeError, decode, encode
from benchmark.analysis.consensus.rounds import Rounds
from benchmark.analysis.metrics import load_run
from benchmark.analysis.node_lives import mark_lives
from benchmark.analysis.resources.profiles import FunctionShare, ProfileSummary
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.analysis.timelines import CatchUp, CommitsTimeline
from benchmark.experiments import Configuration, Experiment, Outcome, leaders
from benchmark.experiments import fault_scenarios as faults
from benchmark.experiments.page import Machine
from benchmark.experiments.records import Record, read_beside_page, relative, save_beside_page
from benchmark.faults.events import FaultLog

from .synthetic import restart_node, write_run


def _through_json(value: object) -> object:
    return json.loads(json.dumps(encode(value)))


def test_a_summary_comes_back_as_it_was(tmp_path: Path) -> None:
    summary = summarize(load_run(write_run(tmp_path)), {"mode": "hotcrypto", "nodes": 2})
    profile = ProfileSummary(10, (FunctionShare("f", 1, 0.1, 2, 0.2),), ("a.svg",))
    summary = replace(summary, profile=profile, readings={"x": [1, 2.5, None]})
    back = decode(Summary, _through_json(summary))
    assert back == summary
    # Tuples are tuples again, ints ints and floats floats.
    assert isinstance(back.stages, tuple)
    assert isinstance(back.pipeline.stages, tuple)
    assert back.profile is not None
    assert isinstance(back.profile.top[0], FunctionShare)
    assert json.dumps(encode(back)) == json.dumps(encode(summary))


def test_a_record_that_does_not_fit_says_so() -> None:
    with pytest.raises(DecodeError, match="expected an object for Summary"):
        decode(Summary, [1, 2])
    with pytest.raises(DecodeError, match="CatchUp"):
        decode(CatchUp, {"node": 1})


def test_the_faults_page_reads_the_same_from_a_record_as_from_the_logs(tmp_path: Path) -> None:
    logs = write_run(tmp_path)
    restart_node(logs, 1, crash_s=3.0, restart_s=5)
    run = mark_lives(load_run(logs), FaultLog.load(logs))
    summary = summarize(run, {"mode": "hotcrypto", "nodes": 2, "logs": str(logs)})
    from_logs = faults.fault_analysis(summary)
    assert from_logs is not None
    assert from_logs.commits_timeline.catch_ups
    assert from_logs.audit.checks
    resumed = leaders.resumed_from_logs(summary)
    kept = replace(summary, readings=_through_json(faults.read_logs(summary)))  # type: ignore[arg-type]
    for directory in logs.iterdir():
        directory.unlink()
    from_record = faults.fault_analysis(kept)
    assert from_record is not None
    assert from_record.commits_timeline.catch_ups == from_logs.commits_timeline.catch_ups
    assert from_record.audit == from_logs.audit
    assert isinstance(from_record.commits_timeline, CommitsTimeline)
    assert leaders.resumed_after_ms(kept) == resumed


def test_a_pages_record_keeps_the_order_of_a_summarys_dicts(tmp_path: Path) -> None:
    summary = summarize(load_run(write_run(tmp_path / "run")), {"mode": "hotcrypto", "nodes": 2})
    # Timeouts by leader, most first: not the order of their names.
    rounds = Rounds(100.0, 9.0, 0.0, 0.0, 10.0, {"node-2": 5, "9c79f0a8": 4})
    summary = replace(summary, rounds=rounds)
    configuration = Configuration("one", {"mode": "hotcrypto"})
    experiment = Experiment("x", "X", "?", lambda quick: [configuration], lambda o, p: None)
    record = Record(Machine(2, "cpu", "Linux", (0.0, 0.0, 0.0)), "abc")
    path = tmp_path / "x" / "record.json"
    save_beside_page(path, "x", False, record, [Outcome(configuration, [summary])])
    _, outcomes = read_beside_page(path, experiment, quick=False)
    (back,) = outcomes["one"].summaries
    assert back.rounds is not None
    assert list(back.rounds.timed_out_leaders) == ["node-2", "9c79f0a8"]
    assert (back.rounds, back.stages, back.end_to_end) == (
        rounds,
        summary.stages,
        summary.end_to_end,
    )


def test_a_pages_record_names_no_path_of_the_machine_that_ran_it(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "run"
    summary = summarize(load_run(write_run(logs)), {"mode": "hotcrypto", "nodes": 2})
    summary = replace(summary, config={**summary.config, "delay_matrix": str(tmp_path / "m.csv")})
    configuration = Configuration("one", {"mode": "hotcrypto"})
    record = Record(Machine(2, "cpu", "Linux", (0.0, 0.0, 0.0)), "abc")
    path = tmp_path / "docs" / "x" / "record.json"
    save_beside_page(path, "x", False, record, [Outcome(configuration, [summary])], root=tmp_path)
    text = path.read_text()
    assert str(tmp_path) not in text
    assert '"m.csv"' in text
    assert relative(f"see {tmp_path}/logs/run/node-1.log", tmp_path) == "see logs/run/node-1.log"
