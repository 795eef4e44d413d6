"""The committee model (`analysis/stages/model.py`): what it fits from points made by known terms,
what it leaves out when the points cannot tell a term apart, what bounds its predictions, and
the machine's speed carried from the fitted runs to a predicted one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmark.analysis.stages.model import (
    BANDWIDTH,
    CPU_BOUND,
    ROUNDS,
    Line,
    Point,
    fit,
)

TERMS = {"c0": 15.0, "c1": 0.2, "f0": 2_000.0, "f1": 50.0, "p0": 4.0, "p1": 0.5}


def made_by(
    nodes: int,
    vcpus: float,
    *,
    one_way_ms: float = 0.0,
    speed: float | None = None,
    slower: float = 1.0,
    **terms: float,
) -> Point:
    """The point n nodes of `vcpus` reach when a transaction costs c(n), a round f(n) and takes
    p(n) + 2d: every node uses all its CPUs (`slower`: CPU costs that much more)."""
    t = {**TERMS, **terms}
    per_tx = (t["c0"] + t["c1"] * (nodes - 1)) * slower
    per_round = (t["f0"] + t["f1"] * (nodes - 1)) * slower
    rounds = 1000 / ((t["p0"] + t["p1"] * (nodes - 1)) * slower + 2 * one_way_ms)
    tps = (vcpus * 1e6 - rounds * per_round) / per_tx
    return Point(
        nodes=nodes,
        vcpus=vcpus,
        tps=tps,
        saturated=True,
        node_cores_used=vcpus,
        rounds_per_s=rounds,
        us_per_tx={"consensus": 2.0 + 0.1 * (nodes - 1)},
        bytes_per_tx=150.0 + 2 * (nodes - 1),
        tx_bytes=200.0,
        bound_bytes=8e6,
        one_way_ms=one_way_ms,
        speed=speed,
    )


def test_the_terms_are_recovered_and_predict_a_point_not_fitted() -> None:
    model = fit([made_by(n, v) for n, v in ((4, 1), (16, 1), (48, 1), (4, 4))])
    assert model.per_tx.fixed == pytest.approx(15.0)
    assert model.per_tx.per_member == pytest.approx(0.2)
    assert model.per_round.fixed == pytest.approx(2_000.0)
    assert model.per_round.per_member == pytest.approx(50.0)
    assert model.round_ms is not None
    assert model.round_ms.at(32) == pytest.approx(4.0 + 0.5 * 31)
    unseen = made_by(32, 1)
    prediction = model.predict(unseen)
    assert prediction is not None
    assert prediction.tps == pytest.approx(unseen.tps)
    assert prediction.bound == CPU_BOUND


def test_links_slow_the_rounds_by_their_latency_there_and_back() -> None:
    model = fit([made_by(n, v) for n, v in ((4, 1), (16, 1), (48, 1), (4, 4))])
    far = made_by(16, 1, one_way_ms=40)
    prediction = model.predict(far)
    assert prediction is not None
    assert prediction.rounds_per_s == pytest.approx(far.rounds_per_s)
    assert prediction.tps == pytest.approx(far.tps)


def test_one_committee_size_fits_no_growth_and_borrows_only_slopes() -> None:
    lender = fit([made_by(n, v) for n, v in ((4, 1), (16, 1), (48, 1), (4, 4))])
    # One size, and CPU that grows with the throughput alone: no f, no growth.
    own = [made_by(4, v, f0=0.0, f1=0.0, c0=20.0) for v in (2.0, 3.0)]
    model = fit(own)
    assert (model.per_tx.per_member, model.per_round.fixed) == (0.0, 0.0)
    grown = model.with_growth_of(lender, 4)
    # Its own points are still predicted as measured: the lender's cost per round is not added
    # to a cost per transaction that already holds it.
    for point in own:
        prediction = grown.predict(point)
        assert prediction is not None
        assert prediction.tps == pytest.approx(point.tps)
    assert grown.per_tx.per_member == pytest.approx(0.2)
    assert grown.per_round == Line(0.0, 0.0)


def test_the_smallest_ceiling_binds_and_is_named() -> None:
    model = fit([made_by(n, v) for n, v in ((4, 1), (16, 1), (48, 1), (4, 4))])
    base = made_by(4, 4)
    # A small uncommitted bound: a round carries less than the CPUs could order.
    bound = model.predict(replace(base, bound_bytes=2_000.0))
    assert bound is not None
    assert bound.bound == ROUNDS
    assert bound.tps == pytest.approx(bound.rounds_per_s * 2_000.0 / 200.0)
    # Slow links: bandwidth.
    slow = model.predict(replace(base, link_mbit=1.0))
    assert slow is not None
    assert slow.bound == BANDWIDTH
    assert slow.tps == pytest.approx(1e6 / 8 / (150.0 + 2 * 3))
    # Many CPUs: consensus, one thread, reaches its own before the node's.
    big = model.predict(replace(base, vcpus=64.0))
    assert big is not None
    assert big.bound == "consensus"
    assert big.tps == pytest.approx(1e6 / 2.3)


def test_a_slower_machine_is_predicted_from_the_probe_beside_its_runs() -> None:
    model = fit([made_by(n, v, speed=100.0) for n, v in ((4, 1), (16, 1), (48, 1), (4, 4))])
    # Measured where the probe read 20 % less: every CPU cost a quarter more.
    slower = made_by(32, 1, speed=80.0, slower=1.25)
    prediction = model.predict(slower)
    assert prediction is not None
    assert prediction.tps == pytest.approx(slower.tps)
    # Without the probe the prediction would be the fitted machine's.
    unscaled = model.predict(made_by(32, 1))
    assert unscaled is not None
    assert unscaled.tps > 1.2 * slower.tps


def test_a_line_is_least_squares_and_a_constant_at_one_size() -> None:
    line = Line.fit([(1, 2.0), (3, 6.0), (5, 10.0)])
    assert (line.fixed, line.per_member) == (pytest.approx(2.0), pytest.approx(2.0))
    assert Line.fit([(4, 1.0), (4, 3.0), (4, 10.0)]) == Line(3.0)
    assert line.through(3, 1.0) == Line(4.0, 1.0)
    with pytest.raises(ValueError, match="at least one point"):
        Line.fit([])
