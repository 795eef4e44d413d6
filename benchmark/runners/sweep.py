"""A sweep: every (committee size, input rate) point of a request, run `runs` times each, the same
way for local and remote runs.

Every point is built (and so validated) before anything runs, and every point is checked by the
runner (ports, hosts) before the first run: a mistake in the last rate of a sweep should cost
seconds, not the hour the earlier rates take. A sweep of more than one point ends with the table
of `report/sweep_table.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TextIO

from ..analysis.run_summary import Summary
from ..config import BenchParameters
from ..report.sweep_table import render_sweep


class PointRunner(Protocol):
    """What runs a sweep's points: a `plan.RunPlan` over this machine (`LocalBench`) or the hosts
    (`RemoteBench`)."""

    def check(self, bench: BenchParameters) -> None:
        """Raise if `bench` cannot run here; called for every point before the first run."""

    def run(self, bench: BenchParameters) -> list[Summary]:
        """Run `bench` `bench.runs` times; every run prints and saves its summary."""


def run_sweep(
    points: Sequence[BenchParameters],
    runner: PointRunner,
    out: TextIO,
    before_runs: Callable[[], None] | None = None,
) -> list[Summary]:
    """Check every point, then `before_runs` (a build), then run the points in order."""
    for point in points:
        runner.check(point)
    if before_runs is not None:
        before_runs()
    summaries: list[Summary] = []
    for point in points:
        summaries += runner.run(point)
    if len(points) > 1:
        out.write(render_sweep(summaries))
        out.flush()
    return summaries
