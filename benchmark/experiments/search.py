"""Settling a capacity: after a configuration's coarse sweep of rates, narrow the step at the edge
until the capacity holds in every run of at least `Search.runs` and the next rate up, closer than
`Search.step` of it, did not keep up.

The rule, in one sentence: the capacity is the highest rate asked at which every one of at least
five runs kept up (`measures.CAPACITY_RULE`), with a rate at most 5 % above it (or one step of 80)
that did not. Every run is held to the unloaded p50 of the coarse sweep (its lowest rate's).

The search bisects between the highest rate whose runs all kept up (`low`) and the lowest rate
above it that did not keep up in median (`high`); each rate it asks runs `Search.runs` times. A
rate whose runs did not all keep up becomes the new `high`; one whose runs all did, the new
`low`. When the gap is small enough, `low` gets runs added until it has `Search.runs` of them; if
one of those falls short, `low` was luck, and the search goes on below it. A sweep whose highest
rate kept up is first extended upwards, a run at each rate a sweep's step above the last, until
one falls short; one whose lowest rate did not keep up cannot be settled: it says so and stops.

A rate's runs go one at a time and stop at the first that falls short: that run alone decides
that the rate does not hold, so the runs after it would only cost time (above the edge, most of
what a search asks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..analysis.run_summary import Summary
from .measures import Rule, by_rate

RULE = (
    "the capacity is the highest rate asked at which every one of at least five runs kept up,"
    " with a rate at most 5 % above it (or one step of 80) that did not"
)

# Runs the points of a rate: (rate, runs) -> their summaries.
RunRate = Callable[[int, int], list[Summary]]


@dataclass(frozen=True)
class Search:
    runs: int = 5
    # Stop once the gap between low and high is at most this share of low.
    step: float = 0.05
    # Rates are multiples of this: a client sends its share in 20 bursts a second, so a rate
    # that is a multiple of 80 splits evenly over 4 clients.
    multiple: int = 80
    # A bound on the rates the search asks, whatever happens.
    max_probes: int = 12


def all_kept_up(runs: Sequence[Summary], rate: int, rule: Rule) -> bool:
    return bool(runs) and all(rule.kept_up(s, rate) for s in runs)


def median_kept_up(runs: Sequence[Summary], rate: int, rule: Rule) -> bool:
    """At least half the runs kept up."""
    return bool(runs) and 2 * sum(rule.kept_up(s, rate) for s in runs) >= len(runs)


@dataclass(frozen=True)
class Settled:
    """What the search found: the settled capacity, or why none."""

    rate: int | None
    why: str


def settle(summaries: list[Summary], run: RunRate, search: Search) -> Settled:
    """Narrows the coarse sweep in `summaries` (appending every run it makes to it)."""
    rates = by_rate(summaries)
    if not rates:
        return Settled(None, "no run")
    rule = Rule.of(summaries)
    lows = [r for r, runs in rates.items() if all_kept_up(runs, r, rule)]
    if not lows:
        return Settled(None, f"no rate kept up in every run (the lowest {min(rates):,})")
    low = max(lows)
    highs = [r for r, runs in rates.items() if r > low and not median_kept_up(runs, r, rule)]
    if highs:
        high = min(highs)
    else:
        found = _above_the_sweep(summaries, run, search, low, rule)
        if found is None:
            top = max(by_rate(summaries))
            return Settled(None, f"the highest rate asked, {top:,}, kept up: raise the sweep")
        low, high = found
    for _ in range(search.max_probes):
        if high - low <= max(search.step * low, search.multiple):
            missing = search.runs - len(by_rate(summaries).get(low, []))
            if missing > 0:
                summaries += _until_one_falls_short(run, low, missing, rule)
            if all_kept_up(by_rate(summaries)[low], low, rule):
                return Settled(low, f"{len(by_rate(summaries)[low])} runs at it all kept up")
            # `low` was luck: look below it.
            high = low
            below = [
                r
                for r, runs in by_rate(summaries).items()
                if r < low and all_kept_up(runs, r, rule)
            ]
            if not below:
                return Settled(None, f"no rate below {low:,} kept up in every run")
            low = max(below)
            continue
        middle = _round(low + (high - low) / 2, search.multiple)
        runs = _until_one_falls_short(run, middle, search.runs, rule)
        summaries += runs
        if all_kept_up(runs, middle, rule):
            low = middle
        else:
            high = middle
    return Settled(None, f"not settled after {search.max_probes} rates asked")


def _above_the_sweep(
    summaries: list[Summary], run: RunRate, search: Search, low: int, rule: Rule
) -> tuple[int, int] | None:
    """When the sweep's highest rate kept up: one run at each rate above it, a sweep's step
    apart (the gap between its two highest rates, or `low` itself), until one falls short;
    returns (the last rate that kept up, the one that did not), or `None` after
    `search.max_probes` rates that all kept up."""
    asked = sorted(by_rate(summaries))
    step = asked[-1] - asked[-2] if len(asked) > 1 else low
    step = max(step, search.multiple)
    for _ in range(search.max_probes):
        rate = _round(low + step, search.multiple)
        runs = run(rate, 1)
        summaries += runs
        if not all_kept_up(runs, rate, rule):
            return low, rate
        low = rate
    return None


def _until_one_falls_short(run: RunRate, rate: int, runs: int, rule: Rule) -> list[Summary]:
    """Up to `runs` runs at `rate`, one at a time, stopping after the first that did not keep
    up."""
    done: list[Summary] = []
    for _ in range(runs):
        one = run(rate, 1)
        done += one
        if not all_kept_up(one, rate, rule):
            break
    return done


def _round(rate: float, multiple: int) -> int:
    return int(rate // multiple) * multiple
