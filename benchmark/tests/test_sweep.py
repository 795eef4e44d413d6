"""The sweep runner shared by `fab local` and `fab remote`: check every point, then run them."""

from __future__ import annotations

from io import StringIO

import pytest

from benchmark.analysis.run_summary import Bottleneck, LatencyStats, Summary, Throughput, Window
from benchmark.config import BenchParameters, ConfigError
from benchmark.flags import sweep_points
from benchmark.runners.sweep import run_sweep

from .conftest import described


def _summary(bench: BenchParameters) -> Summary:
    return Summary(
        config=bench.to_dict(),
        pipeline=described(bench.mode),
        window=Window(0, 10_000, 1_000),
        consensus=None,
        end_to_end=Throughput(float(bench.rate), None, LatencyStats(0, None, None, None)),
        clients=None,
        stages=(),
        bottleneck=Bottleneck("verifier", "falls behind", "", {}),
    )


class RecordingRunner:
    """Records the order of checks and runs; refuses rates above `highest`."""

    def __init__(self, highest: int = 10**9) -> None:
        self.highest = highest
        self.events: list[str] = []

    def check(self, bench: BenchParameters) -> None:
        self.events.append(f"check {bench.rate}")
        if bench.rate > self.highest:
            raise ConfigError(f"rate {bench.rate} too high here")

    def run(self, bench: BenchParameters) -> list[Summary]:
        self.events.append(f"run {bench.rate}")
        return [_summary(bench) for _ in range(bench.runs)]


def test_every_point_is_checked_then_built_then_run() -> None:
    runner = RecordingRunner()
    out = StringIO()
    points = sweep_points(BenchParameters(runs=2), [4], [1_000, 2_000])
    summaries = run_sweep(points, runner, out, before_runs=lambda: runner.events.append("build"))
    assert runner.events == ["check 1000", "check 2000", "build", "run 1000", "run 2000"]
    assert len(summaries) == 4
    assert "SWEEP" in out.getvalue()


def test_a_bad_last_point_stops_the_sweep_before_the_first_run() -> None:
    runner = RecordingRunner(highest=1_500)
    points = sweep_points(BenchParameters(), [4], [1_000, 2_000])
    with pytest.raises(ConfigError, match="rate 2000 too high"):
        run_sweep(points, runner, StringIO(), before_runs=lambda: runner.events.append("build"))
    assert runner.events == ["check 1000", "check 2000"]


def test_one_point_prints_no_sweep_table() -> None:
    out = StringIO()
    run_sweep(sweep_points(BenchParameters(), [4], [1_000]), RecordingRunner(), out)
    assert out.getvalue() == ""


def test_movevm_has_nothing_to_sweep() -> None:
    assert len(sweep_points(BenchParameters(mode="movevm"), [4], [1_000])) == 1
    with pytest.raises(ConfigError, match="movevm has no input rate to sweep"):
        sweep_points(BenchParameters(mode="movevm"), [4], [1_000, 2_000])
