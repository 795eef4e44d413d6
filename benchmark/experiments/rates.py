"""The per-rate table of a sweep, as the modes and workloads pages print it: each rate asked, how
many runs it had, what they delivered (median (min-max)) and whether they kept up, by the rule of
`measures.py` (the capacity's: a rate is kept up when every one of its runs was)."""

from __future__ import annotations

from collections.abc import Sequence

from ..analysis.run_summary import Summary
from .measures import Measure, asked, by_rate, delivered, fmt, kept_up_at, spread

AS_FAST = "as fast as it can"


def kept_up_cell(runs: Sequence[Summary], rate: int) -> str:
    """`yes (3 of 3)`: whether the rate was kept up, and by how many of its runs each alone."""
    kept = sum(kept_up_at([run], rate) for run in runs)
    return f"{'yes' if kept_up_at(runs, rate) else 'no'} ({kept} of {len(runs)})"


def rate_rows(
    label: str, summaries: Sequence[Summary], extra: Sequence[Measure] = ()
) -> list[list[str]]:
    """A row per rate asked: label, rate, runs, delivered median (min-max), each of `extra`'s
    median (min-max), kept up; a run that asks no rate (`movevm`) is one row of its own."""
    rows = []
    for rate, runs in by_rate(summaries).items():
        rated = all(asked(s) is not None for s in runs)
        rows.append(
            [
                label,
                fmt(rate) if rated else AS_FAST,
                str(len(runs)),
                spread([delivered(s) for s in runs]),
                *[spread([measure(s) for s in runs]) for measure in extra],
                kept_up_cell(runs, rate) if rated else "-",
            ]
        )
    return rows
