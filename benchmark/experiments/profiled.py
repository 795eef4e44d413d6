"""A configuration's run at its capacity, profiled (`Configuration.profile_at_capacity`): after its
sweep and search, one more run of the sweep's last point at the capacity found, with `--profile`
(a flame graph and folded stacks per process in its logs, `analysis/resources/profiles.py`).

It is run apart from the sweep and kept apart from its runs (`Outcome.profiled`): sampling 99
times a second and writing the flame graph at the end cost the nodes CPU, so a profiled run
counts towards no capacity, and the capacity's figures are the unprofiled runs'. A sweep that
kept up nowhere has no capacity, and no profiled run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..config import BenchParameters
from ..runners.sweep import PointRunner
from .experiment import Outcome
from .measures import capacity


def capacity_point(outcome: Outcome, last: BenchParameters) -> BenchParameters | None:
    """`last` (the sweep's last point) at the capacity of `outcome`'s runs, once; as it is for a
    run with no rate to keep up with (`movevm`); None when no rate was kept up."""
    found = capacity(outcome.summaries)
    if found is None:
        return None
    if found.rate is None:
        return replace(last, runs=1)
    return replace(last, rate=found.rate, runs=1)


def profile_at_capacity(
    profiling: Callable[[], PointRunner], outcome: Outcome, last: BenchParameters
) -> None:
    """Runs `outcome`'s capacity once more on the runner `profiling` makes (one that profiles),
    into `outcome.profiled`."""
    point = capacity_point(outcome, last)
    if point is not None:
        outcome.profiled = profiling().run(point)
