"""`store`: what the durable store (`--store`) costs, in alternated pairs.

`hotstuff` at a rate near what this machine's clients can send, and `hotcrypto` at a rate it
keeps up with, each run without and then with `--store`, pair after pair, so that whatever else
the machine does falls on both alike. The page gives the median of each measure on either side
and the median over pairs of their ratio (with over without): a single pair's ratio spreads
widely, since rounds per second vary from run to run at the same load. It says how many runs of
each side kept up: a pair of overloaded runs compares two queues, not what the store costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.run_summary import Summary
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    KEEPS_UP,
    Measure,
    consensus_p50,
    consensus_p99,
    delivered,
    e2e_p50,
    fmt,
    node_us_per_tx,
    over_runs,
    processed,
    projection_tps,
    rounds_per_second,
    stage_us_per_tx,
)
from .page import Page

WITHOUT = "without --store"
WITH = "--store"


def _runs(quick: bool) -> tuple[dict[str, str], int, dict[str, str]]:
    """Rates by mode, pairs, and the flags of every run."""
    if quick:
        return {"hotstuff": "20000", "hotcrypto": "2000"}, 1, {"runs": "1", "duration": "3"}
    # hotcrypto below the capacity the modes page settles on this machine (26,000 tx/s).
    return {"hotstuff": "400000", "hotcrypto": "24000"}, 8, {"runs": "1", "duration": "20"}


def label_of(mode: str, pair: int, side: str) -> str:
    return f"{mode}: pair {pair}: {side}"


def _configurations(quick: bool) -> Sequence[Configuration]:
    rates, pairs, flags = _runs(quick)
    configurations = []
    for mode, rate in rates.items():
        base = {"mode": mode, "rate": rate, **flags}
        for pair in range(1, pairs + 1):
            configurations += [
                Configuration(label_of(mode, pair, WITHOUT), base),
                Configuration(label_of(mode, pair, WITH), {**base, "store": True}),
            ]
    return configurations


MEASURES: dict[str, tuple[Measure, int]] = {
    "delivered tx/s": (delivered, 0),
    "capacity projection tx/s": (projection_tps, 0),
    "node CPU µs/tx (all threads)": (node_us_per_tx, 3),
    "consensus µs/tx": (stage_us_per_tx("consensus"), 3),
    "store µs/tx": (stage_us_per_tx("store"), 3),
    "rounds/s": (rounds_per_second, 1),
    "consensus p50 ms": (consensus_p50, 0),
    "consensus p99 ms": (consensus_p99, 0),
    "end-to-end p50 ms": (e2e_p50, 0),
}


@dataclass(frozen=True)
class Pair:
    number: int
    without: Summary
    with_store: Summary

    def ratio(self, measure: Measure) -> float | None:
        top, bottom = measure(self.with_store), measure(self.without)
        return None if top is None or not bottom else top / bottom


def pairs_of(mode: str, outcomes: Sequence[Outcome]) -> list[Pair]:
    """The pairs of `mode` whose both runs finished."""
    by_label = {o.configuration.label: o.summaries for o in outcomes}
    pairs = []
    number = 1
    while label_of(mode, number, WITHOUT) in by_label:
        without = by_label[label_of(mode, number, WITHOUT)]
        with_store = by_label.get(label_of(mode, number, WITH), [])
        if without and with_store:
            pairs.append(Pair(number, without[0], with_store[0]))
        number += 1
    return pairs


def measure_rows(pairs: Sequence[Pair]) -> list[list[str]]:
    rows = []
    for name, (measure, digits) in MEASURES.items():
        ratios = [r for p in pairs if (r := p.ratio(measure)) is not None]
        rows.append(
            [
                name,
                over_runs([measure(p.without) for p in pairs], digits),
                over_runs([measure(p.with_store) for p in pairs], digits),
                "-"
                if not ratios
                else f"{over_runs(ratios, 2)}, {len(ratios)} pair{'s' if len(ratios) > 1 else ''}",
            ]
        )
    return rows


def kept_up(summary: Summary, rate: int) -> bool:
    """Delivered (processed) 95 % of `rate`: the capacity rule's first condition; the pairs
    run at one rate, so there is no unloaded p50 to hold them to."""
    return processed(summary) >= KEEPS_UP * rate


def kept_up_line(pairs: Sequence[Pair], rate: int) -> str:
    """How many runs of each side delivered 95 % of `rate`, and what it means when some did
    not."""
    without = sum(kept_up(p.without, rate) for p in pairs)
    with_store = sum(kept_up(p.with_store, rate) for p in pairs)
    line = (
        f"Runs that kept up (delivered 95 % of the {fmt(rate)} tx/s asked): {without} of"
        f" {len(pairs)} {WITHOUT}, {with_store} of {len(pairs)} with it."
    )
    if without < len(pairs) or with_store < len(pairs):
        line += (
            " The runs that did not were overloaded: their figures are those of a committee"
            " behind its load, and the ratios compare two queues more than the store's cost."
        )
    return line


def _pairs(count: int) -> str:
    return f"{count} pair{'' if count == 1 else 's'}"


def pair_rows(pairs: Sequence[Pair]) -> list[list[str]]:
    return [
        [
            str(p.number),
            fmt(delivered(p.without)),
            fmt(delivered(p.with_store)),
            fmt(p.ratio(delivered), 2),
            fmt(p.ratio(projection_tps), 2),
        ]
        for p in pairs
    ]


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    modes = list(dict.fromkeys(o.configuration.flags["mode"] for o in outcomes))
    for mode in modes:
        pairs = pairs_of(str(mode), outcomes)
        # The rate the runs were asked for, as they recorded it: a page written again from
        # older runs (`--rewrite`) must not take the experiment's rate of today.
        rates = sorted({int(p.without.config.get("rate") or 0) for p in pairs})
        if len(rates) != 1:
            page.section(f"`{mode}`: {_pairs(len(pairs))}, at rates {rates}")
            continue
        rate = rates[0]
        page.section(f"`{mode}` at {fmt(rate)} tx/s asked, {_pairs(len(pairs))}")
        page.add(kept_up_line(pairs, rate))
        page.table(
            [
                "measure",
                f"{WITHOUT}, median (min-max)",
                f"{WITH}, median (min-max)",
                "with / without per pair, median (min-max)",
            ],
            measure_rows(pairs),
        )
        page.add("")
        page.table(
            ["pair", f"{WITHOUT} tx/s", f"{WITH} tx/s", "delivered ratio", "projection ratio"],
            pair_rows(pairs),
        )


STORE = Experiment(
    name="store",
    title="Store: what `--store` costs, in alternated pairs",
    question=(
        "What does keeping blocks, batches and the safety state on disk (`--store`) cost in"
        " throughput, capacity projection, CPU per transaction and latency? (`hotstuff` and"
        " `hotcrypto`, 4 nodes and 4 clients on this machine, runs without and with the store"
        " alternated.)"
    ),
    configurations=_configurations,
    write=_write,
)
