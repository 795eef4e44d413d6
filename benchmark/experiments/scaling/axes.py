"""The sections of the `scaling` page: the committee axis, the cores axis, and the model with
its error."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from ...analysis.stages.model import CostModel, Line
from ...analysis.stages.projection import ONE_PER_CORE
from ..experiment import Outcome
from ..measures import delivered, fmt, node_us_per_tx, spread, stage_us_per_tx
from ..page import Page
from ..report_figures import COMMITTEE_HOTCRYPTO, CORES_HOTCRYPTO, CORES_HOTCRYPTO_POINTS
from .fit import Check, checks, error_summary, models
from .points import (
    COMMITTEE_BOUND,
    COMMITTEE_BUDGET,
    FAMILIES,
    Measured,
    bound_per_second,
    frames_per_round,
    measured,
    received_per_tx,
    rounds_per_second,
    sent_per_tx,
    signatures_per_round,
    txs_per_round,
)


def _committee_section(points: Sequence[Measured], page: Page) -> None:
    page.section(
        "Committee size",
        f"Every node of {COMMITTEE_BUDGET:g} cores (`--node-cpus`); what a node spent and moved,"
        " per transaction it ordered and per round, at saturation (median over the runs; the"
        " delivered column gives their spread).",
    )
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for family in ("hotstuff", "hotcrypto"):
        rows_of = sorted(
            (p for p in points if p.spec.axis == "committee" and p.spec.family == family),
            key=lambda p: p.spec.nodes,
        )
        if not rows_of:
            continue
        base = rows_of[0].capacity
        rows = [
            [
                str(p.spec.nodes),
                ("" if p.saturated else "≥ ") + spread([delivered(s) for s in p.runs]),
                f"{p.capacity / base:.2f}" if base else "-",
                _share(p.budget_used),
                fmt(p.median(node_us_per_tx), 1),
                fmt(p.median(stage_us_per_tx("consensus")), 2),
                fmt(p.median(sent_per_tx)),
                fmt(p.median(received_per_tx)),
                fmt(p.median(frames_per_round), 1),
                fmt(p.median(signatures_per_round), 1),
                fmt(p.median(rounds_per_second), 1),
                fmt(p.median(txs_per_round)),
                fmt(p.median(bound_per_second)),
            ]
            for p in rows_of
        ]
        page.add("", f"**{family}**")
        page.table(
            [
                "nodes",
                "delivered tx/s: median (min-max)",
                "of the smallest",
                "budget used",
                "node CPU µs/tx",
                "consensus µs/tx",
                "bytes sent/tx",
                "bytes received/tx",
                "frames/round",
                "signatures checked/round",
                "rounds/s",
                "tx/round",
                "one bound a round, tx/s",
            ],
            rows,
        )
        page.add("", *_growth(rows_of))
        xs = [p.spec.nodes for p in rows_of]
        left.plot(xs, [p.capacity / base for p in rows_of], marker="o", label=family)
        right.plot(
            xs, [p.median(stage_us_per_tx("consensus")) or 0 for p in rows_of], marker="o",
            label=family,
        )  # fmt: skip
    report = COMMITTEE_HOTCRYPTO
    left.plot(
        [report.smallest, report.largest],
        [1.0, report.factor],
        linestyle="--",
        color="grey",
        label=f"report, hotcrypto ({report.smallest} to {report.largest} nodes)",
    )
    left.set_xlabel("Committee size (nodes)")
    left.set_ylabel("Delivered, over the smallest committee's")
    right.set_xlabel("Committee size (nodes)")
    right.set_ylabel("Consensus CPU per transaction (µs, one node)")
    for axes in (left, right):
        axes.grid(True, alpha=0.3)
        axes.legend()
    page.figure(figure, "committee", "Delivered and consensus CPU per transaction against n")
    page.add(
        "",
        "- A leader proposes its own batches, so a round carries at most what one node holds"
        f" uncommitted (`--max-uncommitted-bytes={COMMITTEE_BOUND}` here):"
        " *one bound a round* is that many transactions times the rounds a second, the most"
        " the committee could deliver at the rounds it made. Where delivered meets it, the"
        " committee was bound by its rounds, not by its CPU: rounds slow as the committee grows"
        " (below), and the bound a node needs grows with them (the rate over rounds a second).",
    )
    page.add(
        "",
        f"- The report's Fig 1.2: hotcrypto fell from about {report.at_smallest:,.0f} tx/s at"
        f" {report.smallest} nodes to about {report.at_largest:,.0f} at {report.largest}, a"
        f" factor of {report.factor:.2f} for {report.largest / report.smallest:g} times the"
        " nodes (instances of 4 vCPUs over a network).",
        *_committee_factors(points),
        "- A budget is a CFS quota over periods of 100 ms: a node of 0.05 cores runs 5 ms of"
        " every 100 and waits out the rest, and a round needs 2f + 1 of them to have run. The"
        " larger the committee, the more a round waits on throttled members (rounds/s above),"
        " which a real core of that speed would not: runs of large committees vary more, from"
        " this as much as from the machine.",
    )


def _committee_factors(points: Sequence[Measured]) -> list[str]:
    """Each family's largest committee against its smallest, as the report's figure is read."""
    lines = []
    for family in ("hotstuff", "hotcrypto"):
        ours = sorted(
            (p for p in points if p.spec.axis == "committee" and p.spec.family == family),
            key=lambda p: p.spec.nodes,
        )
        if len(ours) < 2 or ours[0].capacity <= 0:
            continue
        small, large = ours[0], ours[-1]
        lines.append(
            f"- Here, {family} at {large.spec.nodes} nodes delivered"
            f" {large.capacity / small.capacity:.2f} times what it did at {small.spec.nodes}"
            f" ({large.capacity:,.0f} against {small.capacity:,.0f} tx/s), for"
            f" {large.spec.nodes / small.spec.nodes:.3g} times the nodes, every node of the same"
            " budget."
        )
    return lines


# A committee that delivered less than this share of the smallest one's collapsed: its costs
# per transaction and per round are those of timeouts and resent messages, not of the protocol
# working, and would bend the lines of growth.
COLLAPSED = 0.25


def _growth(rows: Sequence[Measured]) -> list[str]:
    """How the per-node costs grow with n, as fitted lines over the committees that did not
    collapse."""
    lines = []
    base = rows[0].capacity if rows else 0.0
    collapsed = [p for p in rows if p.capacity < COLLAPSED * base]
    rows = [p for p in rows if p not in collapsed]
    for name, measure, unit in (
        ("consensus CPU", stage_us_per_tx("consensus"), "µs/tx"),
        ("bytes received", received_per_tx, "B/tx"),
        ("signatures checked", signatures_per_round, "per round"),
        ("frames", frames_per_round, "per round"),
    ):
        values = [(p.spec.nodes, v) for p in rows if (v := p.median(measure)) is not None]
        if len({n for n, _ in values}) < 2:
            continue
        line = Line.fit(values)
        lines.append(
            f"- {name}: {line.fixed:,.2f} + {line.per_member:,.3f} x (n - 1) {unit}"
            f" (least squares over {len(values)} committee sizes)"
        )
    if collapsed and lines:
        lines.append(
            "- Left out of these lines, as collapsed (under"
            f" {COLLAPSED:.0%} of the smallest committee's throughput): n ="
            f" {', '.join(str(p.spec.nodes) for p in collapsed)}."
        )
    return lines


def _cores_section(points: Sequence[Measured], fitted: dict[str, CostModel], page: Page) -> None:
    page.section(
        "Cores per node",
        "4 nodes of each budget, and one node alone (its client beside it, uncapped). The"
        " limiting stage is the model's (below) at that point.",
    )
    rows = []
    figure, axes = plt.subplots()
    for family in FAMILIES:
        ours = sorted(
            (p for p in points if p.spec.axis == "cores" and p.spec.family == family),
            key=lambda p: (-p.spec.nodes, p.spec.cores),
        )
        for p in ours:
            model = fitted.get(family)
            executor = ONE_PER_CORE if "--exec=" in family else 1
            prediction = (
                model.predict(p.spec.nodes, p.spec.cores, executor_threads=executor)
                if model
                else None
            )
            rows.append(
                [
                    family,
                    str(p.spec.nodes),
                    f"{p.spec.cores:g}",
                    ("" if p.saturated else "≥ ") + spread([delivered(s) for s in p.runs]),
                    fmt(p.capacity / p.spec.cores),
                    _share(p.budget_used),
                    fmt(p.median(node_us_per_tx), 1),
                    fmt(p.median(stage_us_per_tx("verifier")), 1),
                    fmt(p.median(stage_us_per_tx("executor")), 1),
                    prediction.projection.limiting_stage if prediction else "-",
                ]
            )
        four = [p for p in ours if p.spec.nodes == 4]
        if four:
            axes.plot(
                [p.spec.cores for p in four], [p.capacity for p in four], marker="o", label=family
            )
    page.table(
        [
            "family",
            "nodes",
            "cores per node",
            "delivered tx/s: median (min-max)",
            "tx/s per core",
            "budget used",
            "node CPU µs/tx",
            "verifier µs/tx",
            "executor µs/tx",
            "limits (model)",
        ],
        rows,
    )
    page.add("", *_cores_verdict(points))
    model = fitted.get("hotcrypto")
    if model is not None:
        page.add(
            "",
            "The model (below) carried to the report's instances, 4 nodes of K vCPUs: a"
            " projection far past the budgets it was fitted on, not a measurement; its error on"
            " runs it was not fitted on is in the last section.",
        )
        rows_at = []
        for vcpus, reported in CORES_HOTCRYPTO_POINTS.items():
            at = model.predict(4, float(vcpus))
            rows_at.append(
                [
                    str(vcpus),
                    fmt(at.tps) if at else "-",
                    (at.projection.limiting_stage + f" ({at.bound})") if at else "-",
                    reported.text(),
                ]
            )
        page.table(
            ["vCPUs per node", "model, hotcrypto (tx/s)", "what limits (model)", "report's"],
            rows_at,
        )
    axes.set_xlabel("Cores per node (4 nodes)")
    axes.set_ylabel("Delivered (tx/s)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    page.figure(figure, "cores", "Delivered against cores per node")


def _cores_verdict(points: Sequence[Measured]) -> list[str]:
    lines = []
    report = CORES_HOTCRYPTO
    four = sorted(
        (p for p in points if p.spec.axis == "cores" and p.spec.family == "hotcrypto"),
        key=lambda p: p.spec.cores,
    )
    four = [p for p in four if p.spec.nodes == 4]
    if len(four) >= 2:
        low, high = four[0], four[-1]
        lines.append(
            f"- hotcrypto, 4 nodes: {high.spec.cores / low.spec.cores:g} times the cores gave"
            f" {high.capacity / low.capacity:.2f} times the throughput. The report's Fig 1.5:"
            f" {report.largest / report.smallest:g} times the vCPUs ({report.smallest} to"
            f" {report.largest}) for {report.factor:.1f} times."
        )
    for cores in sorted({p.spec.cores for p in points if p.spec.axis == "cores"}):
        for nodes in (4, 1):
            seq = _find(points, "hotmove", nodes, cores)
            par = _find(points, "hotmove --exec=blockstm", nodes, cores)
            if seq is None or par is None or seq.capacity <= 0:
                continue
            seq_us = seq.median(stage_us_per_tx("executor"))
            par_us = par.median(stage_us_per_tx("executor"))
            lines.append(
                f"- {nodes} node{'s' if nodes > 1 else ''} of {cores:g} cores: Block-STM"
                f" delivered {par.capacity / seq.capacity:.2f} times sequential execution"
                f" ({_describe(par)} against {_describe(seq)} tx/s), its executor at"
                f" {fmt(par_us, 1)} µs/tx against {fmt(seq_us, 1)}."
            )
    lines.append(
        "- Every node here spends its whole budget (the budget-used column) and verifies every"
        " transaction, so a parallel executor can only raise capacity by costing less CPU per"
        " transaction, and only the one-thread executor's ceiling (a full core: far above"
        " these budgets) would make more threads pay. The report's claim that a parallel VM"
        " takes CPU from signature verification holds in that sense wherever the node's CPU is"
        " the limit; it can help only where the sequential executor reaches a core of its own"
        " first, which the model's ceilings below place well beyond one core per node."
    )
    return lines


def _describe(point: Measured) -> str:
    return ("" if point.saturated else "≥ ") + fmt(point.capacity)


def _find(points: Sequence[Measured], family: str, nodes: int, cores: float) -> Measured | None:
    return next(
        (
            p
            for p in points
            if p.spec.family == family and p.spec.nodes == nodes and p.spec.cores == cores
        ),
        None,
    )


def _model_section(
    points: Sequence[Measured], fitted: dict[str, CostModel], page: Page
) -> list[Check]:
    page.section(
        "The cost model, and its error on runs it was not fitted on",
        "Per family (`benchmark/analysis/stages/model.py`), a node's CPU per second at T tx/s is"
        " F(n) + T · c(n), each term linear in n - 1, fitted by least squares on the whole"
        " node's CPU (what its budget counts) at the points marked *fitted*; a node of K cores"
        " then orders (K · 10⁶ - F(n)) / c(n) tx/s unless a one-thread stage reaches a core"
        " first. A term the fitted points cannot tell apart is left out (see the module)."
        " Every other row is a prediction, made from the fitted points alone.",
    )
    for family, model in fitted.items():
        fitted_at = ", ".join(f"{n} x {c:g}" for n, c in model.fitted)
        page.add("", f"**{family}** (fitted on {fitted_at})")
        page.table(["term", "fitted"], [[name, value] for name, value in model.terms()])
    found = checks(points)
    rows = [
        [
            c.point.spec.family,
            f"{c.point.spec.nodes} x {c.point.spec.cores:g}",
            "fitted" if c.fitted else "predicted" if c.judged else "not judged",
            fmt(c.prediction.tps),
            c.point.describe(),
            f"{c.error:+.0%}" if c.point.why_not_modelled is None else "-",
            c.point.why_not_modelled or c.prediction.bound,
            c.prediction.distance,
        ]
        for c in found
    ]
    page.table(
        [
            "family",
            "nodes x cores",
            "point",
            "model tx/s",
            "delivered tx/s",
            "error",
            "bound (model), or why not judged",
            "from the fitted points",
        ],
        rows,
    )
    page.add("", *error_summary(found))
    figure, axes = plt.subplots()
    for fitted_here, marker in ((True, "o"), (False, "x")):
        chosen = [c for c in found if c.fitted == fitted_here]
        axes.scatter(
            [c.point.capacity for c in chosen],
            [c.prediction.tps for c in chosen],
            marker=marker,
            label="fitted" if fitted_here else "predicted",
        )
    top = max([c.point.capacity for c in found] + [c.prediction.tps for c in found] + [1])
    axes.plot([0, top], [0, top], color="grey", linestyle="--")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("Delivered (tx/s)")
    axes.set_ylabel("Model (tx/s)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    page.figure(figure, "model", "The model against what each point delivered")
    return found


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def write(outcomes: Sequence[Outcome], page: Page) -> None:
    points = measured(outcomes)
    fitted = models(points)
    _committee_section(points, page)
    _cores_section(points, fitted, page)
    _model_section(points, fitted, page)
