"""The table printed after a sweep (see `sweep.py`): one row per (committee size, rate), medians
over its runs, and the capacity the sweep found.

A run driven past saturation is a poor measure of capacity: consensus keeps ordering at the
offered rate while a stage behind it falls behind, queues grow, and the end-to-end rate of that
run depends on how long the backlog had to build up. So the sweep names two figures: the highest
rate at which the median run kept up (the system's sustainable rate, as far as the sweep's
resolution goes) and the highest median end-to-end rate seen (what an overloaded system still
delivers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from ..analysis.run_summary import Summary, dilation


@dataclass(frozen=True)
class SweepRow:
    nodes: int
    rate: int
    runs: int
    kept_up: int
    e2e_tps: float
    p50_ms: float | None
    limited_by: str

    @property
    def keeps_up(self) -> bool:
        """The median run kept up: more than half of the runs did."""
        return 2 * self.kept_up > self.runs


def sweep_rows(summaries: Sequence[Summary]) -> list[SweepRow]:
    """Groups runs by committee size and rate (in order of first appearance)."""
    groups: dict[tuple[int, int], list[Summary]] = {}
    for summary in summaries:
        key = (int(summary.config.get("nodes", 0)), int(summary.config.get("rate", 0)))
        groups.setdefault(key, []).append(summary)
    rows = []
    for (nodes, rate), runs in groups.items():
        latencies = [s.end_to_end.latency.p50_ms for s in runs]
        known = [value for value in latencies if value is not None]
        limits = [s.bottleneck.stage for s in runs if not s.bottleneck.kept_up]
        rows.append(
            SweepRow(
                nodes=nodes,
                rate=rate,
                runs=len(runs),
                kept_up=sum(s.bottleneck.kept_up for s in runs),
                e2e_tps=median(s.end_to_end.tps for s in runs),
                p50_ms=median(known) if known else None,
                limited_by=max(set(limits), key=limits.count) if limits else "-",
            )
        )
    return rows


def render_sweep(summaries: Sequence[Summary]) -> str:
    """The sweep table and, per committee size, the capacity it found."""
    rows = sweep_rows(summaries)
    factors = sorted({dilation(s.config) for s in summaries} - {1})
    dilated = "".join(f", dilated ×{factor}" for factor in factors)
    lines = [
        f" + SWEEP (medians over runs{dilated}):",
        "   nodes    input tx/s   end-to-end tx/s   e2e p50   kept up   limited by",
    ]
    for row in rows:
        p50 = f"{row.p50_ms:,.0f} ms" if row.p50_ms is not None else "-"
        lines.append(
            f"   {row.nodes:>5} {row.rate:>13,} {row.e2e_tps:>17,.0f} {p50:>9}"
            f" {row.kept_up:>5}/{row.runs:<3} {row.limited_by}"
        )
    for nodes in dict.fromkeys(row.nodes for row in rows):
        own = [row for row in rows if row.nodes == nodes]
        sustained = [row for row in own if row.keeps_up]
        best = max(own, key=lambda row: row.e2e_tps)
        kept = (
            f"highest input kept up {max(r.rate for r in sustained):,} tx/s"
            if sustained
            else "no input rate kept up"
        )
        lines.append(
            f"   {nodes} nodes: {kept}; highest end-to-end {best.e2e_tps:,.0f} tx/s "
            f"(at {best.rate:,} tx/s input)"
        )
    return "\n".join(lines) + "\n"
