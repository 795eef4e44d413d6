"""The committee model judged on every point of `scale` it was not fitted on.

The rule, fixed here before any run: each family is fitted on the points `FITTED` names and
predicts every other point of the page; no point is left out after it was seen. A saturated
point's error is the prediction over what it delivered, less one. A point that delivered what
it was asked (not saturated) only says its capacity is at least that: it misses only if the
model predicts less. A point misses beyond `GOAL`; each miss is printed with what the testbed
knows of its cause (what the runs themselves named as limiting, and how far the model's rounds
and CPU were from theirs). The goal: the median error over the points judged within `GOAL`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ...analysis.stages.model import CPU_BOUND, CostModel, Prediction, fit
from .points import COMMITTEE, COMMITTEE_VCPUS, CORES, Measured

GOAL = 0.15
# Which points each family is fitted on, as (axis, nodes, vCPUs); hotmove's families are fitted
# at 4 nodes only and take hotcrypto's growth with n (the same consensus and signatures).
FITTED: dict[str, set[tuple[str, int, float]]] = {
    "hotstuff": {(COMMITTEE, n, COMMITTEE_VCPUS) for n in (4, 16, 40)},
    "hotcrypto": {(COMMITTEE, n, COMMITTEE_VCPUS) for n in (4, 16, 48)} | {(CORES, 4, 4.0)},
    "hotmove": {(CORES, 4, 4.0), (CORES, 4, 16.0)},
    "hotmove --exec=blockstm": {(CORES, 4, 4.0), (CORES, 4, 16.0)},
}
BORROWS = {"hotmove": "hotcrypto", "hotmove --exec=blockstm": "hotcrypto"}
# A share of their CPUs below which nodes were not held by them.
CPU_BOUND_SHARE = 0.9


def is_fitted(point: Measured) -> bool:
    key = (point.spec.axis, point.spec.nodes, point.spec.vcpus)
    return key in FITTED.get(point.spec.family, set())


@dataclass(frozen=True)
class Check:
    point: Measured
    prediction: Prediction
    fitted: bool

    @property
    def error(self) -> float:
        delivered = self.point.capacity
        if delivered <= 0:
            return 0.0
        error = self.prediction.tps / delivered - 1
        return error if self.point.saturated else min(0.0, error)

    @property
    def misses(self) -> bool:
        return not self.fitted and abs(self.error) > GOAL

    def cause(self) -> str:
        """What the testbed knows of why a prediction missed."""
        parts = [f"model: {self.prediction.bound}; runs: {self.point.limited_by}"]
        rounds, predicted = self.point.median_rounds, self.prediction.rounds_per_s
        if rounds and predicted and abs(predicted / rounds - 1) > GOAL:
            parts.append(f"rounds/s {rounds:,.1f} measured, {predicted:,.1f} modelled")
        used = self.point.budget_used
        if self.prediction.bound == CPU_BOUND and used is not None and used < CPU_BOUND_SHARE:
            parts.append(f"nodes used {used:.0%} of their CPUs")
        return "; ".join(parts)


def fitted_points(points: Sequence[Measured]) -> dict[str, list[Measured]]:
    """Each family's points its model is fitted on: those `FITTED` names that ran, or (a page
    that ran none of them: `--quick`) its first point."""
    chosen: dict[str, list[Measured]] = {}
    for point in points:
        chosen.setdefault(point.spec.family, [])
        if is_fitted(point):
            chosen[point.spec.family].append(point)
    for family, own in chosen.items():
        if not own:
            own.append(next(p for p in points if p.spec.family == family))
    return chosen


def models(points: Sequence[Measured]) -> dict[str, CostModel]:
    """A model per family, fitted on its `fitted_points`; the borrowers after their lenders."""
    found: dict[str, CostModel] = {}
    chosen = fitted_points(points)
    for family in sorted(chosen, key=lambda f: f in BORROWS):
        fitted_on = [p.point() for p in chosen[family]]
        model = fit(fitted_on)
        lender = found.get(BORROWS.get(family, ""))
        sizes = {p.nodes for p in fitted_on}
        if lender is not None and len(sizes) == 1:
            model = model.with_growth_of(lender, sizes.pop())
        found[family] = model
    return found


def checks(points: Sequence[Measured]) -> list[Check]:
    """Every point's prediction, each marked whether its family was fitted on it."""
    fitted, chosen = models(points), fitted_points(points)
    result = []
    for p in points:
        prediction = fitted[p.spec.family].predict(p.point())
        if prediction is not None:
            result.append(Check(p, prediction, p in chosen[p.spec.family]))
    return result


def error_lines(found: Sequence[Check]) -> list[str]:
    judged = [c for c in found if not c.fitted]
    if not judged:
        return ["- No point was left out of the fit: nothing to judge."]
    errors = sorted(abs(c.error) for c in judged)
    within = sum(e <= GOAL for e in errors)
    lines = [
        f"- Error on the {len(judged)} points the model was not fitted on: median"
        f" {median(errors):.0%}, largest {errors[-1]:.0%}; {within} of {len(judged)} within"
        f" ±{GOAL:.0%}. The goal, a median within ±{GOAL:.0%}, is"
        f" {'met' if median(errors) <= GOAL else 'not met'}."
    ]
    lines += [
        f"- Missed: {c.point.spec.label} ({c.error:+.0%}): {c.cause()}." for c in judged if c.misses
    ]
    return lines
