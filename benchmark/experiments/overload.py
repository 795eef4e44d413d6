"""`overload`: does a committee offered more than it can order keep delivering its capacity, with
bounded latency, and does every rate below its capacity keep up, run after run?

A sweep of `hotstuff` rates, each run several times, with the in-memory store and with `--store`;
then `hotcrypto` under `--verify=all` and `--verify=attested` side by side, from below their
capacities to twice the higher one (attesting is work of its own, which must push back on the
clients like every stage, not collapse under load), and both again above capacity with one
transaction in ten forged. A run keeps up by the capacity rule
(`measures.CAPACITY_RULE`: delivered, held back, latency). The capacity is the highest rate at
which every run kept up; the page says whether any run below it did not (a hole in the curve is
what a metastable collapse looks like), what runs above it delivered against the best run, and
the report's metric beside it (the peak mean delivered).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

import matplotlib.pyplot as plt

from ..analysis.run_summary import Summary
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    APART,
    CAPACITY_RULE,
    OVERLAPPING,
    Comparison,
    Rule,
    by_rate,
    compare,
    delivered,
    e2e_p50,
    fmt,
    held_back,
    median_of,
    mempools_held_back,
    node_us_per_tx,
    peak_mean,
    runs_span,
    share,
    spread,
)
from .page import Page

# Runs above capacity should deliver at least this share of the best run.
ABOVE_CAPACITY = 0.9
# Runs whose nodes used CPU within this share of each other count as having got the same CPU.
SAME_CPU = 0.05


# The two ways of checking signatures the `hotcrypto` sweeps compare.
VERIFY = ("all", "attested")
# The share of forged transactions the clients send in the forged runs, and how much of the
# capacity without forgeries each mode must keep with them.
FORGED = 0.1
FORGED_KEEPS = 0.85


def verify_label(verify: str) -> str:
    return f"hotcrypto --verify={verify}"


def forged_label(verify: str) -> str:
    return f"{verify_label(verify)}, {FORGED:.0%} forged"


def _configurations(quick: bool) -> Sequence[Configuration]:
    if quick:
        sweep = {"rate": "20000,40000", "runs": "1", "duration": "5"}
        crypto_sweep = {"rate": "4000", "runs": "1", "duration": "5"}
        forged_sweep = crypto_sweep
    else:
        # 1,500,000 is past what 4 nodes and 4 clients order on 2 cores, so the page shows what
        # runs above capacity deliver even where 1,000,000 keeps up.
        sweep = {"rate": "200000,400000,700000,1000000,1500000", "runs": "5", "duration": "20"}
        # `all` orders about 20,000 tx/s here and `attested` about 30,000: from half the lower
        # to twice the higher.
        crypto_sweep = {"rate": "10000,20000,30000,40000,60000", "runs": "5", "duration": "20"}
        # Forged transactions at rates above both capacities: what each mode delivers, saturated.
        forged_sweep = {"rate": "40000,60000", "runs": "3", "duration": "20"}
    base = {"mode": "hotstuff", "tx_size": "197", **sweep}
    return [
        Configuration("in-memory store", base),
        Configuration("--store", {**base, "store": True}),
        *(
            Configuration(verify_label(v), {"mode": "hotcrypto", "verify": v, **crypto_sweep})
            for v in VERIFY
        ),
        *(
            Configuration(
                forged_label(v),
                {"mode": "hotcrypto", "verify": v, "invalid_share": f"{FORGED:g}", **forged_sweep},
            )
            for v in VERIFY
        ),
    ]


def verdict(summaries: Sequence[Summary]) -> list[str]:
    """What the sweep says: the capacity beside the peak mean delivered, holes below it, and
    what runs above it delivered."""
    rule = Rule.of(summaries)
    rates = by_rate(summaries)
    capacity = _capacity(summaries)
    peak = peak_mean(summaries)
    peak_line = (
        []
        if peak is None
        else [
            f"- Peak mean delivered over the sweep (the report's metric): {fmt(peak[1])} tx/s, at"
            f" {fmt(peak[0])} tx/s asked; {rule.describe()}."
        ]
    )
    if capacity is None:
        return ["- No rate kept up in every run.", *peak_line]
    lines = [f"- Capacity (highest rate at which every run kept up): {capacity:,} tx/s."]
    holes = [
        r for r, runs in rates.items() if r < capacity and not all(rule.kept_up(s) for s in runs)
    ]
    lines.append(
        "- Every run at every rate below it kept up."
        if not holes
        else "- Runs below it that did not keep up, at: "
        + ", ".join(f"{r:,}" for r in holes)
        + " tx/s."
    )
    best = max(delivered(s) for s in summaries)
    above = [s for r, runs in rates.items() if r > capacity for s in runs]
    if above:
        worst = min(delivered(s) for s in above)
        p50s = [s.end_to_end.latency.p50_ms for s in above if s.end_to_end.latency.count]
        lines.append(
            f"- Above it, the worst run delivered {worst:,.0f} tx/s, {worst / best:.0%} of the best"
            f" run ({best:,.0f} tx/s; at least {ABOVE_CAPACITY:.0%} wanted), with end-to-end p50"
            f" at most {fmt(max(p50s) if p50s else None)} ms."
        )
        lines.extend(_cpu_of(above))
    return [*lines, *peak_line]


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


def kept_up_cell(rule: Rule, runs: Sequence[Summary]) -> str:
    """`k of n`, and how many runs failed each condition of the rule (`a 2, c 1`)."""
    failed = [rule.failed(s) for s in runs]
    kept = sum(not f for f in failed)
    counts = {c: sum(c in f for f in failed) for c in "abc"}
    why = ", ".join(f"{c} {n}" for c, n in counts.items() if n)
    return f"{kept} of {len(runs)}" + (f" ({why})" if why else "")


def _rows(summaries: Sequence[Summary]) -> list[list[str]]:
    rule = Rule.of(summaries)
    rows = []
    for rate, runs in by_rate(summaries).items():
        rows.append(
            [
                f"{rate:,}",
                kept_up_cell(rule, runs),
                spread([delivered(s) for s in runs]),
                fmt(median_of([e2e_p50(s) for s in runs])),
                spread([node_us_per_tx(s) for s in runs], 2),
                share(median_of([held_back(s) for s in runs])),
                share(median_of([mempools_held_back(s) for s in runs])),
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
    page.add(
        "",
        CAPACITY_RULE,
        "Runs kept up: how many kept up, and after it how many failed each condition (a, b, c)."
        " Clients held back: the rule's (b); mempools held back: the share of the window the"
        " nodes' mempools sat at their bound on uncommitted bytes.",
    )
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
                "clients held back (share)",
                "mempools held back (share)",
                "rounds/s",
                "node RSS MiB",
            ],
            _rows(outcome.summaries),
        )
    by_mode: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_mode.setdefault(str(outcome.configuration.flags["mode"]), []).append(outcome)
    for mode, drawn in by_mode.items():
        if mode == "hotcrypto":
            honest = [o for o in drawn if "invalid_share" not in o.configuration.flags]
            page.section("`attested` against `all`", *versus(honest))
            page.section(
                f"{FORGED:.0%} of the transactions forged",
                f"The clients send one transaction in {round(1 / FORGED)} with a forged"
                " signature (`--invalid-share`); a run keeps up when it delivers the valid ones"
                " it was asked for. Each node checks its clients' transactions before it seals"
                " them (docs/protocol.md), so a forgery costs one check where it arrives.",
                *forged(drawn),
            )
        _robustness_figure(drawn, mode, page)


def _robustness_figure(outcomes: Sequence[Outcome], mode: str, page: Page) -> None:
    figure, axes = plt.subplots()
    for outcome in outcomes:
        points = [(float(s.config.get("rate") or 0), delivered(s)) for s in outcome.summaries]
        if not points:
            continue
        medians = [
            (r, median(delivered(s) for s in runs))
            for r, runs in by_rate(outcome.summaries).items()
        ]
        label = f"{outcome.configuration.label} (median)"
        line = axes.plot(*zip(*medians, strict=True), marker="o", label=label)
        axes.scatter(*zip(*points, strict=True), color=line[0].get_color(), alpha=0.4, s=12)
    axes.set_xlabel("Input rate asked (tx/s)")
    axes.set_ylabel("Delivered (tx/s)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    name = "robustness" if mode == "hotstuff" else f"robustness-{mode}"
    page.figure(figure, name, f"Delivered against asked, every run a dot ({mode})")


def _capacity(summaries: Sequence[Summary]) -> int | None:
    """The highest rate at which every run kept up, if any did."""
    rule = Rule.of(summaries)
    full = [r for r, runs in by_rate(summaries).items() if all(rule.kept_up(s) for s in runs)]
    return max(full) if full else None


def versus(outcomes: Sequence[Outcome]) -> list[str]:
    """`attested` beside `all` at each rate both ran: the median each delivered, and whether
    `attested` ever delivered less than `all`, or less than its own capacity above it."""
    runs = {
        str(o.configuration.flags.get("verify")): by_rate(o.summaries)
        for o in outcomes
        if o.summaries
    }
    attested, every = runs.get("attested"), runs.get("all")
    if attested is None or every is None:
        return ["- Needs runs of both."]
    lines = []
    # Rates where `attested` delivered less, the runs' ranges apart; and where only its median
    # was lower, which the runs' spread does not settle.
    below, unsettled = [], []
    for rate in sorted(set(attested) & set(every)):
        a = median(delivered(s) for s in attested[rate])
        b = median(delivered(s) for s in every[rate])
        ranges = compare(
            runs_span([delivered(s) for s in attested[rate]]),
            runs_span([delivered(s) for s in every[rate]]),
        )
        lines.append(
            f"- {rate:,} tx/s asked: `attested` delivered {a:,.0f} tx/s (median), `all`"
            f" {b:,.0f}: {a / b - 1:+.0%} ({_ranges(ranges)})."
        )
        if ranges.verdict == APART and ranges.higher == 1:
            below.append(rate)
        elif a < b:
            unsettled.append(rate)
    if below:
        lines.append(
            "- `attested` delivered less than `all`, the runs' ranges apart, at: "
            + ", ".join(f"{r:,}" for r in below)
            + "."
        )
    elif unsettled:
        lines.append(
            "- `attested` never delivered less than `all` beyond the runs' spread: its median"
            " was lower at " + ", ".join(f"{r:,}" for r in unsettled) + ", where the ranges"
            " overlap or too few runs settle it."
        )
    else:
        lines.append("- `attested` delivered at least what `all` delivered at every rate.")
    summaries = [s for by in attested.values() for s in by]
    capacity = _capacity(summaries)
    above = [s for r, by in attested.items() if capacity is not None and r > capacity for s in by]
    if capacity is not None and above:
        worst = min(delivered(s) for s in above)
        lines.append(
            f"- Above its capacity ({capacity:,} tx/s), `attested`'s worst run delivered"
            f" {worst:,.0f} tx/s, {worst / capacity:.0%} of it (at least 100% wanted: a stage"
            " that pushes back delivers its capacity however much is asked)."
        )
    return lines


def _ranges(comparison: Comparison) -> str:
    if comparison.verdict == APART:
        return "ranges apart"
    if comparison.verdict == OVERLAPPING:
        return "ranges overlap"
    return f"not settled: {comparison.why}"


def forged(outcomes: Sequence[Outcome]) -> list[str]:
    """Per mode, what runs with forged transactions delivered against runs without at the rates
    both ran, and whether the forged runs' peak kept `FORGED_KEEPS` of the honest runs'."""
    by_kind: dict[tuple[str, bool], list[Summary]] = {}
    for outcome in outcomes:
        verify = str(outcome.configuration.flags.get("verify"))
        by_kind.setdefault((verify, "invalid_share" in outcome.configuration.flags), []).extend(
            outcome.summaries
        )
    lines = []
    for verify in VERIFY:
        honest = by_rate(by_kind.get((verify, False), []))
        with_forged = by_rate(by_kind.get((verify, True), []))
        common = sorted(set(honest) & set(with_forged))
        if not common:
            lines.append(f"- `{verify}`: needs runs with and without forgeries at one rate.")
            continue
        for rate in common:
            a = [delivered(s) for s in with_forged[rate]]
            b = [delivered(s) for s in honest[rate]]
            lines.append(
                f"- `{verify}`, {rate:,} tx/s asked: {spread(a)} valid tx/s delivered with"
                f" forgeries, {spread(b)} without: {median(a) / median(b) - 1:+.0%}."
            )
        best_forged = max(median(delivered(s) for s in with_forged[r]) for r in common)
        best_honest = max(median(delivered(s) for s in honest[r]) for r in common)
        kept = best_forged / best_honest
        lines.append(
            f"- `{verify}`: with forgeries, the best median {fmt(best_forged)} tx/s is"
            f" {kept:.0%} of the {fmt(best_honest)} without, at these rates:"
            f" {'within' if kept >= FORGED_KEEPS else 'below'} the {FORGED_KEEPS:.0%} wanted."
        )
    return lines


OVERLOAD = Experiment(
    name="overload",
    title="Overload: capacity, and what runs above it deliver",
    question=(
        "Does a committee offered more than it can order keep delivering its capacity with"
        " bounded latency, and does every rate below its capacity keep up, run after run?"
        " (`hotstuff`, 4 nodes and 4 clients on this machine, with and without `--store`; then"
        " `hotcrypto` with every node checking every signature, `--verify=all`, against"
        " `--verify=attested`.)"
    ),
    configurations=_configurations,
    write=_write,
)
