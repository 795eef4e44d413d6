"""`links`: two of the report's figures about what the network gives a committee, put to the test.

* Link rate (the report's Fig 1.10: nodes talking over private addresses, with more bandwidth
  than public ones, ran slower and more erratically). `hotstuff` and `hotcrypto`, 4 nodes with
  1 ms links (a datacenter), at rates above their capacity, over links of `LINK_RATES` Mbit/s and
  without a limit (`--bandwidth`: a token bucket per link, `docs/faults.md` says what it does
  not model). Did more bandwidth deliver less, or vary more from run to run?
* Batch size against committee size (the report's Fig 1.11). `hotstuff`, nodes of 0.05 cores
  each (`--node-cpus`), n of `BATCH_COMMITTEES` and batches of
  `BATCH_SIZES` bytes: the capacity at each, and the batch size that did best at each n.
* The mechanism the report gave for Fig 1.11, small batches slowing the verifier, which
  `hotstuff` has not: `hotcrypto` at batches of about 100 to 1,500 transactions, the verifier's
  CPU per transaction at each (`verifier_batches.py`). Here rather than on the modes page: it
  is a batch-size sweep, beside the other, and it explains this page's figure.

A point's capacity is the median of what its runs delivered at a rate above what it orders.
Every verdict compares the range of what runs delivered (`measures.compare`): one link rate or
batch size beats another only where their ranges are apart; overlapping or too few runs settle
nothing, and the page says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

import matplotlib.pyplot as plt

from ..analysis.run_summary import Summary
from . import verifier_batches
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    APART,
    OVERLAPPING,
    Comparison,
    Span,
    compare,
    delivered,
    e2e_p50,
    fmt,
    median_of,
    node_us_per_tx,
    rounds_per_second,
    runs_span,
    sent_per_tx,
    spread,
    txs_per_round,
)
from .page import Page

# Every node's CPU budget (`--node-cpus`) in the batch sweep: 22 nodes and their clients fit
# this machine's 2 cores.
COMMITTEE_BUDGET = 0.05

LINK_MODES = {"hotstuff": "3000000", "hotcrypto": "40000"}
LINK_DELAY_MS = "1"
# Mbit/s of every link; None: no limit (loopback).
LINK_RATES: tuple[int | None, ...] = (None, 1000, 100, 25)
BATCH_COMMITTEES = (4, 10, 22)
# Finer steps where the runs of the sizes around them overlapped (100,000 and 300,000 B).
BATCH_SIZES = (50_000, 100_000, 200_000, 300_000, 500_000, 1_000_000)
# Asked of each committee of 0.05-core nodes: above what it orders .
BATCH_RATES = {4: "100000", 10: "60000", 22: "40000"}
# One bound on a node's uncommitted bytes for every batch size: room for two of the largest
# batches. A bound that grew with the batch would mix the two (a round carries at most one
# node's bound: docs/results/scale.md).
BATCH_BOUND = 2 * max(BATCH_SIZES)
# A slower link counts as steadier only if its runs fell less than half as far apart.
STEADIER = 0.5
# A run's spread: (max - min) / median of what its runs delivered.
UNLIMITED = "no limit"


def _link_label(mode: str, rate: int | None) -> str:
    return f"link: {mode}, {UNLIMITED if rate is None else f'{rate} Mbit/s'}"


def _batch_label(nodes: int, size: int) -> str:
    return f"batch: {nodes} nodes, {size:,} B"


def _configurations(quick: bool) -> Sequence[Configuration]:
    runs = {"runs": "1", "duration": "5"} if quick else {"runs": "3", "duration": "15"}
    # Five runs a batch point: three left every committee's ranges overlapping.
    batch_runs = runs if quick else {**runs, "runs": "5"}
    link_modes = {"hotstuff": "40000"} if quick else LINK_MODES
    link_rates = (None, 25) if quick else LINK_RATES
    configurations = []
    for mode, asked in link_modes.items():
        for rate in link_rates:
            flags: dict[str, str | bool] = {"mode": mode, "delay": LINK_DELAY_MS}
            if rate is not None:
                flags["bandwidth"] = str(rate)
            configurations.append(
                Configuration(_link_label(mode, rate), {**flags, "rate": asked, **runs})
            )
    committees = (4,) if quick else BATCH_COMMITTEES
    sizes = (50_000, 500_000) if quick else BATCH_SIZES
    for nodes in committees:
        for size in sizes:
            flags = {
                "mode": "hotstuff",
                "nodes": str(nodes),
                "node_cpus": f"{COMMITTEE_BUDGET:g}",
                "batch_size": str(size),
                "max_uncommitted_bytes": str(BATCH_BOUND),
                "rate": BATCH_RATES[nodes],
                **batch_runs,
            }
            configurations.append(Configuration(_batch_label(nodes, size), flags))
    return [*configurations, *verifier_batches.configurations(quick)]


def erratic(runs: Sequence[Summary]) -> float | None:
    """(max - min) / median of what the runs delivered: how far apart runs of one command fell."""
    values = [delivered(s) for s in runs]
    middle = median(values) if values else 0
    return (max(values) - min(values)) / middle if middle > 0 else None


def megabits(summary: Summary) -> float | None:
    return summary.traffic.megabits_per_s if summary.traffic is not None else None


def _links(rates: Sequence[int | None]) -> str:
    return ", ".join(f"{r} Mbit/s" for r in rates)


def link_verdict(mode: str, by_rate: dict[int | None, list[Summary]]) -> list[str]:
    """Whether more bandwidth delivered less, or less steadily: the fastest links against each
    slower one, by the ranges of what their runs delivered (`measures.compare`)."""
    rates = [r for r in LINK_RATES if by_rate.get(r)]
    if len(rates) < 2:
        return [f"- `{mode}`: fewer than two link rates ran; nothing to compare."]
    fastest, *slower = rates
    top = by_rate[fastest]
    name = "without a limit" if fastest is None else f"at {fastest} Mbit/s"
    top_span = runs_span([delivered(s) for s in top])
    found = {r: compare(top_span, runs_span([delivered(s) for s in by_rate[r]])) for r in slower}
    won = [r for r, c in found.items() if c.verdict == APART and c.higher == 1]
    lost = [r for r, c in found.items() if c.verdict == APART and c.higher == 0]
    overlapping = [r for r, c in found.items() if c.verdict == OVERLAPPING]
    unsettled = [r for r, c in found.items() if c.verdict not in (APART, OVERLAPPING)]
    lines = []
    if won:
        lines.append(
            f"- `{mode}`: **slower with more bandwidth**: every run {name} delivered less than"
            f" every run at {_links(won)} (apart)."
        )
    if lost:
        lines.append(
            f"- `{mode}`: **faster with more bandwidth**: every run {name} delivered more than"
            f" every run at {_links(lost)} (apart)."
        )
    if overlapping:
        lines.append(
            f"- `{mode}`: **overlapping**: the runs {name} and at {_links(overlapping)} delivered"
            " within each other's range: neither is shown faster."
        )
    if unsettled:
        why = found[unsettled[0]].why
        lines.append(f"- `{mode}`: **not settled** against {_links(unsettled)}: {why}.")
    steadier = [r for r in slower if (erratic(by_rate[r]) or 0) < STEADIER * (erratic(top) or 0)]
    spread_top = erratic(top)
    lines.append(
        f"- `{mode}`: runs {name} fell {fmt(None if spread_top is None else spread_top * 100)} %"
        " apart (max - min over the median); "
        + (
            f"slower links were steadier (runs less than half as far apart) at {_links(steadier)}."
            if steadier
            else "no slower link's runs fell less than half as far apart."
        )
    )
    return lines


def best_batch(nodes: int, spans: dict[int, Span | None]) -> str:
    """Which batch size delivered most at `nodes`: the one of the highest median (given as the
    first of `spans`), apart from every other size's runs, or why no size is settled as best."""
    (best, best_span), *others = spans.items()
    if best_span is None:
        return f"- {nodes} nodes: no run."
    found: dict[int, Comparison] = {size: compare(best_span, span) for size, span in others}
    below = [size for size, c in found.items() if c.verdict == APART and c.higher == 0]
    if len(below) == len(found):
        return (
            f"- {nodes} nodes: **apart**: {best:,} B delivered most ({best_span.text()} tx/s),"
            " above every other batch size's runs."
        )
    near = [size for size in found if size not in below]
    verdicts = {found[size].verdict for size in near}
    word = OVERLAPPING if verdicts == {OVERLAPPING} else "not settled"
    ranges = "; ".join(f"{size:,} B {s.text()}" for size in near if (s := spans[size]) is not None)
    return (
        f"- {nodes} nodes: **{word}**: no single batch size delivered most; {best:,} B"
        f" ({best_span.text()} tx/s, the highest median) against {ranges}"
        + ("" if word == OVERLAPPING else f" ({found[near[0]].why})")
        + "."
    )


def _link_section(outcomes: Sequence[Outcome], page: Page) -> None:
    page.section(
        "Link rate (the report's Fig 1.10)",
        f"4 nodes, {LINK_DELAY_MS} ms one way on every link, a rate above capacity; each link"
        " rate a token bucket per direction (`--bandwidth`). A node's traffic: what its busier"
        " direction carried over all its links (three here), so up to three times the link's"
        " rate.",
    )
    figure, axes = plt.subplots()
    for mode in LINK_MODES:
        by_rate: dict[int | None, list[Summary]] = {}
        rows = []
        for rate in LINK_RATES:
            runs = _runs(outcomes, _link_label(mode, rate))
            if not runs:
                continue
            by_rate[rate] = runs
            rows.append(
                [
                    UNLIMITED if rate is None else f"{rate}",
                    spread([delivered(s) for s in runs]),
                    fmt(_times_100(erratic(runs)), 0, " %"),
                    fmt(median_of([megabits(s) for s in runs]), 1),
                    fmt(median_of([sent_per_tx(s) for s in runs])),
                    fmt(median_of([e2e_p50(s) for s in runs])),
                ]
            )
        if not rows:
            continue
        page.add("", f"**{mode}**")
        page.table(
            [
                "link Mbit/s",
                "delivered tx/s: median (min-max)",
                "runs apart",
                "a node's traffic, Mbit/s",
                "bytes sent/tx",
                "end-to-end p50 ms",
            ],
            rows,
        )
        page.add("", *link_verdict(mode, by_rate))
        limited = [(r, runs) for r, runs in by_rate.items() if r is not None]
        if limited:
            axes.plot(
                [r for r, _ in limited],
                [median(delivered(s) for s in runs) for _, runs in limited],
                marker="o",
                label=mode,
            )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("Link rate (Mbit/s)")
    axes.set_ylabel("Delivered, median (tx/s)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    page.figure(figure, "links", "Delivered against the link rate")


def _times_100(value: float | None) -> float | None:
    return None if value is None else value * 100


def _runs(outcomes: Sequence[Outcome], label: str) -> list[Summary]:
    return next((o.summaries for o in outcomes if o.configuration.label == label), [])


def _batch_section(outcomes: Sequence[Outcome], page: Page) -> None:
    page.section(
        "Batch size against committee size (the report's Fig 1.11)",
        f"`hotstuff`, every node of {COMMITTEE_BUDGET:g} cores, asked more than it orders, every"
        f" node's uncommitted bytes bounded at {BATCH_BOUND:,} whatever the batch size.",
    )
    rows, best = [], []
    figure, axes = plt.subplots()
    for nodes in BATCH_COMMITTEES:
        points = []
        spans: dict[int, Span | None] = {}
        for size in BATCH_SIZES:
            runs = _runs(outcomes, _batch_label(nodes, size))
            if not runs:
                continue
            capacity = median(delivered(s) for s in runs)
            points.append((size, capacity))
            spans[size] = runs_span([delivered(s) for s in runs])
            rows.append(
                [
                    str(nodes),
                    f"{size:,}",
                    spread([delivered(s) for s in runs]),
                    fmt(median_of([node_us_per_tx(s) for s in runs]), 2),
                    fmt(median_of([rounds_per_second(s) for s in runs]), 1),
                    fmt(median_of([txs_per_round(s) for s in runs])),
                ]
            )
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=f"{nodes} nodes")
            size, _ = max(points, key=lambda p: p[1])
            best.append(best_batch(nodes, {size: spans[size]} | spans))
    page.table(
        [
            "nodes",
            "batch size B",
            "delivered tx/s: median (min-max)",
            "node CPU µs/tx",
            "rounds/s",
            "tx/round",
        ],
        rows,
    )
    if best:
        page.add(
            "",
            "Which batch size delivered most, by the ranges of what the runs delivered (apart:"
            " the best size's range above every other's):",
            "",
            *best,
        )
    axes.set_xscale("log")
    axes.set_xlabel("Batch size (bytes)")
    axes.set_ylabel("Delivered, median (tx/s)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    page.figure(figure, "batch", "Delivered against batch size, per committee size")


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    _link_section(outcomes, page)
    _batch_section(outcomes, page)
    verifier_batches.write_section(outcomes, page)


LINKS = Experiment(
    name="links",
    title="Links: bandwidth, and batch size against committee size",
    question=(
        "The report found that faster links (private addresses) made its committee slower and"
        " more erratic (Fig 1.10), and plotted batch size against committee size (Fig 1.11)."
        " With link rates emulated per link and every node under a CPU budget: does more"
        " bandwidth ever deliver less here, which batch size does best as the committee"
        " grows, and do small batches cost the verifier more per transaction, as the report"
        " explained Fig 1.11?"
    ),
    configurations=_configurations,
    write=_write,
    compared_with=(),
)
