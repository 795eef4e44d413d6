"""The gate's rule (`experiments/dilation.py`): a K agrees when each figure's median is within
the tolerance of the undilated median; a K passes when every configuration run at it agrees at it
and at every smaller K. Figures here are plain numbers standing for runs."""

from __future__ import annotations

import pytest

from benchmark.experiments import dilation
from benchmark.experiments.dilation import (
    collapse_configurations,
    dilation_for,
    misses,
    passed_factors,
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
