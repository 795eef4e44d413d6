"""`overload`: does a committee offered more than it can order keep delivering its capacity, with
bounded latency, and does every rate below its capacity keep up, run after run?

A sweep of `hotstuff` rates, each run several times, with the in-memory store and with `--store`.
A run keeps up when it delivered at least 95 % of the rate asked. The capacity is the highest rate
at which every run kept up; the page says whether any run below it did not (a hole in the curve
is what a metastable collapse looks like), and what runs above it delivered against the best run.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

import matplotlib.pyplot as plt

from ..analysis.run_summary import Summary
from .experiment import Configuration, Experiment, Outcome
from .measures import KEEPS_UP, by_rate, fmt, median_of, node_us_per_tx, share, spread
from .page import Page

# Runs above capacity should deliver at least this share of the best run.
ABOVE_CAPACITY = 0.9
# Runs whose nodes used CPU within this share of each other count as having got the same CPU.
SAME_CPU = 0.05


def _configurations(quick: bool) -> Sequence[Configuration]:
    if quick:
        sweep = {"rate": "20000,40000", "runs": "1", "duration": "5"}
    else:
        # 1,500,000 is past what 4 nodes and 4 clients order on 2 cores, so the page shows what
        # runs above capacity deliver even where 1,000,000 keeps up.
        sweep = {"rate": "200000,400000,700000,1000000,1500000", "runs": "5", "duration": "20"}
    base = {"mode": "hotstuff", "tx_size": "197", **sweep}
    return [
        Configuration("in-memory store", base),
        Configuration("--store", {**base, "store": True}),
    ]


def kept_up(summary: Summary) -> bool:
    rate = float(summary.config.get("rate") or 0)
    return rate > 0 and summary.end_to_end.tps >= KEEPS_UP * rate


def verdict(summaries: Sequence[Summary]) -> list[str]:
    """What the sweep says: the capacity, holes below it, and what runs above it delivered."""
    rates = by_rate(summaries)
    full = [rate for rate, runs in rates.items() if all(kept_up(s) for s in runs)]
    if not full:
        return ["- No rate kept up in every run."]
    capacity = max(full)
    lines = [f"- Capacity (highest rate at which every run kept up): {capacity:,} tx/s."]
    holes = [r for r, runs in rates.items() if r < capacity and not all(kept_up(s) for s in runs)]
    lines.append(
        "- Every run at every rate below it kept up."
        if not holes
        else "- Runs below it that did not keep up, at: "
        + ", ".join(f"{r:,}" for r in holes)
        + " tx/s."
    )
    best = max(s.end_to_end.tps for s in summaries)
    above = [s for r, runs in rates.items() if r > capacity for s in runs]
    if above:
        worst = min(s.end_to_end.tps for s in above)
        p50s = [s.end_to_end.latency.p50_ms for s in above if s.end_to_end.latency.count]
        lines.append(
            f"- Above it, the worst run delivered {worst:,.0f} tx/s, {worst / best:.0%} of the best"
            f" run ({best:,.0f} tx/s; at least {ABOVE_CAPACITY:.0%} wanted), with end-to-end p50"
            f" at most {fmt(max(p50s) if p50s else None)} ms."
        )
        lines.extend(_cpu_of(above))
    return lines


def _node_cores(summary: Summary) -> float | None:
    """Cores the nodes used between them over the run's window."""
    nodes = summary.resources.nodes if summary.resources else None
    if nodes is None or nodes.cpu_cores is None:
        return None
    return nodes.cpu_cores * nodes.processes


def _cpu_of(runs: Sequence[Summary]) -> list[str]:
    """What the nodes of saturated runs spent: whether runs that delivered differently got
    different CPU, or got the same CPU and ordered different amounts with it."""
    cores = [c for c in map(_node_cores, runs) if c is not None]
    costs = [c for c in map(node_us_per_tx, runs) if c is not None]
    if not cores or not costs:
        return []
    line = (
        f"- Those runs' nodes used {min(cores):.2f}-{max(cores):.2f} cores between them, at"
        f" {min(costs):.2f}-{max(costs):.2f} µs of a node's CPU per transaction"
    )
    if min(cores) >= (1 - SAME_CPU) * max(cores):
        line += (
            ": each got the same CPU, so they differ in what a transaction cost, not in the CPU"
            " they got."
        )
    else:
        line += "."
    return [line]


def _rows(summaries: Sequence[Summary]) -> list[list[str]]:
    rows = []
    for rate, runs in by_rate(summaries).items():
        rows.append(
            [
                f"{rate:,}",
                f"{sum(kept_up(s) for s in runs)} of {len(runs)}",
                spread([s.end_to_end.tps for s in runs]),
                fmt(median_of([s.end_to_end.latency.p50_ms for s in runs])),
                spread([node_us_per_tx(s) for s in runs], 2),
                share(median_of([s.rounds.backpressure_share if s.rounds else None for s in runs])),
                fmt(median_of([s.rounds.rounds_per_second if s.rounds else None for s in runs])),
                fmt(
                    median_of(
                        [
                            s.resources.nodes.rss_mib if s.resources and s.resources.nodes else None
                            for s in runs
                        ]
                    )
                ),
            ]
        )
    return rows


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    figure, axes = plt.subplots()
    for outcome in outcomes:
        label = outcome.configuration.label
        page.section(label, *verdict(outcome.summaries) if outcome.summaries else ["- No run."])
        page.table(
            [
                "rate asked (tx/s)",
                "runs kept up",
                "delivered tx/s: median (min-max)",
                "end-to-end p50 ms",
                "node CPU µs/tx: median (min-max)",
                "mempools held back (share)",
                "rounds/s",
                "node RSS MiB",
            ],
            _rows(outcome.summaries),
        )
        points = [(float(s.config.get("rate") or 0), s.end_to_end.tps) for s in outcome.summaries]
        if points:
            medians = [
                (r, median(s.end_to_end.tps for s in runs))
                for r, runs in by_rate(outcome.summaries).items()
            ]
            line = axes.plot(*zip(*medians, strict=True), marker="o", label=f"{label} (median)")
            axes.scatter(*zip(*points, strict=True), color=line[0].get_color(), alpha=0.4, s=12)
    axes.set_xlabel("Input rate asked (tx/s)")
    axes.set_ylabel("Delivered (tx/s)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    page.figure(figure, "robustness", "Delivered against asked, every run a dot (hotstuff)")


OVERLOAD = Experiment(
    name="overload",
    title="Overload: capacity, and what runs above it deliver",
    question=(
        "Does a committee offered more than it can order keep delivering its capacity with"
        " bounded latency, and does every rate below its capacity keep up, run after run?"
        " (`hotstuff`, 4 nodes and 4 clients on this machine, with and without `--store`.)"
    ),
    configurations=_configurations,
    write=_write,
)
