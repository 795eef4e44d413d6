"""A cost model of a node: the capacity of a committee of n nodes of K cores each, from terms that
are each measured, fitted on some runs and checked against others.

What a node spends, in µs of CPU per second, at a throughput of T transactions per second:

    CPU(T, n) = F(n) + T · c(n),    F(n) = F0 + F1 · (n - 1),    c(n) = c0 + c1 · (n - 1)

* `c(n)`, the CPU per transaction ordered: receiving, hashing and storing batches, verifying and
  executing; it grows with the committee because a node sends its batches to, and acknowledges
  the batches of, every other member;
* `F(n)`, the CPU per second whatever the load: rounds (votes, certificates and their
  signatures), timers, the METRICS line; it grows with the committee because a round's votes
  and certificates do.

Both are fitted by least squares on the whole node's CPU (`resources`: what its budget counts)
against the throughput each fitted run delivered. A node of K cores then orders at most
`(K · 10⁶ - F(n)) / c(n)` transactions per second. Each stage's own ceiling still applies
(`projection.project`): a one-thread stage (consensus, sequential execution) cannot use more
than one core, the pool no more than its threads, whatever the cores; its cost per transaction
is the median of what the fitted runs measured. With a link rate, the bytes a node moves per
transaction (`resources/traffic.py`, fitted as `fixed + per_member · (n - 1)`) cap it too.

A term the fitted runs cannot tell apart is left out rather than guessed: runs of one committee
size fit no growth with n, and runs whose CPU and throughput grow in proportion fit no F; a term
fitted below zero (a cost that falls as the committee grows) is noise, left out too.
Families that share consensus (hotcrypto, hotmove) can lend their growth terms to one fitted at a
single size (`CostModel.with_growth_of`). `Prediction.distance` says how far a prediction reaches
from the fitted points, in committee size and in cores.

Assumptions, and which way each errs: costs per transaction do not change with the rate (a
larger batch verifies cheaper per signature: errs low at higher budgets); F does not depend on
the budget (rounds run slower on a smaller budget, so it is not quite fixed); every process on
the machine shares its caches whatever its quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from math import log
from statistics import median

import numpy as np

from .projection import CPU_BOUND, NOT_IN_A_NODE, Projection, project

BANDWIDTH = "bandwidth"
# The whole node's term in a projection: its CPU per transaction, over the K cores less F.
NODE = "node"


@dataclass(frozen=True)
class Point:
    """What one run (or the median of a point's runs) measured: its committee, its cores per
    node (a `--node-cpus` budget, or the cores a node used), the throughput it delivered, the
    CPU a node used for it, and each stage's CPU per transaction."""

    nodes: int
    cores: float
    tps: float
    node_cores_used: float
    us_per_tx: Mapping[str, float]
    # Bytes a node sent and received per transaction; None when the run did not say.
    sent_bytes_per_tx: float | None = None
    received_bytes_per_tx: float | None = None


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


@dataclass(frozen=True)
class Prediction:
    nodes: int
    cores: float
    tps: float
    # What binds: the node's cores (`projection.CPU_BOUND`), a stage at its own ceiling, or
    # `bandwidth`.
    bound: str
    projection: Projection
    # How far from the fitted points: the committee sizes between n and the nearest fitted one,
    # and the factor between K and the nearest fitted budget (1 at a fitted budget).
    nodes_away: int
    cores_factor: float

    @property
    def distance(self) -> str:
        parts = []
        if self.nodes_away:
            parts.append(f"n {self.nodes_away:+d}")
        if abs(self.cores_factor - 1) > 1e-9:
            parts.append(f"cores x{self.cores_factor:.2g}")
        return ", ".join(parts) if parts else "a fitted point"


@dataclass(frozen=True)
class CostModel:
    # CPU per transaction (µs) and per second (µs/s) of the whole node.
    per_tx: Line
    per_second: Line
    # Each stage's CPU per transaction: its own ceiling.
    stages: Mapping[str, float]
    sent_bytes: Line | None
    received_bytes: Line | None
    fitted: tuple[tuple[int, float], ...]

    def predict(
        self,
        nodes: int,
        cores: float,
        pool_threads: int | None = None,
        executor_threads: int = 1,
        link_mbit: float | None = None,
    ) -> Prediction | None:
        """The capacity of n nodes of `cores` cores each (over links of `link_mbit` Mbit/s)."""
        per_tx = self.per_tx.at(nodes)
        if per_tx <= 0:
            return None
        stages = project(self.stages, cores, pool_threads, executor_threads)
        free = max(0.0, cores * 1e6 - self.per_second.at(nodes))
        tps, bound = free / per_tx, CPU_BOUND
        limiting = NODE
        if stages is not None:
            limiting = max(stages.stages, key=lambda s: (s.us_per_tx, s.stage)).stage
            # A stage that cannot use all the node's cores (one thread on a node of more than
            # one core, a pool of fewer threads than cores) has a ceiling of its own; one that
            # can is held by the node's CPU already, which c(n) counts whole.
            ceilings = [s for s in stages.stages if s.max_cores < cores]
            ceiling = min(ceilings, key=lambda s: (s.tps, s.stage), default=None)
            if ceiling is not None and ceiling.tps < tps:
                tps, bound, limiting = ceiling.tps, ceiling.stage, ceiling.stage
        needed = self.bytes_per_tx(nodes)
        if link_mbit is not None and needed:
            allowed = link_mbit * 1e6 / 8 / needed
            if allowed < tps:
                tps, bound = allowed, BANDWIDTH
        projection = Projection(
            cores=cores,
            tps=tps,
            limiting_stage=limiting,
            bound=bound,
            cpu_tps=free / per_tx,
            us_per_tx_total=per_tx,
            stages=stages.stages if stages is not None else (),
        )
        nearest_n = min({n for n, _ in self.fitted}, key=lambda n: (abs(n - nodes), n))
        nearest_c = min({c for _, c in self.fitted}, key=lambda c: (abs(log(cores / c)), c))
        return Prediction(
            nodes=nodes,
            cores=cores,
            tps=tps,
            bound=bound,
            projection=projection,
            nodes_away=nodes - nearest_n,
            cores_factor=cores / nearest_c,
        )

    def bytes_per_tx(self, nodes: int) -> float | None:
        """Bytes a node moves per transaction in the busier direction of its links."""
        lines = [line for line in (self.sent_bytes, self.received_bytes) if line is not None]
        return max(line.at(nodes) for line in lines) if lines else None

    def with_growth_of(self, lender: CostModel, nodes: int) -> CostModel:
        """This model with the lender's growth with n, and its F where this one has none, kept
        equal to what this model fitted at `nodes` (its one committee size)."""
        per_second = self.per_second
        if per_second.fixed == 0 and per_second.per_member == 0:
            per_second = lender.per_second
        elif not per_second.per_member:
            per_second = _through(per_second.at(nodes), lender.per_second.per_member, nodes)
        per_tx = self.per_tx
        if not per_tx.per_member:
            per_tx = _through(per_tx.at(nodes), lender.per_tx.per_member, nodes)
        return replace(self, per_tx=per_tx, per_second=per_second)

    def terms(self) -> list[tuple[str, str]]:
        """The fitted terms, named as a page prints them."""
        rows = [
            ("c(n): node CPU per transaction", _describe(self.per_tx, "µs")),
            ("F(n): node CPU per second at any load", _describe(self.per_second, "µs/s")),
        ]
        rows += [
            (f"{stage} (its ceiling)", f"{cost:,.2f} µs/tx") for stage, cost in self.stages.items()
        ]
        for name, line in (("sent", self.sent_bytes), ("received", self.received_bytes)):
            if line is not None:
                rows.append((f"bytes {name} per tx", _describe(line, "B")))
        return rows


def _through(value: float, per_member: float, nodes: int) -> Line:
    return Line(value - per_member * (nodes - 1), per_member)


def fit(points: Sequence[Point]) -> CostModel:
    """The model fitted on `points` (runs of one family)."""
    if not points:
        raise ValueError("a model needs at least one measured point")
    per_tx, per_second = _fit_cpu(points)
    stages = sorted({s for p in points for s in p.us_per_tx if s not in NOT_IN_A_NODE})

    def traffic(values: list[tuple[int, float | None]]) -> Line | None:
        present = [(n, v) for n, v in values if v is not None]
        return Line.fit(present) if present else None

    return CostModel(
        per_tx=per_tx,
        per_second=per_second,
        stages={s: median(p.us_per_tx[s] for p in points if s in p.us_per_tx) for s in stages},
        sent_bytes=traffic([(p.nodes, p.sent_bytes_per_tx) for p in points]),
        received_bytes=traffic([(p.nodes, p.received_bytes_per_tx) for p in points]),
        fitted=tuple(sorted({(p.nodes, p.cores) for p in points})),
    )


# The regressors of CPU per second, most needed first: c0 · T, c1 · T · (n - 1), F0,
# F1 · (n - 1). A fit keeps those the points can tell apart (`_identifiable`).
TERMS = ("c0", "c1", "F0", "F1")


def _fit_cpu(points: Sequence[Point]) -> tuple[Line, Line]:
    """c(n) and F(n) by least squares on each point's CPU per second."""
    columns = {
        "c0": [p.tps for p in points],
        "F0": [1.0 for _ in points],
        "c1": [p.tps * (p.nodes - 1) for p in points],
        "F1": [float(p.nodes - 1) for p in points],
    }
    used = np.array([p.node_cores_used * 1e6 for p in points])
    chosen = _identifiable(columns, len(points))
    while True:
        matrix = np.array([columns[t] for t in chosen]).T
        solution, *_ = np.linalg.lstsq(matrix, used, rcond=None)
        value = dict(zip(chosen, (float(v) for v in solution), strict=True))
        # A cost below zero (a fixed cost, or one that falls as the committee grows) is noise
        # fitted as a term: leave out the last such term and fit again.
        negative = [t for t in chosen if t != "c0" and value[t] < 0]
        if value["c0"] <= 0:
            # Everything put on F: the points cannot tell a fixed cost apart.
            negative += [t for t in chosen if t.startswith("F")]
        if not negative:
            break
        chosen = [t for t in chosen if t != negative[-1]]
    return (
        Line(value.get("c0", 0.0), value.get("c1", 0.0)),
        Line(value.get("F0", 0.0), value.get("F1", 0.0)),
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
