"""The arithmetic of the capacity projection and of the cost per transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.cost import cost
from benchmark.metrics import load_run
from benchmark.projection import project
from benchmark.report import render_summary
from benchmark.summary import summarize

from .synthetic import write_run

HOTCRYPTO = {"consensus": 100.0, "verifier": 500.0, "executor": 50.0}


def test_sequential_stages_get_a_core_each_and_the_pool_the_rest() -> None:
    projection = project(HOTCRYPTO, 4)
    assert projection is not None
    by_stage = {s.stage: (s.cores, s.tps) for s in projection.stages}
    assert by_stage["consensus"] == (1, pytest.approx(10_000))
    assert by_stage["executor"] == (1, pytest.approx(20_000))
    assert by_stage["verifier"] == (2, pytest.approx(4_000))
    assert (projection.tps, projection.limiting_stage) == (pytest.approx(4_000), "verifier")


def test_the_pool_keeps_one_core_and_a_sequential_stage_can_limit() -> None:
    two = project(HOTCRYPTO, 2)
    assert two is not None
    assert {s.stage: s.cores for s in two.stages}["verifier"] == 1
    assert two.tps == pytest.approx(2_000)
    many = project(HOTCRYPTO, 32)  # 30 verifier cores: 60,000 tx/s, consensus 10,000
    assert many is not None
    assert (many.tps, many.limiting_stage) == (pytest.approx(10_000), "consensus")


def test_stages_without_cost_and_the_load_generator_are_left_out() -> None:
    assert project({}, 4) is None
    assert project({"verifier": 0.0}, 4) is None
    movevm = project({"generator": 1.0, "executor": 4.0}, 4)
    assert movevm is not None
    assert [s.stage for s in movevm.stages] == ["executor"]
    assert movevm.tps == pytest.approx(250_000)
    with pytest.raises(ValueError, match="at least one core"):
        project(HOTCRYPTO, 0)


def test_cost_per_million_transactions() -> None:
    # 4 instances at $0.36/h cost $0.0004/s; at 1,000 tx/s that is $0.40 per million.
    result = cost(0.36, 4, 1_000.0)
    assert result.usd_per_million_tx == pytest.approx(0.4)
    assert result.tx_per_usd == pytest.approx(2_500_000)
    idle = cost(0.36, 4, 0.0)
    assert (idle.usd_per_million_tx, idle.tx_per_usd) == (None, None)


def test_summary_projects_and_prices(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "logs"))
    config = {"mode": "hotcrypto", "nodes": 2, "project_cores": 2, "instance_price": 0.72}
    summary = summarize(run, config)
    assert summary.projection is not None
    assert summary.projection.cores == 2
    assert summary.projection.tps == pytest.approx(2_000)
    assert summary.cost is not None
    # 2 instances at $0.72/h = $0.0004/s at 1,000 tx/s executed.
    assert summary.cost.usd_per_million_tx == pytest.approx(0.4)
    data = summary.to_dict()
    assert data["projection"]["limiting_stage"] == "verifier"
    assert data["cost"]["tx_per_usd"] == pytest.approx(2_500_000)
    text = render_summary(summary)
    assert "CAPACITY PROJECTION (2 cores per node): 2,000 tx/s, limited by verifier" in text
    assert "$0.4000 per million tx, 2,500,000 tx per USD" in text
