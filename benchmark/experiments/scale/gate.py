"""How far beyond the dilation gate each scale point runs: the gate's own runs, read from the
record committed beside its page (`docs/results/dilation/record.json`), judged by the gate's
rule (`dilation.misses`), for the gate case most like the point.

The gate ran 4 nodes of 0.4 virtual CPUs at K = 2 to 32; the scale points run larger committees
and nodes at K = 3 to 81. So a point is not vouched for by the gate; this says, per point, what
the gate found at the factor nearest the point's for a configuration of the same mode and
placement, so a reader knows which of the point's figures dilation is known to shift.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import HarnessError
from ..dilation import CASES, DILATION, Case, gate_runs, misses, passed_factors, with_links
from ..records import read_beside_page
from .points import Spec

GATE_RECORD = Path("docs/results/dilation/record.json")
GateRuns = Mapping[str, Mapping[int, list]]


def read_gate(repo_root: Path) -> GateRuns | None:
    """The gate's runs by case and factor, from its committed record; None without one."""
    try:
        _, outcomes = read_beside_page(repo_root / GATE_RECORD, DILATION, quick=False)
    except HarnessError:
        return None
    return gate_runs(list(outcomes.values()))


def _likeness(case: Case, spec: Spec) -> tuple[int, int] | None:
    """How like `spec` the gate's `case` is (higher is closer), None for another mode: the same
    placement (a delay matrix, or links of one delay) first, then saturated as the points are."""
    if case.flags.get("mode") != spec.family.split(maxsplit=1)[0]:
        return None
    placement = "delay_matrix" in case.flags if spec.matrix is not None else "delay" in case.flags
    return int(placement), int("saturated" in case.name)


def gate_case(spec: Spec, runs: GateRuns) -> str | None:
    """The name of the gate case, of those that ran, most like `spec`."""
    scored = [
        (score, case.name)
        for case in CASES
        if case.name in runs and (score := _likeness(case, spec)) is not None
    ]
    return max(scored)[1] if scored else None


def nearest_factor(factor: int, tried: Sequence[int]) -> int:
    """Of the factors `tried`, the one nearest `factor` by ratio."""
    return min(tried, key=lambda k: (abs(math.log(k / factor)), -k))


@dataclass(frozen=True)
class Standing:
    """What the gate found for a point: its case, the factor it tried nearest the point's, and
    what missed there (empty: every figure agreed)."""

    case: str
    factor: int
    missed: tuple[str, ...]
    beyond: bool

    def text(self) -> str:
        found = ", ".join(self.missed) if self.missed else "agrees"
        where = f"K = {self.factor}" + (" (the largest tried)" if self.beyond else "")
        return f"{self.case}, {where}: {found}"


def standing(spec: Spec, factor: int, runs: GateRuns) -> Standing | None:
    case = gate_case(spec, runs)
    if case is None:
        return None
    by_factor = runs[case]
    tried = sorted(k for k in by_factor if k > 1)
    if not tried:
        return None
    nearest = nearest_factor(factor, tried)
    return Standing(case, nearest, tuple(misses(dict(by_factor), nearest)), factor > tried[-1])


def gate_line(runs: GateRuns | None) -> str:
    """Which K the gate passed, as its page's rule reads its record."""
    if runs is None:
        return (
            "No record of the dilation gate was found (`docs/results/dilation/record.json`): no"
            " point here is vouched for by it."
        )
    passed = passed_factors(dict(with_links(runs)))
    tried = sorted({k for c in runs.values() for k in c if k > 1})
    return (
        "The dilation gate (docs/results/dilation.md, read from its committed record) passed"
        f" {'K = ' + ', '.join(map(str, passed)) if passed else 'no K'} for every configuration"
        f" with links, of K = {', '.join(map(str, tried))} tried, on 4 nodes of 0.4 virtual"
        " CPUs. The points here run larger committees and nodes, mostly at larger K: they are"
        " beyond what the gate vouches for. The column *gate* names, per point, the gate's"
        " configuration most like it (same mode and placement) and what missed at the K it"
        " tried nearest the point's: read those figures of the point as shifted by dilation."
    )
