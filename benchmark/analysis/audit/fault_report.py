"""After a run: its fault log, the per-node commits timeline, catch-up times and the audit,
printed after the summary and added to the saved result (keys `faults`, `commits_timeline` and
`audit`; the key `timeline` is the per-stage timeline of `run_summary.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import HarnessError
from ...faults.events import FaultLog
from ..metrics import RunMetrics
from ..pipeline import Pipeline
from ..timelines import CommitsTimeline, build_commits_timeline
from .checks import AuditReport, audit, genesis_total, render_audit


class AuditFailedError(HarnessError):
    """The audit found a disagreement or an unexplained transaction: the run failed."""


@dataclass
class FaultAnalysis:
    faults: FaultLog
    commits_timeline: CommitsTimeline
    audit: AuditReport

    def to_dict(self) -> dict[str, Any]:
        return {
            "faults": self.faults.to_dict(),
            "commits_timeline": self.commits_timeline.to_dict(),
            "audit": self.audit.to_dict(),
        }

    def render(self) -> str:
        lines = []
        if self.faults.events:
            lines.append(" + FAULTS:")
            lines += [
                f"   {e.t:6.1f} s  {e.kind:7} node-{e.node}"
                + (f" (leader of round {e.round})" if e.round is not None else "")
                for e in self.faults.events
            ]
        for catch_up in self.commits_timeline.catch_ups:
            if catch_up.caught_up_after is None:
                outcome = f"did not catch up (reached {catch_up.reached:,.0f})"
            else:
                outcome = f"caught up after {catch_up.caught_up_after:.1f} s"
            came_back = "healed" if catch_up.after == "heal" else "restarted"
            lines.append(
                f"   node-{catch_up.node} {came_back} at {catch_up.restart_t:.1f} s, others at"
                f" {catch_up.target:,.0f}: {outcome}"
            )
        if self.faults.events:
            lines.append(" + COMMITS PER NODE (t: committed blocks / transactions, 2 s steps):")
            for node, points in self.commits_timeline.nodes.items():
                steps = _every(points, 2.0)
                lines.append(f"   node-{node}: " + "  ".join(steps))
        lines.append(render_audit(self.audit).rstrip("\n"))
        return "\n".join(lines) + "\n"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _every(points: list[Any], step: float) -> list[str]:
    shown, next_t = [], 0.0
    for point in points:
        if point.t >= next_t:
            shown.append(
                f"{point.t:.0f}s:{_count(point.committed_blocks)}/{_count(point.committed_txs)}"
            )
            next_t = point.t + step
    return shown


def analyse_faults(
    run: RunMetrics, faults: FaultLog, config: dict[str, Any], pipeline: Pipeline
) -> FaultAnalysis:
    return FaultAnalysis(
        faults=faults,
        commits_timeline=build_commits_timeline(run, faults, pipeline),
        audit=audit(run, faults, pipeline, genesis_total(config)),
    )


def attach(saved: Path, analysis: FaultAnalysis) -> None:
    """Add the analysis to a saved result file (results.py writes the summary alone)."""
    data = json.loads(saved.read_text())
    data.update(analysis.to_dict())
    saved.write_text(json.dumps(data, indent=2) + "\n")


def enforce(analysis: FaultAnalysis) -> None:
    if not analysis.audit.ok:
        failures = "; ".join(f"{c.name}: {c.detail}" for c in analysis.audit.failures)
        raise AuditFailedError(f"the audit failed: {failures}")
