"""The capacity rule (`measures.CAPACITY_RULE`): a run keeps up when it delivered 95 % of the rate
over a window that cannot overshoot what its clients offered, its clients were held back at most
5 % of the window, and its p50 stayed within 3x the unloaded p50; the report's metric (the peak
mean delivered) beside it; and how two sets of runs compare (apart, overlapping, not settled)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.analysis.stats import LatencyStats
from benchmark.analysis.throughput import WINDOW_NOISE
from benchmark.experiments.measures import (
    APART,
    NOT_SETTLED,
    OVERLAPPING,
    Rule,
    Span,
    capacity,
    capacity_span,
    compare,
    delivered,
    held_back,
    peak_mean,
    processed,
    runs_span,
    valid_asked,
)
from benchmark.report.text import render_summary

from .synthetic import SECONDS, write_run
from .test_experiment_tables import shaped


def at(
    base: Summary, rate: int, delivered: float, *, p50: float = 100.0, held: float = 0.0
) -> Summary:
    """A run asked for `rate` that delivered `delivered`, its p50 and its clients' held-back
    share given."""
    run = shaped(base, rate=rate, delivered=delivered)
    latency = LatencyStats.of([p50] * 10)
    assert run.clients is not None
    return replace(
        run,
        end_to_end=replace(run.end_to_end, latency=latency),
        clients=replace(run.clients, held_back_share=held),
    )


def test_a_run_whose_clients_were_held_back_did_not_keep_up(base: Summary) -> None:
    # At 300 the runs delivered the rate, but only because their clients made up what the nodes
    # had held back: they were held back half of the window.
    runs = [at(base, r, r) for r in (100, 200)] + [at(base, 300, 300, held=0.5)]
    found = capacity(runs)
    assert found is not None
    assert found.rate == 200
    assert Rule.of(runs).failed(runs[-1]) == ["b"]
    # Held back within 5 %: kept up.
    assert capacity([*runs[:2], at(base, 300, 300, held=0.04)]).rate == 300  # type: ignore[union-attr]


def test_a_run_whose_p50_passed_three_times_the_unloaded_did_not_keep_up(base: Summary) -> None:
    runs = [at(base, 100, 100, p50=80.0), at(base, 200, 200, p50=240.0)]
    runs.append(at(base, 300, 300, p50=241.0))
    rule = Rule.of(runs)
    # The unloaded p50 is the lowest rate's.
    assert (rule.unloaded_p50, rule.unloaded_rate) == (80.0, 100)
    assert rule.failed(runs[-1]) == ["c"]
    found = capacity(runs)
    assert found is not None
    assert found.rate == 200
    assert "(c) is p50 ≤ 240 ms" in rule.describe()


def test_a_p50_at_or_below_zero_holds_no_sweep_to_latency(base: Summary) -> None:
    # Processes whose clocks disagree stamp a sample's commit before its send: a negative p50
    # is no latency to hold a sweep to, and three times it would fail every run.
    runs = [at(base, 100, 100, p50=-66.0), at(base, 200, 200, p50=139.0)]
    rule = Rule.of(runs)
    assert rule.unloaded_p50 is None
    assert rule.failed(runs[-1]) == []
    assert "(c) not applied" in rule.describe()
    assert capacity(runs).rate == 200  # type: ignore[union-attr]


def test_a_window_delivers_no_more_than_its_clients_offered_in_it(tmp_path: Path) -> None:
    # The nodes executed nothing for two seconds, then caught up with what had queued: the
    # window (from 1.9 s) sees them drain that backlog on top of what the clients sent in it.
    logs = write_run(tmp_path)
    run = load_run(logs)
    for node in run.nodes:
        for record, second in zip(node.records, SECONDS, strict=True):
            done = max(0, 2500 * (second - 2))
            record["stages"]["executor"].update(items=done, executed=done)
    summary = summarize(run, {"mode": "hotcrypto", "nodes": 2})
    assert summary.clients is not None
    sent = summary.clients.sent_tps
    assert summary.end_to_end.tps > 1.1 * sent  # what the window measured, backlog and all
    assert delivered(summary) == pytest.approx(sent * (1 + WINDOW_NOISE))
    assert processed(summary) == pytest.approx(sent * (1 + WINDOW_NOISE))
    assert "drained a backlog from before the window" in render_summary(summary)


def test_the_clients_held_back_share_is_read_from_their_skipped_bursts(tmp_path: Path) -> None:
    logs = write_run(tmp_path)
    run = load_run(logs)
    # Client 0 skipped one burst in four from the start; client 1 none: 20 due a second each.
    for index, client in enumerate(run.clients):
        for record, second in zip(client.records, SECONDS, strict=True):
            skipped = 5 * second if index == 0 else 0
            record.update(bursts=20 * second - skipped, skipped_bursts=skipped)
    summary = summarize(run, {"mode": "hotcrypto", "nodes": 2})
    assert summary.clients is not None
    assert summary.clients.held_back_share == pytest.approx(5 / 40)
    assert held_back(summary) == pytest.approx(0.125)
    assert "held back 12% of the window (bursts skipped)" in render_summary(summary)


def test_the_peak_mean_is_the_highest_mean_of_any_rate(base: Summary) -> None:
    runs = [at(base, 100, d) for d in (100, 100)] + [at(base, 200, d) for d in (190, 200, 195)]
    runs.append(at(base, 300, 180))
    assert peak_mean(runs) == (200, pytest.approx(195.0))
    assert peak_mean([]) is None


# -- comparing two sets of runs ------------------------------------------------------------------


def test_runs_whose_ranges_do_not_overlap_are_apart() -> None:
    one, four = runs_span([25_076, 24_538, 25_636]), runs_span([28_835, 28_658, 31_376])
    found = compare(one, four)
    assert (found.verdict, found.higher) == (APART, 1)
    assert compare(four, one).higher == 0
    # One run of one side inside the other's range: overlapping.
    assert compare(one, runs_span([28_835, 25_000, 31_376])).verdict == OVERLAPPING


def test_too_few_runs_settle_nothing() -> None:
    found = compare(runs_span([10.0, 11.0]), runs_span([20.0, 21.0, 22.0]))
    assert found.verdict == NOT_SETTLED
    assert "fewer than 3 runs" in found.why
    assert compare(None, runs_span([1.0, 2.0, 3.0])).verdict == NOT_SETTLED


def test_a_capacity_lies_between_it_and_the_next_rate_asked(base: Summary) -> None:
    def sweep(kept: int, rates: tuple[int, ...]) -> list[Summary]:
        return [at(base, r, r if r <= kept else r * 0.8) for r in rates for _ in range(3)]

    one = capacity_span(sweep(24_000, (16_000, 24_000, 28_000, 32_000)))
    assert one == Span(24_000, 28_000, 3, high_excluded=True)
    assert one.text() == "24,000 to below 28,000"
    # 28,000 kept up: its span starts where the other's ends (excluded), so they are apart.
    four = capacity_span(sweep(28_000, (16_000, 24_000, 28_000, 32_000)))
    assert compare(one, four).verdict == APART
    # Both stopped at 24,000 with the next rate 28,000: overlapping.
    assert compare(one, one).verdict == OVERLAPPING
    # A capacity at its sweep's highest rate, open above: against one below it, apart; against
    # one that might be as high, not settled.
    top = capacity_span(sweep(32_000, (16_000, 24_000, 32_000)))
    assert top is not None
    assert top.high is None
    assert compare(top, one).verdict == APART
    assert compare(top, four).verdict == APART
    reaching = capacity_span(sweep(28_000, (16_000, 24_000, 28_000, 36_000)))
    assert compare(top, reaching).verdict == NOT_SETTLED
    # None kept up: below the lowest rate asked.
    none = capacity_span(sweep(0, (16_000, 24_000)))
    assert none == Span(0, 16_000, 3, high_excluded=True)
    assert compare(none, one).higher == 1


def test_a_run_with_forgeries_is_held_to_the_valid_transactions_it_was_asked_for(
    base: Summary,
) -> None:
    honest = at(base, 1000, 900)
    forging = replace(honest, config={**honest.config, "invalid_share": 0.1})
    assert valid_asked(honest) == 1000
    assert valid_asked(forging) == 900
    assert Rule().failed(honest) == ["a"]
    assert Rule().kept_up(forging)
    # A rate given is the rate held to, forgeries or not.
    assert Rule().failed(forging, 1000) == ["a"]
