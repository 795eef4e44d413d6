"""The sweep table: medians per (committee size, rate) and the capacity a sweep names."""

from __future__ import annotations

from benchmark.analysis.run_summary import Bottleneck, LatencyStats, Summary, Throughput, Window
from benchmark.analysis.stages.bottleneck import KEEPS_UP_RULE
from benchmark.report.sweep_table import render_sweep, sweep_rows

from .conftest import described


def _run(nodes: int, rate: int, tps: float, p50: float | None, limit: str | None) -> Summary:
    """A run that kept up (`limit` None) or was limited by stage `limit`."""
    bottleneck = (
        Bottleneck("offered load", KEEPS_UP_RULE, "", {})
        if limit is None
        else Bottleneck(limit, "falls behind", "", {})
    )
    return Summary(
        config={"mode": "hotcrypto", "nodes": nodes, "rate": rate},
        pipeline=described("hotcrypto"),
        window=Window(0, 10_000, 1_000),
        consensus=None,
        end_to_end=Throughput(tps, None, LatencyStats(1, p50, p50, p50)),
        clients=None,
        stages=(),
        bottleneck=bottleneck,
    )


def test_rows_take_medians_and_majorities() -> None:
    runs = [
        _run(4, 20_000, 19_900, 100, None),
        _run(4, 20_000, 20_100, 300, None),
        _run(4, 20_000, 19_000, 200, "verifier"),
        _run(4, 30_000, 26_000, 900, "verifier"),
        _run(4, 30_000, 28_000, None, "executor"),
        _run(4, 30_000, 27_000, 1_100, "verifier"),
    ]
    low, high = sweep_rows(runs)
    assert (low.nodes, low.rate, low.runs, low.kept_up) == (4, 20_000, 3, 2)
    assert low.e2e_tps == 19_900
    assert low.p50_ms == 200
    assert low.keeps_up
    assert low.limited_by == "verifier"
    assert (high.rate, high.kept_up, high.e2e_tps) == (30_000, 0, 27_000)
    # The run without latency samples is left out of the median latency.
    assert high.p50_ms == 1_000
    assert not high.keeps_up
    assert high.limited_by == "verifier"


def test_capacity_is_the_highest_rate_kept_up_per_committee() -> None:
    runs = [
        _run(4, 20_000, 20_000, 100, None),
        _run(4, 25_000, 24_900, 150, None),
        _run(4, 30_000, 27_500, 900, "verifier"),
        # A tie is not a majority: this rate did not keep up.
        _run(10, 10_000, 10_000, 100, None),
        _run(10, 10_000, 9_000, 100, "verifier"),
    ]
    text = render_sweep(runs)
    assert "4 nodes: highest input kept up 25,000 tx/s; highest end-to-end 27,500 tx/s " in text
    assert "(at 30,000 tx/s input)" in text
    assert "10 nodes: no input rate kept up; highest end-to-end 9,500 tx/s" in text
    assert "  1/2   verifier" in text
