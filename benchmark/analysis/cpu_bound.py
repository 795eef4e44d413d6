"""The machine-aware verdict: when the machine's cores are saturated, the run is CPU-bound, and
the stage to blame is the one that costs the most CPU per transaction.

Queue and blocked-time rules cannot tell "slow" from "starved of CPU" when every node, client
and thread shares the same cores: a stage that waits for a core looks busy and falls behind.
Once the processes together use at least CPU_BOUND_SHARE of the cores, the throughput is the
cores divided by the CPU a transaction costs, so the stage with the highest cost per
transaction (summed over nodes: each node runs every stage) is the one whose cost matters
most. A stage within CLOSE_COST of it is named on a second line: the two are a tie within the
noise of these measurements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .bottleneck import CPU_BOUND_RULE, Bottleneck
from .resources import Machine

CPU_BOUND_SHARE = 0.9
CLOSE_COST = 0.1


def busiest_machine(machines: Sequence[Machine]) -> Machine | None:
    measured = [m for m in machines if m.share is not None]
    return max(measured, key=lambda m: m.share or 0.0) if measured else None


def _cores(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def cpu_bound(costs: Mapping[str, float], machines: Sequence[Machine]) -> Bottleneck | None:
    """`costs`: µs of CPU per transaction per stage, summed over nodes. None unless a machine
    used at least CPU_BOUND_SHARE of its cores."""
    machine = busiest_machine(machines)
    if machine is None or (machine.share or 0.0) < CPU_BOUND_SHARE:
        return None
    used, cores = machine.cpu_used or 0.0, machine.cores or 0.0
    where = "" if len(machines) == 1 else f" on {machine.name}"
    headline = f"CPU-bound: {used:.2f} of {_cores(cores)} cores{where}"
    evidence = {"cpu_used_cores": used, "cpu_cores": cores}
    ranked = sorted(
        ((stage, cost) for stage, cost in costs.items() if cost > 0),
        key=lambda item: (-item[1], item[0]),
    )
    if not ranked:
        return Bottleneck(
            stage="cpu",
            rule=CPU_BOUND_RULE,
            explanation=f"{headline}; no stage reported its CPU per transaction.",
            evidence=evidence,
        )
    stage, cost = ranked[0]
    others = ", ".join(f"{name} {value:.1f}" for name, value in ranked[1:])
    evidence.update({f"{name}_us_per_tx": value for name, value in ranked})
    notes = tuple(
        f"{name} costs nearly as much: {value:.1f} µs/tx ({value / cost:.0%} of {stage}'s)."
        for name, value in ranked[1:]
        if value >= (1.0 - CLOSE_COST) * cost
    )
    return Bottleneck(
        stage=stage,
        rule=CPU_BOUND_RULE,
        explanation=(
            f"{headline}. {stage} costs the most CPU per transaction: {cost:.1f} µs/tx summed "
            f"over nodes" + (f" (then {others})." if others else ".")
        ),
        evidence=evidence,
        notes=notes,
    )
