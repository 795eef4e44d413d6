"""A model of a committee's capacity: n nodes of V (virtual) CPUs each, over links of a given
one-way latency and rate, from terms measured on some runs and judged on the others.

What a node spends, in µs of CPU per second, ordering T transactions a second in R rounds:

    CPU(T, R, n) = T · c(n) + R · f(n)
    c(n) = c0 + c1 · (n - 1)    per transaction: receiving, hashing and storing batches (a node
                                takes every member's), verifying and executing
    f(n) = f0 + f1 · (n - 1)    per round: proposals, votes and certificates and their signatures

How many rounds a second the committee makes:

    1 / R = p(n) + 2 · d        a round's own time p(n) = p0 + p1 · (n - 1) (processing, and the
                                wait for the slowest of a quorum), and the one-way latency d its
                                proposal and its votes each cross

What bounds T, the smallest of:

* the CPU:            T ≤ (V · 10⁶ - R · f(n)) / c(n)
* one bound a round:  T ≤ R · B / s, a leader proposing what it holds (B: a node's uncommitted
                      bound in bytes, s: bytes per transaction)
* a stage's ceiling:  T ≤ threads · 10⁶ / κ(n), for a stage that cannot use the node's every CPU
                      (consensus is one thread; so is sequential execution), κ its µs per
                      transaction at saturation
* a link's rate:      T ≤ link bits per second / 8 / bytes a node moves per transaction

Fitting. c and f by least squares on the whole node's CPU (what its budget counts) against the
throughput and rounds each fitted point made; p from the rounds each made (less its links'
latency); κ and the bytes per transaction as lines in n over the fitted points that were
saturated (a stage's cost per transaction at a low rate carries its per-round costs over few
transactions). A term the points cannot tell apart is left out rather than guessed, and a term
fitted below zero is noise, left out too (`_fit_cpu`). A family fitted at one committee size can
take another's growth with n (`with_growth_of`): only the slopes, so nothing it measured is
counted twice.

The machine's speed. CPU terms are µs of the machine they were measured on. A model keeps the
speed probe taken beside its fitted runs (`speed`, any index that grows with the machine's
speed), and a prediction for a point measured beside another probe scales them by the ratio.

Assumptions, and which way each errs: a cost per transaction does not change with the rate (a
larger batch verifies cheaper per signature: errs low above the fitted rates); a round's time
does not depend on how full it is (a full round takes longer to hash and verify: errs high where
rounds are full); every node of a committee costs the same (a leader does more).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import median

import numpy as np

# What binds a prediction, besides a stage's own name.
CPU_BOUND = "cpu"
ROUNDS = "one bound a round"
BANDWIDTH = "bandwidth"
# The stages whose threads a node's CPUs are shared between (their ceilings are the node's).
POOLED = ("verifier",)
# One thread whatever the node's size.
ONE_THREAD = ("consensus",)


@dataclass(frozen=True)
class Point:
    """What one point measured (the median of its runs): n nodes of `vcpus` each, the throughput
    it delivered and whether that was all it could (`saturated`), what a node used for it, the
    rounds it made, each stage's CPU per transaction, the bytes a node moved and a transaction
    weighed, and where it ran: its links' one-way latency and rate, its uncommitted bound, and
    the machine's speed beside its runs."""

    nodes: int
    vcpus: float
    tps: float
    saturated: bool
    node_cores_used: float
    rounds_per_s: float | None = None
    us_per_tx: Mapping[str, float] = field(default_factory=dict)
    bytes_per_tx: float | None = None
    tx_bytes: float | None = None
    bound_bytes: float | None = None
    one_way_ms: float = 0.0
    link_mbit: float | None = None
    speed: float | None = None
    # The executor's threads (1 when it runs sequentially).
    exec_threads: int = 1


@dataclass(frozen=True)
class Line:
    """`fixed + per_member · (n - 1)`."""

    fixed: float
    per_member: float = 0.0

    def at(self, nodes: int) -> float:
        return max(0.0, self.fixed + self.per_member * (nodes - 1))

    @staticmethod
    def fit(points: Sequence[tuple[int, float]]) -> Line:
        """Least squares over (n, value); a constant (the median) when every point has one n."""
        if not points:
            raise ValueError("a line needs at least one point")
        xs = [float(n - 1) for n, _ in points]
        ys = [v for _, v in points]
        mean_x = sum(xs) / len(xs)
        spread = sum((x - mean_x) ** 2 for x in xs)
        if spread == 0:
            return Line(fixed=median(ys))
        mean_y = sum(ys) / len(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
        return Line(fixed=mean_y - slope * mean_x, per_member=slope)

    def through(self, nodes: int, per_member: float) -> Line:
        """The line of slope `per_member` through this one's value at `nodes`."""
        return Line(self.at(nodes) - per_member * (nodes - 1), per_member)


@dataclass(frozen=True)
class Prediction:
    tps: float
    # What binds: `CPU_BOUND`, `ROUNDS`, `BANDWIDTH` or a stage at its ceiling.
    bound: str
    rounds_per_s: float | None
    # Each bound's own ceiling, by name (what the others would allow).
    ceilings: Mapping[str, float]


@dataclass(frozen=True)
class CostModel:
    per_tx: Line
    per_round: Line
    # A round's own time, ms; None when no fitted point made rounds (one node).
    round_ms: Line | None
    # Each one-thread stage's µs per transaction at saturation.
    stages: Mapping[str, Line]
    bytes_per_tx: Line | None
    tx_bytes: float | None
    # The speed probe beside the fitted runs.
    speed: float | None
    fitted: tuple[tuple[int, float], ...]

    def predict(self, point: Point) -> Prediction | None:
        """The capacity of `point`'s committee (its size, CPUs, links, bound and machine)."""
        scale = self._scale(point.speed)
        per_tx = self.per_tx.at(point.nodes) * scale
        if per_tx <= 0:
            return None
        per_round = self.per_round.at(point.nodes) * scale
        rounds = self.rounds_per_s(point.nodes, point.one_way_ms, scale)
        free = max(0.0, point.vcpus * 1e6 - (rounds or 0.0) * per_round)
        ceilings = {CPU_BOUND: free / per_tx}
        tx_bytes = point.tx_bytes or self.tx_bytes
        if rounds and point.bound_bytes and tx_bytes:
            ceilings[ROUNDS] = rounds * point.bound_bytes / tx_bytes
        for stage, cost in self.stages.items():
            threads = point.exec_threads if stage == "executor" else 1
            if cost.at(point.nodes) > 0 and threads < point.vcpus:
                ceilings[stage] = threads * 1e6 / (cost.at(point.nodes) * scale)
        moved = self.bytes_per_tx.at(point.nodes) if self.bytes_per_tx else None
        if point.link_mbit is not None and moved:
            ceilings[BANDWIDTH] = point.link_mbit * 1e6 / 8 / moved
        bound = min(ceilings, key=lambda name: (ceilings[name], name))
        return Prediction(ceilings[bound], bound, rounds, ceilings)

    def rounds_per_s(self, nodes: int, one_way_ms: float, scale: float = 1.0) -> float | None:
        if self.round_ms is None:
            return None
        seconds = (self.round_ms.at(nodes) * scale + 2 * one_way_ms) / 1000
        return 1 / seconds if seconds > 0 else None

    def _scale(self, speed: float | None) -> float:
        """How much more CPU a term costs on a machine of `speed` than on the fitted one's."""
        if self.speed is None or speed is None or speed <= 0:
            return 1.0
        return self.speed / speed

    def with_growth_of(self, lender: CostModel, nodes: int) -> CostModel:
        """This model (fitted at the one committee size `nodes`) with the lender's growth in n:
        each line keeps its own value at `nodes` and takes the lender's slope; a term this model
        has none of stays none (the lender's fixed part is not added to costs that hold it)."""

        def grown(own: Line, lent: Line | None) -> Line:
            if lent is None or own.per_member or (own.fixed == 0 and own.per_member == 0):
                return own
            return own.through(nodes, lent.per_member)

        return replace(
            self,
            per_tx=grown(self.per_tx, lender.per_tx),
            per_round=grown(self.per_round, lender.per_round),
            round_ms=(grown(self.round_ms, lender.round_ms) if self.round_ms else lender.round_ms),
            stages={s: grown(c, lender.stages.get(s)) for s, c in self.stages.items()},
            bytes_per_tx=(
                grown(self.bytes_per_tx, lender.bytes_per_tx)
                if self.bytes_per_tx
                else lender.bytes_per_tx
            ),
        )

    def terms(self) -> list[tuple[str, str]]:
        """The fitted terms, named as a page prints them."""
        rows = [
            ("c(n): node CPU per transaction", _describe(self.per_tx, "µs")),
            ("f(n): node CPU per round", _describe(self.per_round, "µs")),
        ]
        if self.round_ms is not None:
            rows.append(("p(n): a round's own time", _describe(self.round_ms, "ms")))
        rows += [
            (f"{s}: µs per transaction at saturation", _describe(c, "µs"))
            for s, c in self.stages.items()
        ]
        if self.bytes_per_tx is not None:
            rows.append(("bytes a node moves per transaction", _describe(self.bytes_per_tx, "B")))
        if self.speed is not None:
            rows.append(("speed probe beside the fitted runs", f"{self.speed:,.0f}"))
        return rows


def fit(points: Sequence[Point]) -> CostModel:
    """The model fitted on `points` (runs of one family)."""
    if not points:
        raise ValueError("a model needs at least one measured point")
    per_tx, per_round = _fit_cpu(points)
    saturated = [p for p in points if p.saturated] or list(points)
    round_times = [
        (p.nodes, 1000 / p.rounds_per_s - 2 * p.one_way_ms)
        for p in saturated
        if p.rounds_per_s and p.nodes > 1
    ]
    stages = {
        stage: Line.fit([(p.nodes, p.us_per_tx[stage]) for p in saturated if stage in p.us_per_tx])
        for stage in sorted({s for p in saturated for s in p.us_per_tx})
        if stage in ONE_THREAD or stage == "executor"
    }
    moved = [(p.nodes, p.bytes_per_tx) for p in saturated if p.bytes_per_tx is not None]
    speeds = [p.speed for p in points if p.speed]
    sizes = [p.tx_bytes for p in points if p.tx_bytes]
    return CostModel(
        per_tx=per_tx,
        per_round=per_round,
        round_ms=Line.fit([(n, max(0.0, t)) for n, t in round_times]) if round_times else None,
        stages=stages,
        bytes_per_tx=Line.fit(moved) if moved else None,  # type: ignore[arg-type]
        tx_bytes=median(sizes) if sizes else None,
        speed=median(speeds) if speeds else None,
        fitted=tuple(sorted({(p.nodes, p.vcpus) for p in points})),
    )


# The regressors of CPU per second, most needed first: c0 · T, c1 · T · (n - 1), f0 · R,
# f1 · R · (n - 1). A fit keeps those the points can tell apart (`_identifiable`).
TERMS = ("c0", "c1", "f0", "f1")


def _fit_cpu(points: Sequence[Point]) -> tuple[Line, Line]:
    """c(n) and f(n) by least squares on each point's CPU per second."""
    rounds = [p.rounds_per_s or 0.0 for p in points]
    columns = {
        "c0": [p.tps for p in points],
        "c1": [p.tps * (p.nodes - 1) for p in points],
        "f0": rounds,
        "f1": [r * (p.nodes - 1) for r, p in zip(rounds, points, strict=True)],
    }
    used = np.array([p.node_cores_used * 1e6 for p in points])
    chosen = _identifiable(columns, len(points))
    while True:
        matrix = np.array([columns[t] for t in chosen]).T
        solution, *_ = np.linalg.lstsq(matrix, used, rcond=None)
        value = dict(zip(chosen, (float(v) for v in solution), strict=True))
        # A cost below zero (per round, or one that falls as the committee grows) is noise
        # fitted as a term: leave out the last such term and fit again.
        negative = [t for t in chosen if t != "c0" and value[t] < 0]
        if value["c0"] <= 0:
            # Everything put on the rounds: the points cannot tell the two apart.
            negative += [t for t in chosen if t.startswith("f")]
        if not negative:
            break
        chosen = [t for t in chosen if t != negative[-1]]
    return (
        Line(value.get("c0", 0.0), value.get("c1", 0.0)),
        Line(value.get("f0", 0.0), value.get("f1", 0.0)),
    )


def _identifiable(columns: Mapping[str, list[float]], rows: int) -> list[str]:
    """`TERMS` taken in order, each kept if the points can tell it apart from those already kept
    (independent columns, no more terms than points), c0 always."""
    chosen = ["c0"]
    for term in TERMS[1:]:
        trial = [*chosen, term]
        matrix = np.array([columns[t] for t in trial]).T
        # Columns scaled alike, so that rank does not mistake small units for dependence.
        scale = np.abs(matrix).max(axis=0)
        scale[scale == 0] = 1
        if len(trial) <= rows and np.linalg.matrix_rank(matrix / scale, tol=1e-6) == len(trial):
            chosen = trial
    return chosen


def _describe(line: Line, unit: str) -> str:
    if line.per_member == 0:
        return f"{line.fixed:,.2f} {unit}"
    return f"{line.fixed:,.2f} {unit} + {line.per_member:,.3f} {unit} x (n - 1)"
