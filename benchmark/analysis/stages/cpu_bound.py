"""The machine-aware verdict: when the machine's cores are saturated, the run is CPU-bound, and
the stage to blame is the one that costs the most CPU per transaction.

Queue and blocked-time rules cannot tell "slow" from "starved of CPU" when every node, client
and thread shares the same cores: a stage that waits for a core looks busy and falls behind.
Once the processes together use at least CPU_BOUND_SHARE of the cores, the throughput is the
cores divided by the CPU a transaction costs, so the stage with the highest cost per
transaction (summed over nodes: each node runs every stage) is the one whose cost matters
most. A stage within CLOSE_COST of it is named on a second line: the two are a tie within the
noise of these measurements.

With a CPU budget per node (`fab local --node-cpus=X`) every node is a machine of X cores too, and
one at CPU_BOUND_SHARE of its budget is judged first: the run asked for nodes of X cores, and that
is what ran out. The machine still counts: a machine full while no node reached its budget means
the nodes had less than X (the clients and every node share its cores), and the verdict says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..resources.usage import Machine
from .bottleneck import CPU_BOUND_RULE, Bottleneck

CPU_BOUND_SHARE = 0.9
CLOSE_COST = 0.1


def _saturated(machine: Machine) -> bool:
    return (machine.share or 0.0) >= CPU_BOUND_SHARE


def busiest_machine(machines: Sequence[Machine]) -> Machine | None:
    """The machine with the largest share of its cores used; a node at its budget comes before
    any machine, even one with a larger share (the budget is the run's question)."""
    measured = [m for m in machines if m.share is not None]
    at_budget = [m for m in measured if m.budget and _saturated(m)]
    chosen = at_budget or measured
    return max(chosen, key=lambda m: m.share or 0.0) if chosen else None


def _cores(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def _capacity(machine: Machine) -> str:
    """A machine's cores as measured (`1.96`), a budget's as given (`0.125`)."""
    cores = machine.cores or 0.0
    return f"{cores:g}" if machine.budget else _cores(cores)


def cpu_bound(costs: Mapping[str, float], machines: Sequence[Machine]) -> Bottleneck | None:
    """`costs`: µs of CPU per transaction per stage, summed over nodes. None unless a machine
    used at least CPU_BOUND_SHARE of its cores."""
    machine = busiest_machine(machines)
    if machine is None or not _saturated(machine):
        return None
    used, cores = machine.cpu_used or 0.0, machine.cores or 0.0
    where = "" if len(machines) == 1 and not machine.budget else f" on {machine.name}"
    budget = f" (its {machine.budget_flag} budget)" if machine.budget else ""
    headline = f"CPU-bound: {used:.2f} of {_capacity(machine)} cores{where}{budget}"
    evidence = {"cpu_used_cores": used, "cpu_cores": cores}
    found = _budget_note(machine, machines)
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
            notes=found,
        )
    stage, cost = ranked[0]
    others = ", ".join(f"{name} {value:.1f}" for name, value in ranked[1:])
    evidence.update({f"{name}_us_per_tx": value for name, value in ranked})
    notes = (
        tuple(
            f"{name} costs nearly as much: {value:.1f} µs/tx ({value / cost:.0%} of {stage}'s)."
            for name, value in ranked[1:]
            if value >= (1.0 - CLOSE_COST) * cost
        )
        + found
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


def _budget_note(chosen: Machine, machines: Sequence[Machine]) -> tuple[str, ...]:
    """With node budgets: whether the machine that holds them was full too, or instead."""
    budgets = [m for m in machines if m.budget]
    if not budgets:
        return ()
    full = [m for m in machines if not m.budget and _saturated(m)]
    if chosen.budget:
        return tuple(
            f"{m.name} was full too ({m.share:.0%} of {_capacity(m)} cores): a node may"
            " at times have had less than its budget."
            for m in full
        )
    cap = _capacity(budgets[0])
    return (
        f"no node reached its budget of {cap} cores: {chosen.name}'s cores, shared by every node"
        " and client, ran out first, so the nodes had less than their budget.",
    )
