"""The gate's rule (`experiments/dilation.py`): a K agrees when each figure's median is within
the tolerance of the undilated median; a K passes when every configuration run at it agrees at it
and at every smaller K. Figures here are plain numbers standing for runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark.analysis.consensus.hops import Hop
from benchmark.analysis.stats import LatencyStats
from benchmark.experiments import dilation, dilation_lines
from benchmark.experiments.dilation import (
    collapse_configurations,
    diagnosis,
    dilation_for,
    misses,
    moved_hop,
    passed_factors,
    round_trip_line,
    unsaturated_factors,
    with_links,
)
from benchmark.runners.vcpus import Fit


@pytest.fixture(autouse=True)
def one_measure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run is its own figure, under one measure named `x`."""
    monkeypatch.setattr(dilation, "MEASURES", {"x": (lambda run: run, 0)})


def test_a_k_agrees_within_the_tolerance_of_the_undilated_median() -> None:
    runs = {1: [100.0, 90.0, 200.0], 2: [109.0], 4: [111.0], 8: [89.0]}
    assert misses(runs, 2) == []
    assert misses(runs, 4) == ["x +11%"]
    assert misses(runs, 8) == ["x -11%"]
    assert misses({1: [100.0]}, 2) == ["x missing"]


def test_a_k_passes_only_with_every_smaller_k_of_every_case() -> None:
    runs = {
        "a": {1: [100.0], 2: [100.0], 4: [120.0], 8: [100.0]},
        "b": {1: [100.0], 2: [100.0], 4: [100.0], 8: [100.0], 16: [100.0]},
    }
    # `a` misses at 4, so neither 4 nor 8 passes; 16 is run by `b` alone, whose every K agreed.
    assert passed_factors(runs) == [2, 16]


def test_the_cases_with_links_pass_on_their_own() -> None:
    name = f"b, {dilation.LINKS}, kept up"
    runs = {
        "a": {1: [100.0], 2: [150.0]},
        name: {1: [100.0], 2: [100.0], 4: [105.0]},
    }
    assert passed_factors(runs) == [4]  # `a` misses at 2: no K for the pages without links
    assert list(with_links(runs)) == [name]
    assert passed_factors(with_links(runs)) == [2, 4]


def test_each_case_with_links_is_a_loopback_case_again_with_one_delay() -> None:
    linked = [c for c in dilation.CASES if dilation.LINKS in c.name]
    assert len(linked) == 3
    loopback = {c.name: c for c in dilation.CASES if dilation.LINKS not in c.name}
    for case in linked:
        twin = loopback[case.name.replace(f", {dilation.LINKS}", "")]
        assert case.flags == {**twin.flags, "delay": dilation.LINK_DELAY_MS}
        assert case.factors == twin.factors
        assert "--delay=1 " in case.configuration(2, 1, "8").command()


def test_the_dilated_collapse_runs_at_the_smallest_factor_that_fits() -> None:
    # 31 nodes of one virtual CPU and the clients' one: 32 on 1.8 cores.
    assert dilation_for(31, 1, 1) == 18
    dilated = [c for c in collapse_configurations() if c.flags.get("vcpus") == "1"]
    assert [(c.flags["nodes"], c.flags["dilation"]) for c in dilated] == [
        ("4", "3"),
        ("16", "10"),
        ("31", "18"),
    ]


def test_every_gate_case_fits_this_machine_undilated() -> None:
    """The reference of every case is a run at K = 1: its nodes and clients fit two cores with
    the harness's room, at every factor the case runs."""
    for case in dilation.CASES:
        for factor in case.factors:
            flags = case.configuration(factor, 1, dilation.DURATION).flags
            fit = Fit(
                int(flags["nodes"]),
                float(flags["vcpus"]),
                float(flags["client_vcpus"]),
                factor,
                dilation.MACHINE_CORES,
            )
            assert fit.fits, (case.name, factor, fit.refusal())


def test_one_node_of_one_core_gets_the_clients_the_machine_has_left() -> None:
    (one_node,) = [c for c in dilation.CASES if c.flags["nodes"] == "1"]
    flags = one_node.configuration(1, 1, dilation.DURATION).flags
    assert flags["client_vcpus"] == dilation.ONE_NODE_CLIENT_VCPUS
    others = [c.configuration(2, 1, "8").flags["client_vcpus"] for c in dilation.CASES]
    assert others.count(dilation.CLIENT_VCPUS) == len(dilation.CASES) - 1


def _run(asked: int, tps: float, **hops: float) -> SimpleNamespace:
    """A stand-in summary: the rate asked, what it delivered, and the p50 of each hop (the last
    one, as a summary's is, the whole path)."""
    path = [
        Hop(*name.split("_to_"), LatencyStats(100, p50, p50, p50)) for name, p50 in hops.items()
    ]
    whole = Hop("send", "commit", LatencyStats(100, 1.0, sum(hops.values()), 1.0))
    consensus = SimpleNamespace(consensus=True)
    return SimpleNamespace(
        pipeline=consensus, config={"rate": asked}, tps=tps, hops=(*path, whole), resources=None
    )


@pytest.fixture
def delivered_is_tps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dilation, "MEASURES", {"x": (lambda run: run.tps, 0)})
    monkeypatch.setattr(dilation, "delivered", lambda run: run.tps)
    monkeypatch.setattr(dilation, "held_back", lambda run: getattr(run, "held", None))


@pytest.mark.usefixtures("delivered_is_tps")
def test_a_dilated_run_that_delivered_all_it_was_asked_is_named_unsaturated() -> None:
    runs = {
        1: [_run(1000, 800.0), _run(1000, 820.0)],
        2: [_run(1000, 1000.0), _run(1000, 995.0)],
        4: [_run(1000, 850.0)],
    }
    assert unsaturated_factors(runs) == [2]
    (said, *_) = diagnosis(runs)
    assert said.startswith("At K = 2 the runs delivered all that was asked")
    # Kept up undilated as well: nothing to say of it, though it delivered a hair less.
    assert unsaturated_factors({1: [_run(1000, 989.0)], 2: [_run(1000, 998.0)]}) == []
    # Delivered all that was asked only because the clients were held back: not kept up.
    held = _run(1000, 1000.0)
    held.held = 0.2
    assert unsaturated_factors({1: [_run(1000, 800.0)], 2: [held]}) == []


@pytest.mark.usefixtures("delivered_is_tps")
def test_the_largest_missing_factor_names_the_hop_that_moved_most() -> None:
    runs = {
        1: [_run(1000, 800.0, send_to_receive=1.0, seal_to_quorum=10.0)],
        2: [_run(1000, 790.0, send_to_receive=2.0, seal_to_quorum=11.0)],
        8: [_run(1000, 500.0, send_to_receive=40.0, seal_to_quorum=12.0)],
    }
    assert moved_hop(runs, 8) == ("send → receive", 1.0, 40.0)
    assert diagnosis(runs) == [
        "At K = 8, the hop whose p50 grew most against the undilated runs is send → receive:"
        " 1.0 ms undilated, 40.0 ms (dilated time)."
    ]
    # The whole path is not a hop along it; hops below a millisecond either side are left out.
    assert moved_hop({1: [_run(1, 1.0, a_to_b=0.2)], 2: [_run(1, 1.0, a_to_b=0.9)]}, 2) is None


@pytest.mark.usefixtures("delivered_is_tps")
def test_a_hop_that_shrank_with_k_is_named_as_such() -> None:
    # Links of 1 ms: undilated, each took a millisecond more (a real-time constant).
    runs = {
        1: [_run(1000, 1000.0, seal_to_quorum=5.0, quorum_to_commit=20.0)],
        8: [_run(1000, 850.0, seal_to_quorum=3.0, quorum_to_commit=10.0)],
    }
    assert moved_hop(runs, 8) == ("quorum → commit", 20.0, 10.0)
    assert diagnosis(runs)[-1] == (
        "At K = 8, the hop whose p50 shrank most against the undilated runs is quorum → commit:"
        " 20.0 ms undilated, 10.0 ms (dilated time)."
    )


def _budgeted(tps: float, used: float, budget: float | None = 0.4) -> SimpleNamespace:
    """A stand-in summary whose nodes used `used` cores of a `budget` each."""
    resources = SimpleNamespace(nodes=SimpleNamespace(cpu_cores=used), node_cpus=budget)
    consensus = SimpleNamespace(consensus=False)
    return SimpleNamespace(tps=tps, resources=resources, pipeline=consensus, hops=())


@pytest.mark.usefixtures("delivered_is_tps")
def test_undilated_runs_short_of_their_cpu_budget_are_named() -> None:
    runs = {
        1: [_budgeted(600.0, 0.30), _budgeted(610.0, 0.28)],
        2: [_budgeted(790.0, 0.39)],
        4: [_budgeted(800.0, 0.38), _budgeted(790.0, 0.40)],
    }
    assert dilation.budget_shortfall(runs) == pytest.approx((0.725, 0.975))
    (said,) = diagnosis(runs)
    assert said.startswith("Undilated, the nodes used 72% of their CPU budget")
    assert "dilated, 98%" in said
    # Within the gap, or without a budget, nothing is said.
    close = {1: [_budgeted(1.0, 0.36)], 2: [_budgeted(1.0, 0.39)]}
    assert dilation.budget_shortfall(close) is None
    unbudgeted = {1: [_budgeted(1.0, 0.2, None)], 2: [_budgeted(1.0, 0.4, None)]}
    assert dilation.budget_shortfall(unbudgeted) is None


def test_the_round_trip_over_two_links_is_shown_per_k() -> None:
    runs = {
        1: [_run(1000, 1000.0, seal_to_quorum=5.0), _run(1000, 1000.0, seal_to_quorum=5.0)],
        4: [_run(1000, 1000.0, seal_to_quorum=3.0)],
    }
    assert round_trip_line(runs) == (
        "The hop seal → quorum (a batch out to the peers and their acks back: two links, 2 ms of"
        " delay asked), p50 median of the runs in dilated time: 5.0 ms at K = 1, 3.0 ms at"
        " K = 4."
    )
    assert round_trip_line({1: [_run(1000, 1000.0, send_to_receive=1.0)]}) is None


def _budget_logs(directory: Path, throttled: dict[str, tuple[int, int]]) -> SimpleNamespace:
    """A stand-in summary whose logs hold a `cpu-budget.json` of (periods, throttled) a group."""
    directory.mkdir(parents=True)
    groups = {name: {"nr_periods": p, "nr_throttled": t} for name, (p, t) in throttled.items()}
    (directory / "cpu-budget.json").write_text(json.dumps({"groups": groups}))
    return SimpleNamespace(config={"logs": str(directory)}, readings={})


def test_how_often_nodes_used_their_quota_up_is_read_from_the_runs_cpu_budget(
    tmp_path: Path,
) -> None:
    # The clients' group is not a node's; node shares are averaged.
    undilated = _budget_logs(
        tmp_path / "k1", {"node-0": (100, 4), "node-1": (100, 6), "clients": (10, 10)}
    )
    assert dilation_lines.throttled_from_logs(undilated) == pytest.approx(0.05)
    dilated = _budget_logs(tmp_path / "k8", {"node-0": (200, 40), "node-1": (100, 20)})
    # Read once into the summary's readings, the logs are not needed again.
    kept = SimpleNamespace(config={}, readings=dilation_lines.read_logs(dilated))
    assert dilation_lines.throttled_share(kept) == pytest.approx(0.2)
    assert dilation_lines.throttled_line({1: [undilated], 8: [kept]}) == (
        "Periods of the quota in which a node used it up (share of the CFS periods in which it"
        " ran, mean over nodes, median of the runs; `cpu-budget.json` beside each run's logs):"
        " 5% at K = 1, 20% at K = 8."
    )
    # A run without budgets (or its logs gone) has no line.
    gone = SimpleNamespace(config={"logs": str(tmp_path / "gone")}, readings={})
    assert dilation_lines.throttled_line({1: [gone]}) is None
