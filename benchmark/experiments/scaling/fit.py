"""The cost model of the `scaling` page: fitted per family on its fitted points, and each
prediction set beside what its point delivered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ...analysis.stages.model import CostModel, Prediction, fit
from ...analysis.stages.projection import ONE_PER_CORE
from .points import BORROWS, FAMILIES, FITTED, GOAL, Measured


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
