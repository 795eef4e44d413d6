"""Per-hop latency of samples (on `synthetic.py`'s run) and the folded-stack profile parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.resources.profiles import load_profiles, parse_folded, top_functions
from benchmark.analysis.run_summary import summarize
from benchmark.report.text import render_summary

from .synthetic import write_run


def test_hops_follow_the_node_that_received_the_sample(tmp_path: Path) -> None:
    summary = summarize(load_run(write_run(tmp_path / "logs")), {"mode": "hotcrypto"})
    hops = {hop.name: hop.latency for hop in summary.hops}
    expected = {
        "send → receive": 5,
        "receive → seal": 45,
        "seal → quorum": 30,
        "quorum → commit": 70,
        "commit → verify": 20,
        "verify → execute": 30,
        "send → execute": 200,  # node 1's earlier execute of client 0's samples is not a hop
    }
    assert list(hops) == list(expected)
    for name, value in expected.items():
        assert hops[name].count == 16
        assert hops[name].p50_ms == pytest.approx(value)
        assert hops[name].p99_ms == pytest.approx(value)
    # The end-to-end latency stays the earliest execution anywhere.
    assert summary.end_to_end.latency.mean_ms == pytest.approx(195)
    assert "quorum → commit" in render_summary(summary)


def test_hotstuff_hops_end_at_commit_and_old_logs_have_only_the_whole_path(
    fixtures: Path,
) -> None:
    summary = summarize(load_run(fixtures / "hotstuff"), {"mode": "hotstuff"})
    names = [hop.name for hop in summary.hops]
    assert names[-1] == "send → commit"
    assert "commit → verify" not in names
    by_name = {hop.name: hop.latency for hop in summary.hops}
    assert by_name["send → receive"].count == 0
    assert by_name["send → commit"].p50_ms == pytest.approx(150)


FOLDED = """\
main;run;verify;ed25519 60
main;run;execute;move_vm 30
main;run;execute 10
broken line
main;recurse;recurse 5
"""


def test_self_and_inclusive_samples() -> None:
    profile = top_functions(parse_folded(FOLDED.splitlines()), top=3)
    assert profile.samples == 105
    assert [f.function for f in profile.top] == ["ed25519", "move_vm", "execute"]
    execute = profile.top[2]
    assert execute.self_samples == 10
    assert execute.inclusive_samples == 40
    assert execute.inclusive_share == pytest.approx(40 / 105)
    everything = {f.function: f for f in top_functions(parse_folded(FOLDED.splitlines())).top}
    assert everything["recurse"].inclusive_samples == 5  # once per stack, not per frame


def test_profiles_of_all_nodes_add_up(tmp_path: Path) -> None:
    assert load_profiles(tmp_path) is None
    for index, count in enumerate((3, 1)):
        directory = tmp_path / f"profile-node-{index}"
        directory.mkdir()
        (directory / "profile.folded").write_text(f"a;b {count}\na;c 1\n")
        (directory / "flamegraph.svg").write_text("<svg/>")
    profile = load_profiles(tmp_path)
    assert profile is not None
    assert profile.samples == 6
    assert (profile.top[0].function, profile.top[0].self_share) == ("b", pytest.approx(4 / 6))
    assert len(profile.flamegraphs) == 2
    assert top_functions([]).top == ()
