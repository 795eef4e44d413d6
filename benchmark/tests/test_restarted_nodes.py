"""A restarted node's counters start again from zero (a new process), so the summary reads every
cumulative counter within one life of a node: growth inside each life counts, the drop at the
restart does not. The run is `synthetic.py`'s, with node 1 killed at 5.5 s and started again at
6 s: over the steady window [1.9 s, 10 s] it counts 3.1 s of its first life and 3 s of its
second, at 1,000 transactions and 700 ms of process CPU a second. The headline rates are the
committee's, so they come from the nodes up through the window."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from benchmark.analysis.run_summary import Summary
from benchmark.runners.finish import finish_run

from .synthetic import restart_node, write_run

WINDOW_S = 8.1
NODE_1_S = 3.1 + 3.0  # seconds of the window node 1 was up and reporting


def _summary(tmp_path: Path, restarted: tuple[int, ...] = (1,)) -> tuple[Summary, str]:
    logs = write_run(tmp_path / "logs")
    for node in restarted:
        restart_node(logs, node, crash_s=5.5, restart_s=6)
    out = io.StringIO()
    summary, _ = finish_run(logs, None, None, out, enforce_audit=False)
    return summary, out.getvalue()


def test_rates_of_a_restarted_node_count_within_each_life(tmp_path: Path) -> None:
    summary, report = _summary(tmp_path)
    # The headline: node 0, up through the window, committed and executed 1,000 a second.
    assert summary.consensus is not None
    assert summary.consensus.tps == pytest.approx(1000.0)
    assert summary.consensus.bps == pytest.approx(200_000.0)
    assert summary.end_to_end.tps == pytest.approx(1000.0)
    assert "TPS: 1,000 tx/s (mean of the 1 of 2 nodes up through the window)" in report
    # The stage rows are work done, by every node in each of its lives.
    per_node_tps = (1000 * WINDOW_S + 1000 * NODE_1_S) / 2 / WINDOW_S
    for name in ("consensus", "verifier", "executor"):
        row = summary.stage(name)
        assert row is not None
        assert row.throughput == pytest.approx(per_node_tps), name
    # CPU per transaction is unchanged by the restart: both lives spend the same per transaction.
    verifier = summary.stage("verifier")
    assert verifier is not None
    assert verifier.us_per_tx == pytest.approx(500.0)
    nodes_cpu = (0.7 * WINDOW_S + 0.7 * NODE_1_S) / 2 / WINDOW_S
    assert summary.resources.nodes.cpu_cores == pytest.approx(nodes_cpu)


def test_when_every_node_restarted_the_rates_are_read_within_lives(tmp_path: Path) -> None:
    summary, report = _summary(tmp_path, restarted=(0, 1))
    assert summary.consensus is not None
    assert summary.consensus.tps == pytest.approx(1000 * NODE_1_S / WINDOW_S)
    assert "(every node was down in the window: rates within each life" in report


def test_per_second_series_skip_the_restart(tmp_path: Path) -> None:
    summary, _ = _summary(tmp_path)
    cpu = summary.resources.series["node-1"]["cpu_cores"]
    assert cpu
    assert all(value == pytest.approx(0.7) for value in cpu)
    for stage, quantities in summary.timeline["stages"].items():
        for quantity, values in quantities.items():
            assert all(v is None or v >= 0 for v in values), (stage, quantity, values)
    assert all(size == pytest.approx(100.0) for size in summary.batch_sizes["consensus"])
