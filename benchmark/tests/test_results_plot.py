"""Saved results, their aggregation over runs, and the graphs drawn from them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis import results
from benchmark.analysis.metrics import load_run
from benchmark.analysis.run_summary import LatencyStats, Summary, Throughput, summarize
from benchmark.plots.graphs import PlotError, best_under_cap, plot_all


@pytest.fixture(scope="module")
def base_summary(fixtures: Path) -> Summary:
    config = {"mode": "hotcrypto", "nodes": 4, "faults": 0, "rate": 1000, "tx_size": 512}
    return summarize(load_run(fixtures / "hotcrypto"), config)


def _variant(base: Summary, *, nodes: int, rate: int, tps: float, p50: float, run: int) -> Summary:
    latency = LatencyStats(10, p50, p50, p50 * 2)
    return replace(
        base,
        config={**base.config, "nodes": nodes, "rate": rate, "run": run},
        end_to_end=Throughput(tps, tps * 200, latency),
    )


def _save_grid(base: Summary, directory: Path) -> None:
    for nodes in (4, 10):
        for rate in (1_000, 2_000, 4_000):
            for run in range(2):
                tps = min(rate, 2_500 if nodes == 4 else 1_500) + 100 * run
                p50 = 500.0 if rate < 4_000 else 3_000.0
                results.save(
                    _variant(base, nodes=nodes, rate=rate, tps=tps, p50=p50, run=run),
                    directory,
                    "t",
                )


def test_save_and_load_round_trip(base_summary: Summary, tmp_path: Path) -> None:
    path = results.save(base_summary, tmp_path, stamp="20240101-000000")
    assert path.name == "hotcrypto-n4-f0-r1000-20240101-000000-run0.json"
    again = results.save(base_summary, tmp_path, stamp="20240101-000000")
    assert again != path
    (tmp_path / "junk.json").write_text("{not json")
    loaded = results.load(tmp_path)
    assert len(loaded) == 2
    assert loaded[0]["end_to_end"]["tps"] == pytest.approx(1700)
    assert results.load(tmp_path, mode="hotstuff") == []
    assert json.loads(path.read_text())["version"] == results.RESULT_VERSION


def test_aggregate_mean_and_std_over_runs(base_summary: Summary, tmp_path: Path) -> None:
    _save_grid(base_summary, tmp_path)
    points = results.aggregate(results.load(tmp_path))
    assert len(points) == 6
    point = next(p for p in points if p.nodes == 4 and p.rate == 1_000)
    assert point.runs == 2
    assert point.tps.mean == pytest.approx(1_050)
    assert point.tps.std == pytest.approx(70.71, rel=1e-3)
    assert point.latency_p50.mean == pytest.approx(500)
    assert point.bottlenecks == ("executor", "executor")

    best = best_under_cap(points, 1_000)
    assert best[(4, 0, ("--tx-size=512",))].rate == 2_000  # 4,000 tx/s is faster but over the cap
    assert best[(10, 0, ("--tx-size=512",))].tps.mean == pytest.approx(1_550)


def test_plot_all_writes_png_and_pdf(base_summary: Summary, tmp_path: Path) -> None:
    _save_grid(base_summary, tmp_path / "results")
    files = plot_all(tmp_path / "results", tmp_path / "plots", "hotcrypto", caps=[1_000, 5_000])
    names = sorted(p.name for p in files if p.parent.name != "timelines")  # one per run
    assert names == sorted(
        f"{graph}-hotcrypto.{ext}"
        for graph in ("robustness", "latency", "tps", "batches")
        for ext in ("png", "pdf")
    )
    for path in files:
        assert path.stat().st_size > 1_000
        header = path.read_bytes()[:4]
        assert header in (b"\x89PNG", b"%PDF")
    with pytest.raises(PlotError):
        plot_all(tmp_path / "results", tmp_path / "plots", "hotmove")


def test_plot_draws_a_timeline_per_run(tmp_path: Path) -> None:
    from benchmark.analysis.metrics import load_run  # noqa: PLC0415 - only this test reads logs
    from benchmark.plots.timeline import timeline_figure  # noqa: PLC0415

    from .synthetic import write_run  # noqa: PLC0415

    summary = summarize(load_run(write_run(tmp_path / "logs")), {"mode": "hotcrypto", "nodes": 2})
    results.save(summary, tmp_path / "results", stamp="a")
    results.save(summary, tmp_path / "results", stamp="b")
    files = plot_all(tmp_path / "results", tmp_path / "plots", "hotcrypto")
    drawn = sorted(p.name for p in files if p.parent.name == "timelines")
    assert drawn == [
        "timeline-hotcrypto-n2-f0-rNone-a-run0.png",
        "timeline-hotcrypto-n2-f0-rNone-b-run0.png",
    ]
    assert all(p.stat().st_size > 0 for p in files)
    assert timeline_figure({"file": "old.json"}, tmp_path / "plots") is None  # saved before them
