"""`multi-region`: the report says its HotStuff ran faster across regions than inside one. Does
it here, and what explains it either way?

`hotcrypto` and `hotstuff`, each swept to its capacity twice at the same rates: the committee in
one region (loopback, sub-millisecond, no emulation) and across four (`--delay-matrix` of
`four-regions.csv`: published round-trip times between four AWS regions, its comments cite
them). Each capacity is settled by a search (finer steps at its edge, five runs there), and the
two are compared by where each lies (`measures.compare`: apart, overlapping, not settled): the
verdict line is that comparison, written from the table, never above it. Then, at the highest
rate both placements kept up (the same load), what a round carried and cost: rounds per second,
transactions per batch and how full a batch was (the runs set `--batch-size`, the node's default,
so the fill is known), batches per round, and the CPU a node spent per transaction (all its
threads, and its consensus stage). Each mode also runs both placements at each of the bounds
`BOUNDS` on a node's uncommitted bytes beside the default (one bound across placements), at
rates around four regions' capacity: whether the verdict rests on the default bound, which a
longer wait for commits fills sooner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import matplotlib.pyplot as plt

from ..analysis.run_summary import Summary
from ..faults.net_emulation import read_delay_matrix
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    APART,
    CAPACITY_RULE,
    OVERLAPPING,
    Capacity,
    Measure,
    Span,
    at_rate,
    batch_fill,
    batches_per_round,
    by_rate,
    capacity,
    capacity_span,
    common_rate,
    compare,
    consensus_p50,
    delivered,
    e2e_p50,
    fmt,
    held_back,
    median_of,
    mempools_held_back,
    node_us_per_tx,
    rounds_per_second,
    share,
    spread,
    stage_us_per_tx,
    txs_per_batch,
)
from .page import Page
from .search import Search

MATRIX = "benchmark/experiments/four-regions.csv"
ONE = "one region"
FOUR = "four regions"
MODES = ("hotcrypto", "hotstuff")
# The node's default batch size, given explicitly so that the runs record it.
BATCH_SIZE = "500000"
# The uncommitted-bytes bounds swept across four regions beside the node's default (8 MiB),
# at rates of the main sweep around four regions' capacity.
BOUNDS = (2 * 1024 * 1024, 32 * 1024 * 1024)
DEFAULT_BOUND = 8 * 1024 * 1024
# Each starts at the main sweep's lowest rate, so that every sweep of a mode is held to the
# unloaded p50 of the same rate.
BOUND_RATES = {
    "hotcrypto": "960,8000,16000,24000,32000",
    "hotstuff": "4000,50000,100000,200000,300000",
}
QUICK_BOUND_RATES = {"hotcrypto": "2000", "hotstuff": "20000"}


def bound_label(mode: str, bound: int, placement: str = FOUR) -> str:
    return f"{mode}: {placement}, --max-uncommitted-bytes={bound}"


def _configurations(quick: bool) -> Sequence[Configuration]:
    if quick:
        rates = {"hotcrypto": "960,2000", "hotstuff": "8000,20000"}
        runs = {"runs": "1", "duration": "4"}
    else:
        rates = {
            "hotcrypto": "960,2000,4000,8000,12000,16000,20000,24000,28000,32000,40000",
            "hotstuff": "4000,10000,20000,50000,100000,200000,300000,400000,500000",
        }
        runs = {"runs": "3", "duration": "30"}
    # Every capacity settled: finer steps at its edge, five runs there.
    search = None if quick else Search()
    configurations = []
    for mode in MODES:
        base = {"mode": mode, "rate": rates[mode], "batch_size": BATCH_SIZE, **runs}
        configurations += [
            Configuration(f"{mode}: {ONE}", base, search=search),
            Configuration(f"{mode}: {FOUR}", {**base, "delay_matrix": MATRIX}, search=search),
        ]
    for mode in MODES:
        rate = (QUICK_BOUND_RATES if quick else BOUND_RATES)[mode]
        for bound in BOUNDS[:1] if quick else BOUNDS:
            flags = {
                "mode": mode,
                "rate": rate,
                "batch_size": BATCH_SIZE,
                "max_uncommitted_bytes": str(bound),
                **runs,
            }
            configurations += [
                Configuration(bound_label(mode, bound, ONE), flags, search=search),
                Configuration(
                    bound_label(mode, bound), {**flags, "delay_matrix": MATRIX}, search=search
                ),
            ]
    return configurations


MEASURES = {
    "rounds/s": (rounds_per_second, 1),
    "tx per batch": (txs_per_batch, 0),
    "batches per round": (batches_per_round, 2),
    "node CPU µs/tx": (node_us_per_tx, 2),
    "consensus µs/tx": (stage_us_per_tx("consensus"), 2),
    "consensus p50 ms": (consensus_p50, 0),
    "end-to-end p50 ms": (e2e_p50, 0),
}


@dataclass(frozen=True)
class Placement:
    """One placement's runs at a rate: medians of what explains a throughput."""

    delivered: float | None
    rounds_per_second: float | None
    txs_per_batch: float | None
    fill: float | None
    batches_per_round: float | None
    node_us: float | None
    consensus_us: float | None
    held_back: float | None
    consensus_p50: float | None

    @classmethod
    def of(cls, runs: Sequence[Summary]) -> Placement:
        def m(measure: Measure) -> float | None:
            return median_of([measure(s) for s in runs])

        return cls(
            delivered=m(delivered),
            rounds_per_second=m(rounds_per_second),
            txs_per_batch=m(txs_per_batch),
            fill=m(batch_fill),
            batches_per_round=m(batches_per_round),
            node_us=m(node_us_per_tx),
            consensus_us=m(stage_us_per_tx("consensus")),
            held_back=m(mempools_held_back),
            consensus_p50=m(consensus_p50),
        )


def _against(four: float | None, one: float | None, digits: int = 0, unit: str = "") -> str:
    return f"{fmt(four, digits)}{unit} against {fmt(one, digits)}{unit}"


def verdict(one: Sequence[Summary], four: Sequence[Summary]) -> list[str]:
    """Whether four regions ran faster than one, and what the runs at the same load say why."""
    if not one or not four:
        return [f"- No run finished in {ONE if not one else FOUR}: nothing to compare."]
    multi = capacity(four)
    found = compare(capacity_span(four), capacity_span(one))
    lines = [claim(capacity_span(one), capacity_span(four))]
    rate = common_rate(one, four)
    if rate is not None:
        load = "the highest rate both kept up"
    else:
        rate = min(set(by_rate(one)) & set(by_rate(four)), default=None)
        load = "the lowest rate both were asked, which not both kept up"
    if rate is None:
        return lines
    a, b = Placement.of(at_rate(four, rate)), Placement.of(at_rate(one, rate))
    lines.append(
        f"- At {fmt(rate)} tx/s asked ({load}), four regions delivered"
        f" {_against(a.delivered, b.delivered)} tx/s and ran"
        f" {_against(a.rounds_per_second, b.rounds_per_second, 1)} rounds a second; a batch"
        f" carried {_against(a.txs_per_batch, b.txs_per_batch)} transactions (the batch size"
        f" filled {share(a.fill)} against {share(b.fill)}), a block"
        f" {_against(a.batches_per_round, b.batches_per_round, 2)} batches; a node spent"
        f" {_against(a.node_us, b.node_us, 2, ' µs')} of CPU per transaction (its consensus stage"
        f" {_against(a.consensus_us, b.consensus_us, 2, ' µs')})."
    )
    # Why one ran faster, where the capacities are apart; nothing to explain otherwise.
    if found.verdict == APART:
        lines.append(_why(a, b) if found.higher == 0 else _why_not(a, b, _beyond(four, one, multi)))
    return lines


# The mempools held their clients back this share of a run or more: the bytes in flight, not the
# CPU, set what the committee delivered.
HELD_BACK = 0.25


def _beyond(
    four: Sequence[Summary], one: Sequence[Summary], multi: Capacity | None
) -> tuple[int, Placement, Placement] | None:
    """The lowest rate both placements were asked above four regions' capacity, with each
    placement's medians there: what stopped four regions."""
    above = sorted(
        r
        for r in set(by_rate(four)) & set(by_rate(one))
        if multi is None or multi.rate is None or r > multi.rate
    )
    if not above:
        return None
    rate = above[0]
    return rate, Placement.of(at_rate(four, rate)), Placement.of(at_rate(one, rate))


def where(span: Span | None) -> str:
    """Where a capacity lies, as the claim says it."""
    if span is None:
        return "unknown (no runs)"
    if span.low == 0 and span.high is not None:
        return f"below {fmt(span.high)} tx/s (no rate asked kept up)"
    return f"{span.text()} tx/s ({span.runs} runs at {fmt(span.low)})"


def claim(one: Span | None, four: Span | None) -> str:
    """The report's claim, by where the two capacities lie (`measures.compare`)."""
    found = compare(four, one)
    figures = f"four regions' capacity {where(four)}, one region's {where(one)}"
    if found.verdict == APART:
        holds = "holds" if found.higher == 0 else "does not hold"
        return f"- **Apart: the claim {holds} here**: {figures}."
    if found.verdict == OVERLAPPING and one is not None and four is not None:
        low, high = max(one.low, four.low), min(one.high or 0, four.high or 0)
        return (
            f"- **Overlapping: not decided**: {figures}; where they overlap, neither is shown"
            f" faster (finer steps between {fmt(low)} and {fmt(high)} tx/s would settle it)."
        )
    return f"- **Not settled**: {figures}: {found.why}."


COSTLIER = (
    "- Why not: across four regions a transaction cost as much CPU or more, so the wait for the"
    " far members is not paid back in cheaper rounds."
)


def _why(four: Placement, one: Placement) -> str:
    """Why four regions kept up with as much as one or more."""
    if four.node_us is None or one.node_us is None:
        return "- The runs do not report the nodes' CPU: nothing to explain it with."
    cheaper = four.node_us < one.node_us
    fewer_rounds = (
        four.rounds_per_second is not None
        and one.rounds_per_second is not None
        and four.rounds_per_second < one.rounds_per_second
    )
    if cheaper and fewer_rounds:
        return (
            "- Why: the same load in fewer rounds, so each round's fixed work (proposals, votes,"
            " their signatures, a batch sealed per batch delay) is shared by more transactions;"
            " the CPU a transaction costs falls, and where every node shares the same cores that"
            " CPU is the capacity."
        )
    if cheaper:
        return (
            "- Why: a transaction cost less CPU across four regions although the rounds were"
            " not fewer; the rounds and batches above are what to look at."
        )
    return COSTLIER


def _why_not(
    four: Placement, one: Placement, beyond: tuple[int, Placement, Placement] | None
) -> str:
    """Why four regions kept up with less than one: the bytes a node may hold in flight over a
    longer wait for commits, or the CPU."""
    cheaper = four.node_us is not None and one.node_us is not None and four.node_us < one.node_us
    if beyond is not None and (beyond[1].held_back or 0) >= HELD_BACK:
        rate, far, near = beyond
        cpu = (
            f"not the CPU: a transaction cost {_against(four.node_us, one.node_us, 2, ' µs')}"
            " at the same load"
            if cheaper
            else "a transaction also cost as much CPU or more"
        )
        return (
            f"- Why not: across four regions the bound on bytes in flight set the limit ({cpu})."
            f" At {fmt(rate)} tx/s asked, the lowest rate four regions did not keep up with,"
            f" their mempools held the clients back {share(far.held_back)} of the run (one"
            f" region: {share(near.held_back)}) and consensus took"
            f" {_against(far.consensus_p50, near.consensus_p50, 0, ' ms')} (p50). A node holds"
            " at most `--max-uncommitted-bytes` of batches sealed but not committed, so that"
            " bound over the longer wait for a commit caps what four regions deliver"
            f" ({fmt(far.delivered)} tx/s there; see [overload](../overload.md))."
        )
    if cheaper:
        return (
            "- Why not: not the CPU, which a transaction cost less of across four regions; the"
            " rounds and batches above are what to look at."
        )
    return COSTLIER


def detail_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """Medians at every rate of every sweep."""
    rows = []
    for outcome in outcomes:
        for rate, runs in by_rate(outcome.summaries).items():
            rows.append(
                [
                    outcome.configuration.label,
                    fmt(rate),
                    spread([delivered(s) for s in runs]),
                    share(median_of([batch_fill(s) for s in runs])),
                    *[fmt(median_of([m(s) for s in runs]), d) for m, d in MEASURES.values()],
                ]
            )
    return rows


def _matrix_line(repo_root: Path) -> str:
    matrix = read_delay_matrix(repo_root / MATRIX, 4)
    rtts = [2 * matrix[i][j] for i in range(4) for j in range(4) if i < j]
    return (
        f"The four regions' links (`{MATRIX}`, whose comments cite the source): round trips"
        f" {fmt(min(rtts))} to {fmt(max(rtts))} ms, median {fmt(median(rtts))} ms."
    )


def _plot(outcomes: Sequence[Outcome], page: Page) -> None:
    figure, axes = plt.subplots(1, len(MODES), figsize=(10, 4))
    for axis, mode in zip(axes, MODES, strict=True):
        for outcome in outcomes:
            if not outcome.configuration.label.startswith(f"{mode}: ") or not outcome.summaries:
                continue
            points = [
                (rate, median(delivered(s) for s in runs))
                for rate, runs in by_rate(outcome.summaries).items()
            ]
            axis.plot(
                *zip(*points, strict=True),
                marker="o",
                label=outcome.configuration.label.removeprefix(f"{mode}: "),
            )
        axis.set_title(mode)
        axis.set_xlabel("Input rate asked (tx/s)")
        axis.set_ylabel("Delivered, median (tx/s)")
        axis.grid(True, alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    page.figure(figure, "delivered", "Delivered against asked, one region and four")


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    by_label = {o.configuration.label: o.summaries for o in outcomes}
    page.add("", _matrix_line(Path(__file__).resolve().parents[2]), "", CAPACITY_RULE)
    for mode in MODES:
        page.section(
            f"`{mode}`",
            *verdict(by_label.get(f"{mode}: {ONE}", []), by_label.get(f"{mode}: {FOUR}", [])),
        )
    for mode in MODES:
        _bound_section(mode, by_label, page)
    page.section("Every rate of every sweep (medians of the runs)")
    page.table(
        ["placement", "rate asked (tx/s)", "delivered, median (min-max)", "batch fill", *MEASURES],
        detail_rows(outcomes),
    )
    _plot(outcomes, page)


def _bound_section(mode: str, by_label: dict[str, list[Summary]], page: Page) -> None:
    """Both placements' capacity at each bound on a node's uncommitted bytes (one bound across
    placements), and at each bound where they lie against each other: whether the verdict above
    rests on the default."""
    sweeps = {
        DEFAULT_BOUND: (by_label.get(f"{mode}: {ONE}", []), by_label.get(f"{mode}: {FOUR}", []))
    }
    sweeps |= {
        b: (by_label.get(bound_label(mode, b, ONE), []), by_label.get(bound_label(mode, b), []))
        for b in BOUNDS
    }
    rows, lines = [], []
    for bound, placements in sorted(sweeps.items()):
        name = f"{bound / 1024 / 1024:g} MiB" + (" (default)" if bound == DEFAULT_BOUND else "")
        for placement, runs in zip((ONE, FOUR), placements, strict=True):
            if not runs:
                continue
            found = capacity(runs)
            top = at_rate(runs, max(by_rate(runs)))
            rows.append(
                [
                    name,
                    placement,
                    "-" if found is None else found.describe(),
                    spread([delivered(s) for s in top]),
                    share(median_of([held_back(s) for s in top])),
                    fmt(median_of([consensus_p50(s) for s in top])),
                    fmt(median_of([rounds_per_second(s) for s in top]), 1),
                    fmt(median_of([node_us_per_tx(s) for s in top]), 2),
                ]
            )
        if all(placements):
            near, far = (capacity_span(runs) for runs in placements)
            lines.append(f"- {name}: " + claim(near, far).removeprefix("- "))
    if not rows:
        return
    page.section(
        f"`{mode}`: the bound on a node's uncommitted bytes, in both placements",
        "A node stops reading its clients while it holds `--max-uncommitted-bytes` of batches"
        " sealed but not committed; across regions a commit takes longer, so the same bound"
        " holds fewer transactions a second. Both placements ran at every bound, at the same"
        " rates; the last columns at each sweep's highest rate asked.",
    )
    page.table(
        [
            "bound",
            "placement",
            "capacity (tx/s)",
            "delivered at the highest rate",
            "clients held back",
            "consensus p50 ms",
            "rounds/s",
            "node CPU µs/tx",
        ],
        rows,
    )
    page.add("", *lines)


MULTI_REGION = Experiment(
    name="multi-region",
    title="Multi-region: does HotStuff run faster across regions than inside one?",
    question=(
        "The report says its multi-region HotStuff ran faster than a single region. With the"
        " published round-trip times between four regions emulated on the committee's links"
        " (every node and client still on this machine), against one region, at the same rates:"
        " does it hold here, and what explains it either way (batch fill, rounds per second,"
        " CPU per transaction)?"
    ),
    configurations=_configurations,
    write=_write,
    compared_with=("overload",),
)
