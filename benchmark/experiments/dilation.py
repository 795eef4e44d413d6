"""`dilation`: the gate a dilated run passes before any page uses it.

The same configurations undilated (`--vcpus` at K = 1: the same quotas per node, in real time)
and at K = 2, 4 and 8 (three of them also at 16 and 32): after the rescaling a dilated run makes
(its processes' clocks ran K times slower), do delivered throughput, end-to-end p50 latency,
rounds per second and a node's CPU per transaction agree within `TOLERANCE` of the undilated
median? Each (configuration, K) runs `REPEATS` times, the K values alternated run after run so
that the machine's drift falls on all of them alike; a figure is the median of its runs, shown
with their spread. The rule is fixed here, before the runs; the page marks every miss. Three
configurations run again with links of `LINK_DELAY_MS` between the nodes, as every cluster has:
their K are the ones pages that emulate such links may use.

Then the question the scaling page left open: was its collapse at 31 nodes (nodes of 0.05 cores
as 100 ms CFS quotas) the system or the emulation? `hotstuff` at 4, 16 and 31 nodes under three
emulations of the same machine's share per node: 100 ms quotas (`--node-cpus`), quotas of 1 ms
(`--vcpus` at K = 1), and nodes of one virtual CPU dilated until they fit (`--vcpus=1
--dilation=K`).

And what the clock costs: the criterion bench of a clock read, real, undilated and dilated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.run_summary import Summary
from ..runners.vcpus import Fit
from .experiment import Configuration, CriterionBench, Experiment, Outcome
from .measures import (
    HELD_BACK_AT_MOST,
    KEEPS_UP,
    Measure,
    asked,
    by_rate,
    delivered,
    e2e_p50,
    fmt,
    held_back,
    median_of,
    node_us_per_tx,
    rounds_per_second,
    spread,
)
from .page import Page

FACTORS = (1, 2, 4, 8)
# The factors three saturated configurations are also checked at, so that the pages may use them.
LARGE = (16, 32)
TOLERANCE = 0.10
REPEATS = 3
DURATION = "8"
# The clients' virtual CPUs: 4 nodes of 0.4 and the clients fit this machine undilated. One
# node of one core needs clients of more than 0.2 to saturate it (they held it to about 42,000
# tx/s undilated, 61,000 at K = 2): that case gives them what is left of the machine.
CLIENT_VCPUS = "0.2"
ONE_NODE_CLIENT_VCPUS = "0.8"
MATRIX = "benchmark/experiments/four-regions.csv"
CLOCK = "clock"
COLLAPSE = "collapse"
MACHINE_CORES = 2

MEASURES: dict[str, tuple[Measure, int]] = {
    "delivered tx/s": (delivered, 0),
    "e2e p50 ms": (e2e_p50, 0),
    "rounds/s": (rounds_per_second, 1),
    "node CPU µs/tx": (node_us_per_tx, 2),
}


@dataclass(frozen=True)
class Case:
    """One configuration the gate runs at every factor of `factors`."""

    name: str
    flags: dict[str, str]
    factors: tuple[int, ...] = FACTORS

    def configuration(self, factor: int, repeat: int, duration: str) -> Configuration:
        flags = {
            "client_vcpus": CLIENT_VCPUS,
            **self.flags,
            "dilation": str(factor),
            "runs": "1",
            "duration": duration,
        }
        return Configuration(f"{self.name}: K={factor}: run {repeat}", flags)


def _case(
    name: str, mode: str, nodes: int, vcpus: float, rate: int, *, large: bool = False, **more: str
) -> Case:
    flags = {"mode": mode, "nodes": str(nodes), "vcpus": f"{vcpus:g}", "rate": str(rate), **more}
    return Case(name, flags, FACTORS + LARGE if large else FACTORS)


# Saturated hotstuff: 4 nodes of 0.4 kept up with about 1,100,000 tx/s undilated, so 1,600,000
# asks for half as much again, which clients of 0.2 virtual CPUs can still send.
CASES = (
    _case("hotstuff, 4 x 0.4 vCPUs, kept up", "hotstuff", 4, 0.4, 200_000),
    _case("hotstuff, 4 x 0.4 vCPUs, saturated", "hotstuff", 4, 0.4, 1_600_000, large=True),
    _case("hotcrypto, 4 x 0.4 vCPUs, kept up", "hotcrypto", 4, 0.4, 12_000),
    _case("hotcrypto, 4 x 0.4 vCPUs, saturated", "hotcrypto", 4, 0.4, 40_000, large=True),
    _case(
        "hotcrypto, 1 x 1 vCPU, saturated",
        "hotcrypto",
        1,
        1.0,
        100_000,
        client_vcpus=ONE_NODE_CLIENT_VCPUS,
    ),
    _case(
        "hotstuff, four regions, 4 x 0.4 vCPUs", "hotstuff", 4, 0.4, 600_000, delay_matrix=MATRIX
    ),
)
# Links as a cluster in one region has them, one-way (`--delay`, in ms). Over loopback with no
# delay, a kept-up run's latency is mostly the kernel's wake-ups and loopback hops, which take
# the same real microseconds at every K and so are K times shorter in the processes' time: no K
# can agree there on latency, nor on the rounds a second and the CPU per transaction that follow
# from it. Every configuration of a real cluster has links; with a delay that dwarfs those
# microseconds, the same configurations are judged again by the same rule, and the pages that
# emulate links at least this long use the K these pass (`passed_factors` of `with_links`).
LINK_DELAY_MS = "1"
LINKS = f"{LINK_DELAY_MS} ms links"
CASES = (
    *CASES,
    _case(
        f"hotstuff, 4 x 0.4 vCPUs, {LINKS}, kept up",
        "hotstuff",
        4,
        0.4,
        200_000,
        delay=LINK_DELAY_MS,
    ),
    _case(
        f"hotstuff, 4 x 0.4 vCPUs, {LINKS}, saturated",
        "hotstuff",
        4,
        0.4,
        1_600_000,
        delay=LINK_DELAY_MS,
        large=True,
    ),
    _case(
        f"hotcrypto, 4 x 0.4 vCPUs, {LINKS}, kept up",
        "hotcrypto",
        4,
        0.4,
        12_000,
        delay=LINK_DELAY_MS,
    ),
)
QUICK_CASE = Case(
    "hotstuff, 4 x 0.4 vCPUs, kept up",
    {"mode": "hotstuff", "nodes": "4", "vcpus": "0.4", "rate": "20000"},
    (1, 2),
)

# The collapse: hotstuff at these committee sizes, each emulation at its rates.
COLLAPSE_NODES = (4, 16, 31)
COLLAPSE_BOUND = "500000"
EMULATIONS = {
    "100 ms quotas (--node-cpus=0.05)": ({"node_cpus": "0.05"}, "30000,100000"),
    "1 ms quotas (--vcpus=0.05)": ({"vcpus": "0.05", "client_vcpus": "0.2"}, "30000,100000"),
    "dilated (--vcpus=1)": ({"vcpus": "1", "client_vcpus": "1"}, "600000,2000000"),
}


def dilation_for(nodes: int, vcpus: float, client_vcpus: float) -> int:
    """The smallest factor at which `nodes` of `vcpus` and the clients fit this machine."""
    return Fit(nodes, vcpus, client_vcpus, 1, MACHINE_CORES).smallest_dilation


def collapse_configurations() -> list[Configuration]:
    configurations = []
    for emulation, (flags, rates) in EMULATIONS.items():
        for nodes in COLLAPSE_NODES:
            own = dict(flags)
            if "vcpus" in own and own["vcpus"] == "1":
                own["dilation"] = str(
                    dilation_for(nodes, float(own["vcpus"]), float(own["client_vcpus"]))
                )
            configurations.append(
                Configuration(
                    f"{COLLAPSE}: {emulation}: {nodes} nodes",
                    {
                        "mode": "hotstuff",
                        "nodes": str(nodes),
                        **own,
                        "max_uncommitted_bytes": COLLAPSE_BOUND,
                        "rate": rates,
                        "runs": str(REPEATS),
                        "duration": DURATION,
                    },
                )
            )
    return configurations


def _configurations(quick: bool) -> Sequence[Configuration]:
    if quick:
        return [QUICK_CASE.configuration(k, 1, "3") for k in QUICK_CASE.factors]
    gate = [
        case.configuration(factor, repeat, DURATION)
        for repeat in range(1, REPEATS + 1)
        for case in CASES
        for factor in case.factors
    ]
    bench = Configuration(CLOCK, {}, bench=CriterionBench("plumbing", "clock"))
    return [bench, *gate, *collapse_configurations()]


# -- the page -------------------------------------------------------------------------------------


def _case_and_factor(label: str) -> tuple[str, int] | None:
    """`(case, K)` of a gate configuration's label."""
    parts = label.split(": ")
    if len(parts) != 3 or not parts[1].startswith("K="):
        return None
    return parts[0], int(parts[1][2:])


def gate_runs(outcomes: Sequence[Outcome]) -> dict[str, dict[int, list]]:
    """Each case's runs by factor, in the cases' order."""
    runs: dict[str, dict[int, list]] = {}
    for outcome in outcomes:
        key = _case_and_factor(outcome.configuration.label)
        if key is not None:
            runs.setdefault(key[0], {}).setdefault(key[1], []).extend(outcome.summaries)
    return runs


def deviation(value: float | None, reference: float | None) -> float | None:
    """`value` over `reference`, less one; None when either is missing."""
    if value is None or not reference:
        return None
    return value / reference - 1


def misses(by_factor: dict[int, list], factor: int) -> list[str]:
    """The measures whose median at `factor` is off the undilated median by more than the
    tolerance (or that one side lacks)."""
    base = by_factor.get(1, [])
    found = []
    for name, (measure, _) in MEASURES.items():
        off = deviation(
            median_of([measure(s) for s in by_factor.get(factor, [])]),
            median_of([measure(s) for s in base]),
        )
        if off is None:
            found.append(f"{name} missing")
        elif abs(off) > TOLERANCE:
            found.append(f"{name} {off:+.0%}")
    return found


def passed_factors(runs: dict[str, dict[int, list]]) -> list[int]:
    """The factors every case run at them passed, each with every smaller one of its case."""
    factors = sorted({k for by_factor in runs.values() for k in by_factor if k > 1})
    passed = []
    for factor in factors:
        cases = [c for c in runs.values() if factor in c]
        if cases and all(not misses(c, k) for c in cases for k in c if 1 < k <= factor):
            passed.append(factor)
    return passed


def with_links(runs: dict[str, dict[int, list]]) -> dict[str, dict[int, list]]:
    """The cases whose nodes were joined by links of `LINK_DELAY_MS`."""
    return {name: by_factor for name, by_factor in runs.items() if LINKS in name}


def _case_table(by_factor: dict[int, list]) -> list[list[str]]:
    rows = []
    for factor in sorted(by_factor):
        summaries = by_factor[factor]
        cells = [str(factor) if factor > 1 else "1 (undilated)", str(len(summaries))]
        for measure, digits in MEASURES.values():
            values = [measure(s) for s in summaries]
            cell = spread(values, digits)
            if factor > 1:
                off = deviation(
                    median_of(values), median_of([measure(s) for s in by_factor.get(1, [])])
                )
                cell += "" if off is None else f" ({off:+.0%})"
            cells.append(cell)
        missed = misses(by_factor, factor) if factor > 1 else []
        cells.append("-" if factor == 1 else ("agrees" if not missed else ", ".join(missed)))
        rows.append(cells)
    return rows


def unsaturated_factors(by_factor: dict[int, list]) -> list[int]:
    """The dilated factors whose runs kept up (median) while the undilated ones did not: there
    the case compares a run that kept up with one that was saturated. Kept up is the capacity
    rule's load half: delivered at least `KEEPS_UP` of the rate asked, the clients held back at
    most `HELD_BACK_AT_MOST` of the window."""

    def kept_up(summaries: list) -> bool:
        shares = [
            delivered(s) / rate
            for s in summaries
            if (rate := asked(s)) and delivered(s) is not None
        ]
        held = median_of([held_back(s) for s in summaries])
        return (
            bool(shares)
            and (median_of(shares) or 0) >= KEEPS_UP
            and (held is None or held <= HELD_BACK_AT_MOST)
        )

    if kept_up(by_factor.get(1, [])):
        return []
    return [k for k in sorted(by_factor) if k > 1 and kept_up(by_factor[k])]


# Undilated runs whose nodes used this much less of their CPU budget than the dilated runs' did
# not get the CPU their quotas allow.
BUDGET_GAP = 0.10


def budget_used(summary: Summary) -> float | None:
    """The share of its CPU budget (`--vcpus`) a node used, mean over the nodes; None without a
    budget."""
    used = summary.resources
    if used is None or not used.node_cpus:
        return None
    return used.nodes.cpu_cores / used.node_cpus


def budget_shortfall(by_factor: dict[int, list]) -> tuple[float, float] | None:
    """(undilated, dilated) median shares of their CPU budget the nodes used, when the undilated
    runs used at least `BUDGET_GAP` less than every dilated run pooled."""

    def share(summaries: list) -> float | None:
        return median_of([budget_used(s) for s in summaries])

    undilated = share(by_factor.get(1, []))
    dilated = share([s for k, runs in by_factor.items() if k > 1 for s in runs])
    if undilated is None or dilated is None or dilated - undilated < BUDGET_GAP:
        return None
    return undilated, dilated


def moved_hop(by_factor: dict[int, list], factor: int) -> tuple[str, float, float] | None:
    """The hop (`send → receive`, ..., in dilated time) whose median p50 at `factor` moved most,
    up or down, against the undilated runs': (its name, p50 undilated, p50 at `factor`). A hop
    that shrank points at a real-time constant dilation divides by K (a wake-up, a timer's
    millisecond), one that grew at work or waiting that grows with K."""

    def p50s(summaries: list) -> dict[str, float]:
        # A summary's last hop is the whole path, from send to the last event, the sum of the
        # others: only the hops along it are compared.
        along = [h for s in summaries for h in s.hops[:-1]]
        found = {}
        for name in {h.name for h in along}:
            value = median_of([h.latency.p50_ms for h in along if h.name == name])
            if value is not None:
                found[name] = value
        return found

    base, there = p50s(by_factor.get(1, [])), p50s(by_factor.get(factor, []))
    # A hop under a millisecond either side is below the figures' resolution.
    moved = [
        (abs(there[name] - base[name]), name)
        for name in base
        if name in there and max(base[name], there[name]) >= 1
    ]
    if not moved:
        return None
    change, name = max(moved)
    return (name, base[name], there[name]) if change > 0 else None


def diagnosis(by_factor: dict[int, list]) -> list[str]:
    """What the runs say of a case's misses: dilated factors that were not saturated where the
    undilated runs were, undilated runs that did not get their CPU budget, and at the largest
    factor that missed, the hop that moved most."""
    lines = []
    unsaturated = unsaturated_factors(by_factor)
    if unsaturated:
        lines.append(
            f"At K = {', '.join(map(str, unsaturated))} the runs delivered all that was asked"
            " while the undilated ones did not: there the dilated runs had capacity to spare, so"
            " their figures set a run that kept up against a saturated one."
        )
    shortfall = budget_shortfall(by_factor)
    if shortfall is not None:
        undilated, dilated = shortfall
        lines.append(
            f"Undilated, the nodes used {undilated:.0%} of their CPU budget (median of the runs);"
            f" dilated, {dilated:.0%} (median of every K's runs): undilated, they left part of"
            " their quota unused while saturated, so where the dilated figures are higher it is"
            " the reference that fell short (below: what dilation does not emulate)."
        )
    missed = [k for k in sorted(by_factor) if k > 1 and misses(by_factor, k)]
    if missed:
        worst = missed[-1]
        hop = moved_hop(by_factor, worst)
        if hop is not None:
            name, before, after = hop
            way = "grew" if after > before else "shrank"
            lines.append(
                f"At K = {worst}, the hop whose p50 {way} most against the undilated runs is"
                f" {name}: {fmt(before, 1)} ms undilated, {fmt(after, 1)} ms (dilated time)."
            )
    return lines


# The hop made of two link delays and little work: a batch sent to the peers, their acks back.
ROUND_TRIP_HOP = "seal → quorum"


def round_trip_line(by_factor: dict[int, list]) -> str | None:
    """For a case with links, how long `ROUND_TRIP_HOP` took at each K (median p50 of the runs,
    in dilated time) against the two link delays it holds: an emulated delay a real-time
    constant lengthens shows here, shrinking as K divides it."""

    def p50(summaries: list) -> float | None:
        return median_of(
            [h.latency.p50_ms for s in summaries for h in s.hops if h.name == ROUND_TRIP_HOP]
        )

    found = [(k, p50(by_factor[k])) for k in sorted(by_factor)]
    shown = [f"{fmt(v, 1)} ms at K = {k}" for k, v in found if v is not None]
    if not shown:
        return None
    return (
        f"The hop {ROUND_TRIP_HOP} (a batch out to the peers and their acks back: two links,"
        f" {2 * int(LINK_DELAY_MS)} ms of delay asked), p50 median of the runs in dilated time: "
        + ", ".join(shown)
        + "."
    )


THROTTLED = "throttled_share"


def read_logs(summary: Summary) -> dict[str, Any]:
    """What the page reads from a run's logs: how often its nodes ran out of their quota."""
    return {THROTTLED: throttled_from_logs(summary)}


def throttled_from_logs(summary: Summary) -> float | None:
    """The share of the nodes' CFS periods (those in which they ran) that ended with the node's
    quota used up, from the `cpu-budget.json` the run left beside its logs (mean over nodes)."""
    logs = summary.config.get("logs")
    path = Path(logs) / "cpu-budget.json" if isinstance(logs, str) else None
    if path is None or not path.is_file():
        return None
    try:
        groups = json.loads(path.read_text()).get("groups", {})
    except (OSError, ValueError):
        return None
    shares = [
        stat["nr_throttled"] / stat["nr_periods"]
        for name, stat in groups.items()
        if name.startswith("node-") and stat.get("nr_periods")
    ]
    return sum(shares) / len(shares) if shares else None


def throttled_share(summary: Summary) -> float | None:
    """`throttled_from_logs` as read when the run's summary was made, else from its logs now."""
    if THROTTLED in summary.readings:
        found = summary.readings[THROTTLED]
        return float(found) if isinstance(found, int | float) else None
    return throttled_from_logs(summary)


def throttled_line(by_factor: dict[int, list]) -> str | None:
    """How often the nodes ran out of their quota at each K (median of the runs): a node whose
    work comes in bunches waits out more of its periods as K grows (the quota's grain, below)."""
    found = [(k, median_of([throttled_share(s) for s in by_factor[k]])) for k in sorted(by_factor)]
    shown = [f"{v:.0%} at K = {k}" for k, v in found if v is not None]
    if not shown:
        return None
    return (
        "Periods of the quota in which a node used it up (share of the CFS periods in which it"
        " ran, mean over nodes, median of the runs; `cpu-budget.json` beside each run's logs): "
        + ", ".join(shown)
        + "."
    )


def _gate_section(runs: dict[str, dict[int, list]], page: Page) -> None:
    page.section(
        "The gate: dilated runs against the same configuration undilated",
        f"Each configuration at every K, {REPEATS} runs each (the K values alternated run after"
        f" run), {DURATION} s of the processes' time a run; median (min-max) of the runs, and in"
        " brackets the median's deviation from the undilated one. The rule, fixed before the"
        f" runs: a K agrees when every figure's median is within ±{TOLERANCE:.0%} of the"
        " undilated median.",
    )
    headers = ["K", "runs", *MEASURES, "verdict"]
    for name, by_factor in runs.items():
        page.add("", f"**{name}**")
        page.table(headers, _case_table(by_factor))
        for line in diagnosis(by_factor):
            page.add("", line)
        if LINKS in name and (line := round_trip_line(by_factor)) is not None:
            page.add("", line)
        if (line := throttled_line(by_factor)) is not None:
            page.add("", line)
    page.add("", _passed_line(runs, "run at it", "The pages built on dilation use only those."))
    linked = with_links(runs)
    if linked:
        used_by = (
            f"The pages that emulate links of at least {LINK_DELAY_MS} ms, as every cluster has,"
            " use those."
        )
        page.add("", _passed_line(linked, f"with {LINKS}", used_by))


def _passed_line(runs: dict[str, dict[int, list]], which: str, used_by: str) -> str:
    """Which K the configurations `which` names passed, of those they were run at."""
    passed = passed_factors(runs)
    tried = sorted({k for c in runs.values() for k in c if k > 1})
    return (
        f"K passed by every configuration {which} (and every smaller K of each):"
        f" {', '.join(map(str, passed)) or 'none'}, of {', '.join(map(str, tried))} tried."
        f" {used_by}"
    )


def _collapse_section(outcomes: Sequence[Outcome], page: Page) -> None:
    collapse = [o for o in outcomes if o.configuration.label.startswith(f"{COLLAPSE}: ")]
    if not collapse:
        return
    page.section(
        "Was the collapse at 31 nodes the system or the emulation?",
        f"`hotstuff` at {', '.join(map(str, COLLAPSE_NODES))} nodes, uncommitted bound"
        f" {fmt(int(COLLAPSE_BOUND))} bytes (the scaling page's), {REPEATS} runs at each rate;"
        " delivered is the best median over the rates asked, median (min-max) of its runs; the"
        " last column is delivered over the same emulation's 4 nodes.",
    )
    rows, base = [], {}
    for outcome in collapse:
        _, emulation, nodes_text = outcome.configuration.label.split(": ")
        nodes = int(nodes_text.split()[0])
        if not outcome.summaries:
            rows.append([emulation, str(nodes), "-", "-", "-", "-"])
            continue
        best = max(
            by_rate(outcome.summaries).values(),
            key=lambda r: median_of([delivered(s) for s in r]) or 0,
        )
        capacity = median_of([delivered(s) for s in best]) or 0.0
        if nodes == COLLAPSE_NODES[0]:
            base[emulation] = capacity
        rounds = median_of([rounds_per_second(s) for s in best])
        factor = outcome.configuration.flags.get("dilation", "1")
        rows.append(
            [
                emulation,
                str(nodes),
                str(factor),
                spread([delivered(s) for s in best]),
                fmt(rounds, 1),
                fmt(capacity / base[emulation], 2) if base.get(emulation) else "-",
            ]
        )
    page.table(["emulation", "nodes", "K", "delivered tx/s", "rounds/s", "of 4 nodes"], rows)


def _clock_section(outcomes: Sequence[Outcome], page: Page) -> None:
    bench = next((o for o in outcomes if o.configuration.label == CLOCK), None)
    if bench is None or not bench.table:
        return
    page.section(
        "What a clock read costs",
        "Every clock read and timer of a node and a client goes through the process's clock"
        " (`plumbing::clock`), which dilation slows: one native read and, dilated, a"
        " multiplication. `libfaketime`, which slows a process's clocks from outside, cost about"
        " 690 ns a read on this kind of machine when this design was chosen; a `hotstuff` node"
        " spends about 0.45 µs per transaction in all. Criterion's median per read"
        f" (`{bench.configuration.command()}`):",
    )
    rows = [
        [str(row.get("group")), f"`{row.get('read')}`", fmt(_number(row.get("ns")), 1)]
        for row in bench.table
    ]
    page.table(["clock", "read", "ns"], rows)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    _gate_section(gate_runs(outcomes), page)
    _collapse_section(outcomes, page)
    _clock_section(outcomes, page)
    page.section(
        "What dilation does not emulate",
        "CPU time and time are emulated; memory bandwidth, caches and the kernel's own work"
        " (interrupts, softirqs, the scheduler, TCP's timers) are not: every node shares this"
        " machine's as no node of a real cluster would. Where a figure above misses, the"
        " kernel's share is the first suspect: it is charged to whichever thread it"
        " interrupts, or to none, and grows with the threads and connections on the machine.",
        "",
        "A duration a process keeps in real time, not on its clock, is not dilated either, and"
        " such a constant makes a figure move with K. One did: the allocator returned freed"
        " memory to the kernel a second of real time after it was freed, so at K = 16 it did"
        " so sixteen times as often per transaction, and each fault on that memory cleared a"
        " 2 MiB huge page. Saturated `hotstuff`'s CPU per transaction grew from 0.24 µs"
        " undilated to 0.43 µs at K = 32, and delivered fell by a quarter (the gate at commit"
        " `19784c7`). Both binaries now keep freed memory for a second of their own time and"
        " take no huge pages (`node/stages/src/allocator.rs`); the tables above were measured"
        " with that.",
        "",
        "The kernel's latencies are not dilated: a wake-up, a context switch or a hop over"
        " loopback takes the same real microseconds at every K, so K times fewer in the"
        " processes' time. Undilated, a stage that waits on one idles longer, in its own time,"
        " than it does dilated; a node then leaves part of its quota unused while saturated"
        " (the diagnosis lines above say where), and rounds whose pace those latencies set run"
        " faster as K grows. This is the machine's kernel, a KVM guest's on this one, not the"
        " system under test.",
        "",
        "Emulated links wait on a timer thread of their own, precise to microseconds"
        " (`consensus/plumbing/src/precise_sleep.rs`). On tokio's timer, which counts whole"
        " milliseconds of real time, a 1 ms link took about 2 ms undilated, and dilation"
        " divided that overshoot by K, so the undilated reference was the less faithful of the"
        " two. The round trip lines under the cases with"
        f" {LINKS} say how close each K comes to the delay asked (hops are timed in whole"
        " milliseconds).",
        "",
        "What remains is the quota's grain. The kernel's smallest quota is 1 ms, so a node of V"
        " virtual CPUs runs V·x ms of real CPU every K·x ms (x = max(1, 1/V) ms), at a whole"
        " core's speed. In the node's own time a burst lasts V·x/K and the wait after it"
        " x - V·x/K: the same share of a core at every K, but work that arrives in a bunch"
        " outlasts its burst more often as K grows and waits for the next period (from 1.5 ms"
        " undilated to 2.4 ms at K = 8 for V = 0.4). The throttled-periods lines above count how"
        " often the nodes used their quota up. Where that share grows with K, a round waits on its"
        " nodes longer as K grows: that, not the system, is the likely reason rounds per second"
        " and latency move with K there (a reading of these counters, not a measurement of the"
        " waits).",
    )


DILATION = Experiment(
    name="dilation",
    title="Dilation: the gate a dilated run passes, and the collapse at 31 nodes",
    question=(
        "Does a run K times slower, with every process's clock slowed K times and each virtual"
        " CPU 1/K of a core, measure what the same configuration measures undilated? At which"
        " K? And was the scaling page's collapse at 31 nodes the system or its emulation?"
    ),
    configurations=_configurations,
    write=_write,
    read_logs=read_logs,
)
