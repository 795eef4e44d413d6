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

from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.run_summary import Summary
from ..runners.vcpus import Fit
from .dilation_lines import (
    LINK_DELAY_MS,
    LINKS,
    clock_section,
    collapse_section,
    not_emulated_section,
    read_logs,
    round_trip_line,
    throttled_line,
)
from .experiment import Configuration, CriterionBench, Experiment, Outcome
from .measures import (
    HELD_BACK_AT_MOST,
    KEEPS_UP,
    Measure,
    asked,
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


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    _gate_section(gate_runs(outcomes), page)
    collapse = [o for o in outcomes if o.configuration.label.startswith(f"{COLLAPSE}: ")]
    collapse_section(collapse, COLLAPSE_NODES, int(COLLAPSE_BOUND), REPEATS, page)
    clock_section(next((o for o in outcomes if o.configuration.label == CLOCK), None), page)
    not_emulated_section(page)


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
