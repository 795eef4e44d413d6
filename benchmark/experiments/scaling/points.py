"""The points of the `scaling` experiment: what each configuration is (a family, n nodes of a
budget each, the rates it is asked), which the model is fitted on, and what a point measured."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ...analysis.run_summary import Summary
from ...analysis.stages.model import Point
from ..experiment import Configuration, Outcome
from ..measures import KEEPS_UP, by_rate, delivered, fmt, median_of, stage_us_per_tx

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


def configurations(quick: bool) -> Sequence[Configuration]:
    runs, duration = (1, 5) if quick else (3, 12)
    return [spec.configuration(runs, duration) for spec in specs(quick)]


# -- what a point measured ------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    spec: Spec
    # The runs of the rate whose median delivered the most: the point at saturation.
    runs: tuple[Summary, ...]
    # The highest rate the point's runs were asked (as they ran, whatever the spec says now).
    top_rate: int

    @property
    def capacity(self) -> float:
        return median(delivered(s) for s in self.runs)

    @property
    def saturated(self) -> bool:
        """Delivered less than the highest rate asked: a capacity, not a lower bound of one."""
        return self.capacity < KEEPS_UP * self.top_rate

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
        points.append(Measured(_spec_of(outcome.configuration), tuple(best), max(rates)))
    return points


def node_cores(summary: Summary) -> float | None:
    """Cores one node used over the window (all its threads: what its budget counts)."""
    return summary.resources.nodes.cpu_cores if summary.resources else None


def _per_tx(summary: Summary, per_second: float | None) -> float | None:
    """A node's per-second figure over the transactions the committee ordered a second."""
    consensus = summary.consensus
    if per_second is None or consensus is None or consensus.tps <= 0:
        return None
    return per_second / consensus.tps


def _per_round(summary: Summary, per_second: float | None) -> float | None:
    """A node's per-second figure over the rounds it made a second."""
    rounds = rounds_per_second(summary)
    return None if per_second is None or not rounds else per_second / rounds


def sent_per_tx(summary: Summary) -> float | None:
    traffic = summary.traffic
    return _per_tx(summary, traffic.sent_bytes_per_s if traffic else None)


def received_per_tx(summary: Summary) -> float | None:
    traffic = summary.traffic
    return _per_tx(summary, traffic.received_bytes_per_s if traffic else None)


def frames_per_round(summary: Summary) -> float | None:
    traffic = summary.traffic
    return _per_round(summary, traffic.frames_per_s if traffic else None)


def signatures_per_round(summary: Summary) -> float | None:
    traffic = summary.traffic
    return _per_round(summary, traffic.signatures_per_s if traffic else None)


def rounds_per_second(summary: Summary) -> float | None:
    return summary.rounds.rounds_per_second if summary.rounds is not None else None


def bound_per_second(summary: Summary) -> float | None:
    """What the committee could deliver if every round carried one node's whole uncommitted
    bound (`COMMITTEE_BOUND` bytes of its transactions), at the rounds a second it made."""
    consensus, rounds = summary.consensus, rounds_per_second(summary)
    if consensus is None or not consensus.bps or consensus.tps <= 0 or not rounds:
        return None
    return COMMITTEE_BOUND / (consensus.bps / consensus.tps) * rounds


def txs_per_round(summary: Summary) -> float | None:
    rounds = rounds_per_second(summary)
    if not rounds or summary.consensus is None:
        return None
    return summary.consensus.tps / rounds
