"""The cost model (`analysis/stages/model.py`): what it fits from points made by known terms,
what it leaves out when the points cannot tell a term apart, and what bounds its predictions."""

from __future__ import annotations

import pytest

from benchmark.analysis.stages.model import BANDWIDTH, CostModel, Line, Point, fit
from benchmark.analysis.stages.projection import CPU_BOUND, project


def made_by(
    nodes: int, cores: float, *, c0: float, c1: float, f0: float, f1: float, **extra: object
) -> Point:
    """The point a node of `cores` cores reaches when it costs c(n) per transaction and F(n) per
    second: it uses all its cores."""
    per_tx, per_second = c0 + c1 * (nodes - 1), f0 + f1 * (nodes - 1)
    tps = (cores * 1e6 - per_second) / per_tx
    return Point(
        nodes=nodes,
        cores=cores,
        tps=tps,
        node_cores_used=cores,
        us_per_tx={"consensus": per_tx},
        **extra,  # type: ignore[arg-type]
    )


TERMS = {"c0": 15.0, "c1": 0.2, "f0": 20_000.0, "f1": 500.0}


def test_the_four_terms_are_recovered_and_predict_a_point_not_fitted() -> None:
    fitted = [
        made_by(n, k, **TERMS) for n, k in ((4, 0.05), (10, 0.05), (22, 0.05), (4, 0.2), (4, 0.4))
    ]
    model = fit(fitted)
    assert model.per_tx.fixed == pytest.approx(15.0)
    assert model.per_tx.per_member == pytest.approx(0.2)
    assert model.per_second.fixed == pytest.approx(20_000.0)
    assert model.per_second.per_member == pytest.approx(500.0)
    unseen = made_by(31, 0.05, **TERMS)
    prediction = model.predict(31, 0.05)
    assert prediction is not None
    assert prediction.tps == pytest.approx(unseen.tps)
    assert prediction.bound == CPU_BOUND
    assert prediction.distance == "n +9"


def test_one_committee_size_fits_no_growth_and_can_borrow_one() -> None:
    points = [made_by(4, k, **TERMS) for k in (0.1, 0.2)]
    model = fit(points)
    assert model.per_tx.per_member == 0
    assert model.per_second.per_member == 0
    # Two budgets tell the cost per transaction from the cost per second.
    assert model.per_second.fixed == pytest.approx(20_000 + 3 * 500)
    lender = CostModel(
        per_tx=Line(1.0, 0.2),
        per_second=Line(5_000.0, 500.0),
        stages={},
        sent_bytes=None,
        received_bytes=None,
        fitted=((4, 0.1),),
    )
    grown = model.with_growth_of(lender, 4)
    # Unchanged where it was measured, growing as the lender does elsewhere.
    assert grown.per_tx.at(4) == pytest.approx(model.per_tx.at(4))
    assert grown.per_second.at(4) == pytest.approx(model.per_second.at(4))
    prediction = grown.predict(10, 0.1)
    assert prediction is not None
    assert prediction.tps == pytest.approx(made_by(10, 0.1, **TERMS).tps)


def test_points_that_cannot_tell_a_fixed_cost_apart_fit_none() -> None:
    # One point: only the cost per transaction, what the node used over what it delivered.
    (point,) = [made_by(4, 0.2, **TERMS)]
    model = fit([point])
    assert model.per_second == Line(0.0, 0.0)
    assert model.per_tx.fixed == pytest.approx(0.2e6 / point.tps)
    prediction = model.predict(4, 0.2)
    assert prediction is not None
    assert prediction.tps == pytest.approx(point.tps)
    assert prediction.distance == "a fitted point"
    far = model.predict(4, 0.8)
    assert far is not None
    assert far.distance == "cores x4"


def test_a_negative_fixed_cost_is_noise_and_is_left_out() -> None:
    # The second point got less per core than the first: fitted, F would come out below zero.
    points = [
        Point(4, 0.1, tps=5_000, node_cores_used=0.1, us_per_tx={}),
        Point(4, 0.2, tps=9_000, node_cores_used=0.2, us_per_tx={}),
    ]
    model = fit(points)
    assert model.per_second == Line(0.0, 0.0)
    assert model.per_tx.fixed > 0


def test_a_one_thread_stage_binds_before_the_cores_do() -> None:
    point = Point(
        1, 2.0, tps=100_000, node_cores_used=2.0, us_per_tx={"executor": 12.0, "verifier": 8.0}
    )
    model = fit([point])
    prediction = model.predict(1, 8.0)
    assert prediction is not None
    # 8 cores allow 400,000 tx/s at 20 µs each; one executor thread at 12 µs allows 83,333.
    assert prediction.bound == "executor"
    assert prediction.tps == pytest.approx(1e6 / 12.0)


def test_a_link_rate_caps_what_the_cores_allow() -> None:
    point = made_by(4, 0.4, **TERMS, sent_bytes_per_tx=200.0, received_bytes_per_tx=250.0)
    model = fit([point])
    # 10 Mbit/s moves 1.25 MB/s: 5,000 transactions of 250 bytes.
    prediction = model.predict(4, 0.4, link_mbit=10.0)
    assert prediction is not None
    assert (prediction.bound, prediction.tps) == (BANDWIDTH, pytest.approx(5_000))


def test_a_budget_below_one_core_shares_it_between_the_stages() -> None:
    projection = project({"consensus": 5.0, "verifier": 15.0}, 0.5)
    assert projection is not None
    assert projection.tps == pytest.approx(0.5e6 / 20.0)
    assert projection.cpu_bound
    assert {s.stage: s.max_cores for s in projection.stages} == {"consensus": 0.5, "verifier": 0.5}


def test_a_cost_that_falls_as_the_committee_grows_is_left_out() -> None:
    # Per-transaction cost measured lower at 10 nodes than at 4: noise, not a saving per member.
    points = [
        Point(4, 0.1, tps=5_000, node_cores_used=0.1, us_per_tx={}),
        Point(10, 0.1, tps=5_400, node_cores_used=0.1, us_per_tx={}),
        Point(4, 0.2, tps=10_500, node_cores_used=0.2, us_per_tx={}),
    ]
    model = fit(points)
    assert model.per_tx.per_member >= 0
    assert model.per_second.per_member >= 0
    assert model.per_tx.fixed > 0
