"""The arithmetic of the capacity projection and of the cost per transaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.resources.cost import cost
from benchmark.analysis.run_summary import summarize
from benchmark.analysis.stages.projection import ONE_PER_CORE, project
from benchmark.report.text import render_summary

from .synthetic import write_run

HOTCRYPTO = {"consensus": 100.0, "verifier": 500.0, "executor": 50.0}


def test_stages_share_the_cores_in_proportion_to_their_cost() -> None:
    # 650 µs per transaction in all: 4 cores carry 4e6 / 650 tx/s, below every stage's own
    # ceiling (verifier 4 threads: 8,000; consensus 10,000; executor 20,000).
    projection = project(HOTCRYPTO, 4)
    assert projection is not None
    assert projection.cpu_bound
    assert projection.tps == pytest.approx(4e6 / 650)
    assert projection.limiting_stage == "verifier"  # it costs the most
    by_stage = {s.stage: s for s in projection.stages}
    assert by_stage["verifier"].max_cores == 4
    assert (by_stage["consensus"].max_cores, by_stage["executor"].max_cores) == (1, 1)
    assert by_stage["verifier"].tps == pytest.approx(8_000)
    assert by_stage["consensus"].tps == pytest.approx(10_000)
    # Every core is busy, each stage with its share of the cost.
    assert sum(s.cores_used for s in projection.stages) == pytest.approx(4.0)
    assert by_stage["verifier"].cores_used == pytest.approx(4 * 500 / 650)


def test_two_cores_are_not_reserved_one_per_sequential_stage() -> None:
    # The measured shape of hotcrypto (µs/tx): the cheap sequential stages need a fraction of a
    # core, so two cores carry 2e6 / 15.1 tx/s, not the 1e6 / 13.6 of a pool left one core.
    two = project({"consensus": 1.2, "verifier": 13.6, "executor": 0.3}, 2)
    assert two is not None
    assert two.tps == pytest.approx(2e6 / 15.1)
    assert two.tps > 1.8 * 1e6 / 13.6
    assert (two.cpu_bound, two.limiting_stage) == (True, "verifier")
    one = project(HOTCRYPTO, 1)
    assert one is not None
    assert one.tps == pytest.approx(1e6 / 650)


def test_a_sequential_stage_at_its_ceiling_limits_with_cores_to_spare() -> None:
    many = project(HOTCRYPTO, 32)  # 32 cores: 49,231 tx/s by CPU; consensus alone 10,000
    assert many is not None
    assert (many.tps, many.limiting_stage, many.bound) == (
        pytest.approx(10_000),
        "consensus",
        "consensus",
    )
    assert not many.cpu_bound
    assert many.cpu_tps == pytest.approx(32e6 / 650)
    slow_executor = project({"consensus": 10.0, "verifier": 100.0, "executor": 900.0}, 4)
    assert slow_executor is not None
    assert (slow_executor.tps, slow_executor.limiting_stage) == (
        pytest.approx(1e6 / 900),
        "executor",
    )
    used = {s.stage: s.cores_used for s in slow_executor.stages}
    assert used["executor"] == pytest.approx(1.0)
    assert used["verifier"] == pytest.approx(100 / 900)


def test_a_pool_of_fixed_threads_is_capped_by_them() -> None:
    one_thread = project(HOTCRYPTO, 4, pool_threads=1)
    assert one_thread is not None
    assert (one_thread.tps, one_thread.limiting_stage) == (pytest.approx(2_000), "verifier")
    assert {s.stage: s.max_cores for s in one_thread.stages}["verifier"] == 1
    # More threads than cores: the cores cap the pool.
    wide = project(HOTCRYPTO, 2, pool_threads=8)
    assert wide is not None
    assert {s.stage: s.max_cores for s in wide.stages}["verifier"] == 2
    with pytest.raises(ValueError, match="at least one thread"):
        project(HOTCRYPTO, 2, pool_threads=0)


def test_a_parallel_executor_gets_as_many_cores_as_it_has_threads() -> None:
    # The executor alone would cap 32 cores at 1e6 / 40 tx/s; on a pool of a thread per core it
    # shares the cores like the rest, and consensus's own ceiling binds instead.
    costs = {"consensus": 20.0, "verifier": 100.0, "executor": 40.0}
    sequential = project(costs, 32)
    assert sequential is not None
    assert (sequential.tps, sequential.bound) == (pytest.approx(25_000), "executor")
    parallel = project(costs, 32, executor_threads=ONE_PER_CORE)
    assert parallel is not None
    assert (parallel.tps, parallel.bound) == (pytest.approx(50_000), "consensus")
    assert {s.stage: s.max_cores for s in parallel.stages}["executor"] == 32
    # Its threads, when fixed, cap it like the verifier's.
    two = project(costs, 32, executor_threads=2)
    assert two is not None
    assert (two.tps, two.bound) == (pytest.approx(50_000), "consensus")
    assert {s.stage: s.max_cores for s in two.stages}["executor"] == 2
    one = project(costs, 32, executor_threads=1)
    assert one is not None
    assert one.tps == sequential.tps
    with pytest.raises(ValueError, match="needs threads"):
        project(costs, 4, executor_threads=-1)


def test_summary_gives_a_parallel_executor_its_threads(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "logs", mode="hotmove"))
    base = {"mode": "hotmove", "nodes": 2, "project_cores": 16}

    def executor_cores(settings: dict[str, object]) -> int:
        projection = summarize(run, {**base, **settings}).projection
        assert projection is not None
        return {s.stage: s.max_cores for s in projection.stages}["executor"]

    assert executor_cores({}) == 1
    assert executor_cores({"exec": "blockstm"}) == 16
    assert executor_cores({"exec": "waves", "exec_threads": 3}) == 3


def test_stages_without_cost_and_the_load_generator_are_left_out() -> None:
    assert project({}, 4) is None
    assert project({"verifier": 0.0}, 4) is None
    movevm = project({"generator": 1.0, "executor": 4.0}, 4)
    assert movevm is not None
    assert [s.stage for s in movevm.stages] == ["executor"]
    # One thread: its ceiling binds long before 4 cores' worth of CPU.
    assert (movevm.tps, movevm.bound) == (pytest.approx(250_000), "executor")
    with pytest.raises(ValueError, match="needs some CPU"):
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
    # 100 + 500 + 50 µs per transaction on 2 cores.
    assert summary.projection.tps == pytest.approx(2e6 / 650)
    assert summary.cost is not None
    # 2 instances at $0.72/h = $0.0004/s at 1,000 tx/s executed.
    assert summary.cost.usd_per_million_tx == pytest.approx(0.4)
    data = summary.to_dict()
    assert data["projection"]["limiting_stage"] == "verifier"
    assert data["projection"]["bound"] == "cpu"
    assert data["cost"]["tx_per_usd"] == pytest.approx(2_500_000)
    text = render_summary(summary)
    head = "CAPACITY PROJECTION (2 cores per node): 3,077 tx/s, CPU-bound: 2 cores / 650.0 µs/tx"
    assert head in text
    assert "   verifier       500.0        1.54           2        4,000" in text
    assert "the cores limit; verifier costs the most CPU per transaction" in text
    assert "$0.4000 per million tx, 2,500,000 tx per USD" in text


def test_summary_caps_the_pool_at_the_threads_the_run_fixed(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path / "logs"))
    config = {"mode": "hotcrypto", "nodes": 2, "project_cores": 4, "verifier_threads": 1}
    projection = summarize(run, config).projection
    assert projection is not None
    assert (projection.tps, projection.limiting_stage) == (pytest.approx(2_000), "verifier")
    text = render_summary(summarize(run, config))
    assert "CAPACITY PROJECTION (4 cores per node): 2,000 tx/s\n" in text
    assert "limited by verifier: at its own ceiling, with cores to spare" in text


def test_a_local_run_of_several_nodes_says_its_costs_include_sharing_the_cores(
    tmp_path: Path,
) -> None:
    run = load_run(write_run(tmp_path / "logs"))
    base = {"mode": "hotcrypto", "nodes": 2, "project_cores": 2}
    local = summarize(run, {**base, "where": "local", "cores": 2})
    assert local.projection is not None
    caveat = "µs/tx measured with 2 nodes sharing 2 cores include the cost of sharing them"
    assert local.projection.caveat is not None
    assert local.projection.caveat.startswith(caveat)
    assert caveat in render_summary(local)
    # Remote nodes have machines of their own; without the cores nothing can be said.
    for config in ({**base, "where": "remote", "cores": 2}, {**base, "where": "local"}):
        projection = summarize(run, config).projection
        assert projection is not None
        assert projection.caveat is None


def test_a_projection_from_a_budgeted_run_says_at_which_budget_it_measured(
    tmp_path: Path,
) -> None:
    run = load_run(write_run(tmp_path / "logs"))
    config = {"mode": "hotcrypto", "nodes": 2, "project_cores": 2, "where": "local", "cores": 2}
    budgeted = summarize(run, {**config, "node_cpus": 0.75})
    projection = budgeted.projection
    assert projection is not None
    assert projection.measured_cores == 0.75
    # The budget changes how the costs were measured, not the model: the same projection.
    plain = summarize(run, config).projection
    assert plain is not None
    assert plain.measured_cores is None
    assert (projection.tps, projection.limiting_stage) == (plain.tps, plain.limiting_stage)
    assert projection.caveat is not None
    assert projection.caveat.startswith(
        "µs/tx measured at 0.75 cores per node (--node-cpus: a CFS quota each, 2 nodes and the"
        " clients on 2 shared cores): a quota caps CPU time without giving a node cores of its"
        " own"
    )
    text = render_summary(budgeted)
    assert (
        " + CAPACITY PROJECTION (2 cores per node, from costs measured at 0.75 cores per node):"
        " 3,077 tx/s"
    ) in text
    assert budgeted.to_dict()["projection"]["measured_cores"] == 0.75
    # How far it reaches from the run it was fitted on: 2 cores from 0.75.
    assert projection.fitted_cores == 0.75
    assert (
        "fitted on this run alone, at 0.75 cores per node: it extrapolates x2.67 in cores" in text
    )
    # Even one node says it: its budget is what its costs were measured at.
    single = summarize(run, {**config, "nodes": 1, "node_cpus": 1})
    assert single.projection is not None
    assert single.projection.measured_cores == 1.0
