"""`scaling`: the report's axes measured on this machine, committee size and cores per node, and
a cost model fitted on some of the runs and checked against the others.

Every node runs under a CPU budget of its own (`--node-cpus`), so a point is "n nodes of X cores
each" whatever else shares the machine, and more nodes than cores stay meaningful.

* Committee: `hotstuff` and `hotcrypto` at n = 4 to 31 nodes of 0.05 cores each (31 of them and
  their clients fill the machine's 2 cores; that is where the sweep stops). Per node and per
  transaction: CPU, bytes sent and received, and per round the frames and consensus signatures.
* Cores: 4 nodes of 0.1 to 0.4 cores, and one node alone of 0.5 and 1 core: `hotcrypto`,
  `hotmove` executing sequentially and under Block-STM.
* The model (`analysis/model.py`) is fitted on the points `FITTED` names and predicts every other
  one; the page prints each prediction beside what the point delivered, and the error.

A point's capacity is what it delivered at saturation: the best median over the rates it was
asked (each above what it can do), executed transactions for the modes that execute, committed
for `hotstuff`. The uncommitted bound is `COMMITTEE_BOUND` bytes per node throughout: the default
(8 MiB) lets a committee of 31 hold 248 MiB in flight before its mempools hold clients back,
which nodes of 0.05 cores take longer to receive than a round's timeout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import matplotlib.pyplot as plt

from ..analysis.model import CostModel, Line, Point, Prediction, fit
from ..analysis.projection import ONE_PER_CORE
from ..analysis.summary import Summary
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    KEEPS_UP,
    by_rate,
    delivered,
    fmt,
    median_of,
    node_us_per_tx,
    spread,
    stage_us_per_tx,
)
from .page import Page
from .report_figures import COMMITTEE_HOTCRYPTO, CORES_HOTCRYPTO

COMMITTEE_BUDGET = 0.05
COMMITTEE_BOUND = 500_000
FAMILIES = ("hotstuff", "hotcrypto", "hotmove", "hotmove --exec=blockstm")
# A prediction within this share of the measured capacity meets the goal.
GOAL = 0.15
# Nodes that used at least this share of their budget were bound by their CPU: the points the
# CPU model is fitted on and checked against.
CPU_BOUND_SHARE = 0.9


@dataclass(frozen=True)
class Spec:
    """One point of an axis: a family (mode, and how it executes), n nodes of `cores` each."""

    axis: str
    family: str
    nodes: int
    cores: float
    rates: tuple[int, ...]

    @property
    def key(self) -> tuple[str, int, float]:
        return (self.family, self.nodes, self.cores)

    @property
    def label(self) -> str:
        return f"{self.axis}: {self.family}, {self.nodes} x {self.cores:g} cores"

    def configuration(self, runs: int, duration: int) -> Configuration:
        mode, _, exec_flag = self.family.partition(" --exec=")
        flags: dict[str, str | bool] = {"mode": mode}
        if exec_flag:
            flags["exec"] = exec_flag
        flags |= {
            "nodes": str(self.nodes),
            "node_cpus": f"{self.cores:g}",
            "max_uncommitted_bytes": str(COMMITTEE_BOUND),
            "rate": ",".join(str(r) for r in self.rates),
            "runs": str(runs),
            "duration": str(duration),
        }
        return Configuration(self.label, flags)


def _committee(nodes: Sequence[int]) -> list[Spec]:
    rates = {"hotstuff": (30_000, 100_000), "hotcrypto": (3_000,)}
    return [
        Spec("committee", family, n, COMMITTEE_BUDGET, rates[family])
        for family in ("hotstuff", "hotcrypto")
        for n in nodes
    ]


def _cores(points: Sequence[tuple[int, float]], families: Sequence[str]) -> list[Spec]:
    """Asked about 1.5 times what a node of that budget verifies (about 20 µs a transaction);
    hotstuff, which verifies nothing, about 1 and 2 times what it orders (about 0.6 µs)."""
    return [
        Spec(
            "cores",
            family,
            n,
            cores,
            (int(cores * 1_500_000), int(cores * 3_000_000))
            if family == "hotstuff"
            else (int(cores * 80_000),),
        )
        for family in families
        for n, cores in points
    ]


def specs(quick: bool) -> list[Spec]:
    if quick:
        return [
            *_committee((4, 7)),
            *_cores(((4, 0.1),), ("hotstuff",)),
            *_cores(((4, 0.1), (4, 0.2), (1, 0.5)), ("hotcrypto",)),
            *_cores(((4, 0.2),), ("hotmove",)),
        ]
    return [
        *_committee((4, 7, 10, 16, 22, 31)),
        *_cores(((4, 0.1), (4, 0.2)), ("hotstuff",)),
        *_cores(((4, 0.1), (4, 0.2), (4, 0.4), (1, 0.5), (1, 1.0)), FAMILIES[1:]),
    ]


# The points the model is fitted on, per family; it predicts every other point of the family.
# hotmove's families have no committee points: they borrow hotcrypto's growth with n (the same
# consensus and the same signatures: only execution differs).
FITTED: dict[str, set[tuple[int, float]]] = {
    "hotstuff": {(4, COMMITTEE_BUDGET), (10, COMMITTEE_BUDGET), (22, COMMITTEE_BUDGET), (4, 0.1)},
    "hotcrypto": {
        (4, COMMITTEE_BUDGET),
        (10, COMMITTEE_BUDGET),
        (22, COMMITTEE_BUDGET),
        (4, 0.2),
        (4, 0.4),
    },
    "hotmove": {(4, 0.2)},
    "hotmove --exec=blockstm": {(4, 0.2)},
}
BORROWS = {"hotmove": "hotcrypto", "hotmove --exec=blockstm": "hotcrypto"}


def _configurations(quick: bool) -> Sequence[Configuration]:
    runs, duration = (1, 5) if quick else (3, 12)
    return [spec.configuration(runs, duration) for spec in specs(quick)]


# -- what a point measured ------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    spec: Spec
    # The runs of the rate whose median delivered the most: the point at saturation.
    runs: tuple[Summary, ...]

    @property
    def capacity(self) -> float:
        return median(delivered(s) for s in self.runs)

    @property
    def saturated(self) -> bool:
        """Delivered less than the highest rate asked: a capacity, not a lower bound of one."""
        return self.capacity < KEEPS_UP * max(self.spec.rates)

    @property
    def budget_used(self) -> float | None:
        """The share of its budget a node used (median of the runs)."""
        used = self.median(node_cores)
        return None if used is None else used / self.spec.cores

    @property
    def cpu_bound(self) -> bool:
        used = self.budget_used
        return used is not None and used >= CPU_BOUND_SHARE

    @property
    def why_not_modelled(self) -> str | None:
        """Why the CPU model does not apply to this point, or None when it does."""
        if not self.saturated:
            return "not saturated: delivered the rate asked"
        if not self.cpu_bound:
            used = self.budget_used
            return "not CPU-bound: nodes used" + (
                f" {used:.0%} of their budget" if used is not None else " less than their budget"
            )
        return None

    def describe(self) -> str:
        return ("" if self.saturated else "≥ ") + fmt(self.capacity)

    def median(self, measure: object) -> float | None:
        return median_of([measure(s) for s in self.runs])  # type: ignore[operator]

    def point(self) -> Point:
        stages = {
            row.name: c
            for row in self.runs[0].stages
            if (c := self.median(stage_us_per_tx(row.name))) is not None
        }
        used = self.median(node_cores)
        return Point(
            nodes=self.spec.nodes,
            cores=self.spec.cores,
            tps=self.capacity,
            node_cores_used=used if used is not None else self.spec.cores,
            us_per_tx=stages,
            sent_bytes_per_tx=self.median(sent_per_tx),
            received_bytes_per_tx=self.median(received_per_tx),
        )


def _spec_of(configuration: Configuration) -> Spec:
    flags = configuration.flags
    family = str(flags["mode"]) + (f" --exec={flags['exec']}" if "exec" in flags else "")
    axis = configuration.label.split(":", 1)[0]
    rates = tuple(int(r) for r in str(flags["rate"]).split(","))
    return Spec(axis, family, int(str(flags["nodes"])), float(str(flags["node_cpus"])), rates)


def measured(outcomes: Sequence[Outcome]) -> list[Measured]:
    points = []
    for outcome in outcomes:
        if not outcome.summaries:
            continue
        rates = by_rate(outcome.summaries)
        best = max(rates.values(), key=lambda runs: median(delivered(s) for s in runs))
        points.append(Measured(_spec_of(outcome.configuration), tuple(best)))
    return points


def node_cores(summary: Summary) -> float | None:
    """Cores one node used over the window (all its threads: what its budget counts)."""
    return summary.resources.nodes.cpu_cores if summary.resources else None


def sent_per_tx(summary: Summary) -> float | None:
    traffic, consensus = summary.traffic, summary.consensus
    if traffic is None or consensus is None or consensus.tps <= 0:
        return None
    return traffic.sent_bytes_per_s / consensus.tps


def received_per_tx(summary: Summary) -> float | None:
    traffic, consensus = summary.traffic, summary.consensus
    if traffic is None or consensus is None or consensus.tps <= 0:
        return None
    return traffic.received_bytes_per_s / consensus.tps


def frames_per_round(summary: Summary) -> float | None:
    traffic, rounds = summary.traffic, summary.rounds
    if traffic is None or rounds is None or rounds.rounds_per_second <= 0:
        return None
    return traffic.frames_per_s / rounds.rounds_per_second


def signatures_per_round(summary: Summary) -> float | None:
    traffic, rounds = summary.traffic, summary.rounds
    if traffic is None or traffic.signatures_per_s is None or rounds is None:
        return None
    per_second = rounds.rounds_per_second
    return traffic.signatures_per_s / per_second if per_second > 0 else None


def rounds_per_second(summary: Summary) -> float | None:
    return summary.rounds.rounds_per_second if summary.rounds is not None else None


def txs_per_round(summary: Summary) -> float | None:
    rounds = rounds_per_second(summary)
    if not rounds or summary.consensus is None:
        return None
    return summary.consensus.tps / rounds


# -- the model ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    point: Measured
    prediction: Prediction
    fitted: bool

    @property
    def error(self) -> float:
        return self.prediction.tps / self.point.capacity - 1 if self.point.capacity > 0 else 0.0

    @property
    def judged(self) -> bool:
        """A prediction the model is judged on: of a point it was not fitted on, that was
        saturated and bound by its CPU."""
        return not self.fitted and self.point.why_not_modelled is None


def models(points: Sequence[Measured]) -> dict[str, CostModel]:
    """A model per family, fitted on its `FITTED` points that ran."""
    fitted: dict[str, CostModel] = {}
    for family in FAMILIES:
        chosen = [
            p.point()
            for p in points
            if p.spec.family == family
            and (p.spec.nodes, p.spec.cores) in FITTED[family]
            and p.why_not_modelled is None
        ]
        if not chosen:
            continue
        model = fit(chosen)
        lender = fitted.get(BORROWS.get(family, ""))
        sizes = {p.nodes for p in chosen}
        if lender is not None and len(sizes) == 1:
            model = model.with_growth_of(lender, sizes.pop())
        fitted[family] = model
    return fitted


def checks(points: Sequence[Measured]) -> list[Check]:
    fitted = models(points)
    result = []
    for p in points:
        model = fitted.get(p.spec.family)
        if model is None:
            continue
        executor = ONE_PER_CORE if "--exec=" in p.spec.family else 1
        prediction = model.predict(p.spec.nodes, p.spec.cores, executor_threads=executor)
        if prediction is not None:
            fit_here = (
                p.spec.nodes,
                p.spec.cores,
            ) in FITTED.get(p.spec.family, set()) and p.why_not_modelled is None
            result.append(Check(p, prediction, fit_here))
    return result


# -- the page -------------------------------------------------------------------------------------


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


def _growth(rows: Sequence[Measured]) -> list[str]:
    """How the per-node costs grow with n, as fitted lines over every point of the sweep."""
    lines = []
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
            lines.append(
                f"- {nodes} node{'s' if nodes > 1 else ''} of {cores:g} cores: Block-STM"
                f" delivered {par.capacity / seq.capacity:.2f} times sequential execution"
                f" ({par.capacity:,.0f} against {seq.capacity:,.0f} tx/s)."
            )
    return lines


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
        "Per family (`benchmark/analysis/model.py`), a node's CPU per second at T tx/s is"
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


def error_summary(found: Sequence[Check]) -> list[str]:
    predicted = [c for c in found if c.judged]
    others = [c for c in found if not c.fitted and not c.judged]
    lines = []
    if not predicted:
        lines.append("- No saturated, CPU-bound point was left out of the fit: nothing to judge.")
    else:
        errors = sorted(abs(c.error) for c in predicted)
        within = sum(e <= GOAL for e in errors)
        lines.append(
            f"- Prediction error on the {len(predicted)} points not fitted: median"
            f" {median(errors):.0%}, largest {errors[-1]:.0%}; {within} of {len(predicted)}"
            f" within ±{GOAL:.0%} of the delivered capacity."
        )
    if others:
        lines.append(
            f"- Not judged: {len(others)} points the CPU model does not describe ("
            + "; ".join(
                f"{c.point.spec.family} {c.point.spec.nodes} x {c.point.spec.cores:g}:"
                f" {c.point.why_not_modelled}"
                for c in others
            )
            + "). A node below its budget was held back by something else: in a committee,"
            " by how many transactions a round carries and how many rounds a second the"
            " throttled members make (columns tx/round and rounds/s above)."
        )
    return lines


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    points = measured(outcomes)
    fitted = models(points)
    _committee_section(points, page)
    _cores_section(points, fitted, page)
    _model_section(points, fitted, page)


SCALING = Experiment(
    name="scaling",
    title="Scaling: committee size and cores per node, measured, and a cost model checked",
    question=(
        "How do throughput and a node's costs grow with the committee, at a fixed CPU budget per"
        " node, and with the cores per node? Does a model fitted on some of these points"
        " predict the others? (Every node under its own CPU budget, `--node-cpus`, on this"
        " machine's 2 cores.)"
    ),
    configurations=_configurations,
    write=_write,
)
