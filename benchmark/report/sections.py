"""The printed sections of the bottleneck analysis: hops, resources, capacity projection, cost
and profile. `text.py` places them in the printed summary; a missing measurement prints `-`."""

from __future__ import annotations

from ..analysis.consensus.hops import Hop
from ..analysis.resources.cost import Cost
from ..analysis.resources.energy import Energy
from ..analysis.resources.profiles import ProfileSummary
from ..analysis.resources.usage import Resources, RoleUsage
from ..analysis.stages.projection import Projection


def number(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def hops_section(hops: tuple[Hop, ...], remote: bool) -> list[str]:
    if not hops:
        return []
    lines = [" + HOPS (sample transactions, ms):", f"   {'hop':<22} {'p50':>8} {'p99':>8} {'n':>7}"]
    for hop in hops:
        stats = hop.latency
        lines.append(
            f"   {hop.name:<22} {number(stats.p50_ms, 1):>8} {number(stats.p99_ms, 1):>8}"
            f" {stats.count:>7,}"
        )
    if remote:
        lines.append("   (remote run: hops between machines assume synchronised clocks)")
    return lines


def _role(label: str, usage: RoleUsage, per: str, budget: float | None = None) -> str:
    of = "" if budget is None else f" of at most {budget:g}"
    return (
        f"   {label}: cpu {number(usage.cpu_cores, 2)} cores{of}, rss {number(usage.rss_mib)} MiB"
        f" (mean per {per})"
    )


def resources_section(used: Resources | None) -> list[str]:
    if used is None:
        return []
    node = used.node_role
    budget = used.node_cpus
    head = " + RESOURCES:"
    if budget is not None and used.virtual:
        head = (
            f" + RESOURCES (--vcpus: every node {budget:g} virtual CPUs, each thread at most one;"
            f" cores are virtual CPUs, this machine's cores x {used.dilation}):"
        )
    elif budget is not None:
        head = (
            f" + RESOURCES (--node-cpus: every node capped at {budget:g} cores, a CFS quota;"
            " the clients outside it):"
        )
    lines = [head, _role("nodes" if node == "node" else node, used.nodes, node, budget)]
    if used.clients.processes:
        lines.append(_role("clients", used.clients, "client"))
    for machine in used.machines:
        cores = f"{machine.cores:g}" if machine.budget and machine.cores else number(machine.cores)
        lines.append(
            f"   {machine.name}: {number(machine.cpu_used, 2)} of"
            + (f" at most {cores}" if machine.budget else f" {cores}")
            + " cores used"
            + ("" if machine.share is None else f" ({machine.share:.0%})")
        )
    return lines


def projection_section(projection: Projection | None) -> list[str]:
    if projection is None:
        return [" + CAPACITY PROJECTION: - (no stage reported its CPU per transaction)"]
    measured = projection.measured_cores
    at = "" if measured is None else f", from costs measured at {measured:g} cores per node"
    head = f" + CAPACITY PROJECTION ({projection.cores:g} cores per node{at}):"
    head += f" {projection.tps:,.0f} tx/s"
    if projection.cpu_bound:
        head += f", CPU-bound: {projection.cores:g} cores / {projection.us_per_tx_total:.1f} µs/tx"
        why = f"the cores limit; {projection.limiting_stage} costs the most CPU per transaction"
    else:
        why = f"limited by {projection.limiting_stage}: at its own ceiling, with cores to spare"
    lines = [
        head,
        f"   {'stage':<12} {'µs/tx':>7} {'cores used':>11} {'of at most':>11} {'alone tx/s':>12}",
    ]
    lines += [
        f"   {s.stage:<12} {s.us_per_tx:>7.1f} {s.cores_used:>11.2f} {s.max_cores:>11}"
        f" {s.tps:>12,.0f}"
        for s in projection.stages
    ]
    caveat = [] if projection.caveat is None else [f"   ({projection.caveat})"]
    reach = projection.extrapolation
    if reach is not None and projection.fitted_cores is not None:
        caveat.append(
            f"   (a model fitted on this run alone, at {projection.fitted_cores:.2g} cores per"
            f" node: it extrapolates x{reach:.3g} in cores; `fab experiment scale` prints its"
            " error against runs it was not fitted on)"
        )
    return [*lines, f"   {why}", *caveat]


def energy_section(energy: Energy | None) -> list[str]:
    if energy is None:
        return []
    return [
        f" + ENERGY ({energy.source}): {energy.joules_per_tx * 1000:,.3f} mJ per transaction,"
        f" {energy.tx_per_joule:,.0f} tx per joule, {energy.watts:,.1f} W",
        f"   ({energy.scope})",
    ]


def cost_section(cost: Cost | None) -> list[str]:
    if cost is None:
        return []
    return [
        f" + COST ({cost.instances} instance{'s' if cost.instances > 1 else ''}"
        f" at ${cost.usd_per_hour:g}/h each):"
        f" ${number(cost.usd_per_million_tx, 4)} per million tx,"
        f" {number(cost.tx_per_usd)} tx per USD",
    ]


def profile_section(profile: ProfileSummary | None) -> list[str]:
    if profile is None:
        return []
    lines = [
        f" + PROFILE (top functions of {profile.samples:,} samples over the nodes;"
        " self: running, inclusive: on the stack):",
        f"   {'self':>6} {'incl':>6}  function",
    ]
    lines += [
        f"   {f.self_share:>6.1%} {f.inclusive_share:>6.1%}  {f.function}" for f in profile.top
    ]
    lines += [f"   flame graph: {path}" for path in profile.flamegraphs]
    return lines
