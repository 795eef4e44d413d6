"""The capacity search (`experiments/search.py`): on a system of known capacity, it narrows a
coarse sweep to a rate every one of five runs kept up with, next to one that did not; a lucky
rate is found out; a sweep it cannot narrow says why."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

import pytest

from benchmark.analysis.run_summary import Summary
from benchmark.analysis.stats import LatencyStats
from benchmark.experiments.measures import Rule, by_rate, capacity
from benchmark.experiments.search import Search, all_kept_up, settle

from .test_experiment_tables import shaped


class System:
    """Delivers min(rate, capacity), except for the runs `luck` lets through above it."""

    def __init__(self, base: Summary, capacity: int, luck: Iterator[bool] | None = None) -> None:
        self.base, self.capacity = base, capacity
        self.luck = luck or itertools.repeat(False)
        self.asked: list[tuple[int, int]] = []

    def run(self, rate: int, runs: int) -> list[Summary]:
        self.asked.append((rate, runs))
        return [self.one(rate) for _ in range(runs)]

    def one(self, rate: int) -> Summary:
        lucky = next(self.luck)
        delivered = rate if lucky or rate <= self.capacity else self.capacity
        return shaped(self.base, rate=rate, delivered=delivered)


def test_a_coarse_sweep_is_narrowed_to_five_runs_that_all_kept_up(base: Summary) -> None:
    system = System(base, capacity=23_500)
    coarse = [system.one(r) for r in (10_000, 20_000, 30_000, 40_000) for _ in range(3)]
    settled = settle(coarse, system.run, Search())
    assert settled.rate is not None
    # Within 5 % below the true capacity (the 95 % rule lets a rate up to capacity / 0.95 pass).
    assert 23_500 * 0.95 <= settled.rate <= 23_500 / 0.95
    runs = by_rate(coarse)
    assert len(runs[settled.rate]) >= 5
    rule = Rule.of(coarse)
    assert all_kept_up(runs[settled.rate], settled.rate, rule)
    above = [r for r in runs if r > settled.rate and not all_kept_up(runs[r], r, rule)]
    assert min(above) - settled.rate <= 0.05 * settled.rate
    assert all(rate % 80 == 0 for rate, _ in system.asked)
    # The page's capacity is the search's.
    found = capacity(coarse)
    assert found is not None
    assert found.rate == settled.rate


def test_a_rate_that_kept_up_by_luck_is_found_out(base: Summary) -> None:
    # The coarse sweep's three runs at 24,000 all got through; most later runs above 20,000 don't.
    luck = itertools.chain([True] * 3, itertools.repeat(False))
    system = System(base, capacity=20_000, luck=luck)
    coarse = [system.one(24_000) for _ in range(3)]
    coarse += [system.one(r) for r in (16_000, 32_000) for _ in range(3)]
    settled = settle(coarse, system.run, Search())
    assert settled.rate is not None
    assert settled.rate <= 20_000 / 0.95


def test_a_sweep_whose_top_kept_up_is_extended_until_a_rate_falls_short(base: Summary) -> None:
    system = System(base, capacity=33_000)
    coarse = [system.one(r) for r in (10_000, 20_000)]
    settled = settle(coarse, system.run, Search())
    assert settled.rate is not None
    assert 33_000 * 0.95 <= settled.rate <= 33_000 / 0.95
    # Upwards a sweep's step (10,000) at a time, a run each: 30,000 kept up, 40,000 did not.
    assert system.asked[:2] == [(30_000, 1), (40_000, 1)]
    assert len(by_rate(coarse)[settled.rate]) >= 5


@pytest.mark.parametrize(
    ("rates", "capacity", "why"),
    [
        ((10_000, 20_000), 10_000_000, "kept up: raise the sweep"),
        ((40_000, 50_000), 30_000, "no rate kept up in every run"),
    ],
)
def test_a_sweep_that_cannot_be_settled_says_why(
    base: Summary, rates: tuple[int, ...], capacity: int, why: str
) -> None:
    system = System(base, capacity=capacity)
    coarse = [system.one(r) for r in rates for _ in range(3)]
    settled = settle(coarse, system.run, Search(max_probes=3))
    assert settled.rate is None
    assert why in settled.why
    # Only a sweep whose top kept up is extended (a run at each of `max_probes` rates above).
    assert system.asked == ([(30_000, 1), (40_000, 1), (50_000, 1)] if capacity > 50_000 else [])


def test_a_rate_above_the_edge_costs_the_search_one_run(base: Summary) -> None:
    system = System(base, capacity=23_500)
    coarse = [system.one(r) for r in (10_000, 20_000, 30_000, 40_000) for _ in range(3)]
    settled = settle(coarse, system.run, Search())
    assert settled.rate is not None
    asked: dict[int, int] = {}
    for rate, runs in system.asked:
        asked[rate] = asked.get(rate, 0) + runs
    # Runs go one at a time: the first that falls short ends its rate.
    assert all(runs == 1 for _, runs in system.asked)
    assert asked[settled.rate] >= 1
    assert len(by_rate(coarse)[settled.rate]) >= 5
    above = [rate for rate in asked if rate > 23_500 / 0.95]
    assert above, "the search asked no rate above the edge"
    assert all(asked[rate] == 1 for rate in above)


def test_the_search_holds_every_run_to_the_coarse_sweeps_unloaded_p50(base: Summary) -> None:
    # Every rate is delivered in full, but past 23,500 tx/s the p50 is four times the lowest
    # rate's: those rates did not keep up, and the search settles below them.
    def one(rate: int) -> Summary:
        run = shaped(base, rate=rate, delivered=rate)
        p50 = 100.0 if rate <= 23_500 else 400.0
        return replace(run, end_to_end=replace(run.end_to_end, latency=LatencyStats.of([p50])))

    def run(rate: int, runs: int) -> list[Summary]:
        return [one(rate) for _ in range(runs)]

    coarse = [one(r) for r in (10_000, 20_000, 30_000, 40_000) for _ in range(3)]
    settled = settle(coarse, run, Search())
    assert settled.rate is not None
    assert 23_500 * 0.95 <= settled.rate <= 23_500
    found = capacity(coarse)
    assert found is not None
    assert found.rate == settled.rate
