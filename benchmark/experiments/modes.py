"""`modes`: the report's table. The capacity of each mode, each one's capacity projection for a
node of 4 cores (the report's instances), the report's figure beside them, and the ratios between
modes beside the report's.

Each configuration of a node mode is a sweep of rates, each run `runs` times; its capacity is the
highest rate at which every run kept up (`measures.CAPACITY_RULE`), and the projection is
the median over the runs at that rate, of no other (the summary's projection, labelled as one with
its caveat). `movevm` has no rate: it runs as fast as it can, and its capacity is the median of
what its runs delivered. Beside each capacity, the report's own metric: the peak mean delivered
over the sweep. At each capacity the page shows what the report's methods show (`at_capacity.py`):
a node's flame graph from one more run there, profiled; the queues between the stages; the latency
of each hop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt

from ..analysis.resources.cost import REPORT_INSTANCE, cost, instances
from ..analysis.run_summary import Summary
from ..analysis.stages.projection import CPU_BOUND
from . import projections
from .at_capacity import write_sections
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    CAPACITY_RULE,
    Capacity,
    capacity,
    delivered,
    fmt,
    over_runs,
    peak_mean,
    projection_cores,
    projection_tps,
)
from .page import Page
from .rates import rate_rows
from .report_figures import (
    ADAPTER_OVER_BARE,
    CAPACITY,
    DIEM_TESTNET,
    HOTCRYPTO_OVER_HOTSTUFF,
    HOTMOVE_OVER_HOTCRYPTO,
    ReportFigure,
)
from .search import RULE as SEARCH_RULE
from .search import Search

ADAPTER = "hotmove --vm=adapter"
# After a ratio of capacities one of which is its sweep's highest rate.
UNSETTLED = " *"
# After a ratio of configurations that ran at different commits (`--only`).
ACROSS_COMMITS = " †"
MOVEVM_ADAPTER = "movevm --vm=adapter"


def _configurations(quick: bool) -> Sequence[Configuration]:
    # Rates are multiples of 80: a client sends its share (rate / 4) in 20 bursts a second,
    # rounded down to whole transactions per burst.
    if quick:
        node_runs = {"runs": "1", "duration": "4"}
        movevm_runs = {"runs": "1", "duration": "3"}
        rates = {
            "hotstuff": "20000,40000",
            "hotcrypto": "2000,4000",
            "hotmove": "2000,4000",
            ADAPTER: "1200,2400",
        }
    else:
        node_runs = {"runs": "3", "duration": "20"}
        movevm_runs = {"runs": "5", "duration": "10"}
        rates = {
            "hotstuff": "200000,400000,600000,800000,1000000,1200000,1400000,1600000",
            "hotcrypto": "10000,16000,20000,24000,28000,32000,36000,40000,44000,48000",
            "hotmove": "4000,8000,12000,16000,20000,24000,28000,32000",
            ADAPTER: "4000,8000,12000,16000,20000,24000,28000",
        }
    # The full sweep's capacities are settled (`search.py`): five runs at the edge, a finer step.
    search = None if quick else Search()
    return [
        Configuration(
            "hotstuff",
            {"mode": "hotstuff", "rate": rates["hotstuff"], **node_runs},
            search=search,
            profile_at_capacity=True,
        ),
        Configuration(
            "hotcrypto",
            {"mode": "hotcrypto", "rate": rates["hotcrypto"], **node_runs},
            search=search,
            profile_at_capacity=True,
        ),
        Configuration(
            "hotmove",
            {"mode": "hotmove", "rate": rates["hotmove"], **node_runs},
            search=search,
            profile_at_capacity=True,
        ),
        Configuration(
            ADAPTER,
            {"mode": "hotmove", "vm": "adapter", "rate": rates[ADAPTER], **node_runs},
            search=search,
            profile_at_capacity=True,
        ),
        Configuration("movevm", {"mode": "movevm", **movevm_runs}, profile_at_capacity=True),
        Configuration(
            MOVEVM_ADAPTER,
            {"mode": "movevm", "vm": "adapter", **movevm_runs},
            profile_at_capacity=True,
        ),
    ]


def value(found: Capacity | None) -> float | None:
    """The capacity as one number: the rate kept up, or what a saturating run delivered."""
    if found is None:
        return None
    return float(found.rate) if found.rate is not None else found.delivered


def limited_by(found: Capacity) -> str:
    """What the projection of the runs at capacity says limits, the most frequent answer."""
    bounds = Counter(
        "the cores (CPU-bound)" if s.projection.bound == CPU_BOUND else s.projection.bound
        for s in found.runs
        if s.projection is not None
    )
    return bounds.most_common(1)[0][0] if bounds else "-"


def capacity_rows(
    capacities: dict[str, Capacity | None], runs: dict[str, list[Summary]] | None = None
) -> list[list[str]]:
    """A row per configuration; one that kept up with no rate shows its best run. The last two
    columns are the report's own metric, the peak mean delivered over the sweep (`runs`), and
    it over the report's figure."""
    rows = []
    for label, found in capacities.items():
        tried = (runs or {}).get(label, [])
        none = f"none kept up (best {fmt(max(delivered(s) for s in tried))})" if tried else "-"
        report = CAPACITY.get(label)
        ours = value(found)
        projected = found.median(projection_tps) if found else None
        peak = peak_mean(tried)
        peak_tps = peak[1] if peak else None
        rows.append(
            [
                label,
                found.describe() if found else none,
                over_runs([delivered(s) for s in found.runs]) if found else "-",
                fmt(projected),
                limited_by(found) if found else "-",
                report.text() if report else "-",
                _unsettled(found) + report.against(ours) if report else "-",
                report.against(projected) if report else "-",
                fmt(peak_tps) + ("" if peak is None or not peak[0] else f" at {fmt(peak[0])}"),
                report.against(peak_tps) if report else "-",
            ]
        )
    return rows


def _unsettled(found: Capacity | None) -> str:
    """`≥ ` before a figure drawn from a capacity the sweep may not have reached."""
    return "≥ " if found is not None and found.at_top else ""


def _ratio(top: float | None, bottom: float | None, mark: str = "") -> str:
    return "-" if top is None or not bottom else f"{top / bottom:.2f}{mark}"


def ratio_rows(
    capacities: dict[str, Capacity | None], commits: Mapping[str, str | None] | None = None
) -> list[list[str]]:
    """Each ratio of the report's beside ours; `commits` (by label) marks a ratio whose two
    sides ran at different commits."""

    def ours(label: str) -> float | None:
        return value(capacities.get(label))

    def projected(label: str) -> float | None:
        found = capacities.get(label)
        return found.median(projection_tps) if found else None

    pairs: list[tuple[str, str, str, ReportFigure]] = [
        ("hotcrypto / hotstuff", "hotcrypto", "hotstuff", HOTCRYPTO_OVER_HOTSTUFF.figure()),
        ("hotmove / hotcrypto", "hotmove", "hotcrypto", HOTMOVE_OVER_HOTCRYPTO.figure()),
        ("adapter / bare, in hotmove", ADAPTER, "hotmove", ADAPTER_OVER_BARE.figure()),
        ("adapter / bare, in movevm", MOVEVM_ADAPTER, "movevm", ADAPTER_OVER_BARE.figure()),
    ]

    def mark(*labels: str) -> str:
        return UNSETTLED if any(_unsettled(capacities.get(label)) for label in labels) else ""

    def across(top: str, bottom: str) -> str:
        ran_at = commits or {}
        return ACROSS_COMMITS if ran_at.get(top) != ran_at.get(bottom) else ""

    return [
        [
            label,
            _ratio(ours(top), ours(bottom), mark(top, bottom) + across(top, bottom)),
            _ratio(projected(top), projected(bottom), across(top, bottom)),
            report.text(3),
        ]
        for label, top, bottom, report in pairs
    ]


def sweep_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """Every rate of every sweep: its runs, what they delivered and whether they kept up. No
    projection: a projection is made at the capacity's runs only (`projection_caveats`)."""
    return [row for o in outcomes for row in rate_rows(o.configuration.label, o.summaries)]


def projection_caveats(capacities: dict[str, Capacity | None]) -> list[str]:
    """What the runs at each capacity say of how their projection errs, each once."""
    return projections.caveats({label: found.runs for label, found in capacities.items() if found})


def _cores(outcomes: Sequence[Outcome]) -> str:
    cores = {c for o in outcomes for s in o.summaries if (c := projection_cores(s)) is not None}
    return ", ".join(str(c) for c in sorted(cores)) or "-"


def _plot(capacities: dict[str, Capacity | None], page: Page, cores: str) -> None:
    labels = list(capacities)
    ours = [value(capacities[label]) or 0.0 for label in labels]
    projected = [
        (found.median(projection_tps) or 0.0) if (found := capacities[label]) else 0.0
        for label in labels
    ]
    report = [
        (CAPACITY[label].low + CAPACITY[label].high) / 2 if label in CAPACITY else 0.0
        for label in labels
    ]
    figure, axes = plt.subplots(figsize=(9, 4.5))
    width = 0.27
    positions = range(len(labels))
    axes.bar([p - width for p in positions], ours, width, label="capacity here")
    axes.bar(list(positions), projected, width, label=f"projection, {cores} cores per node")
    axes.bar([p + width for p in positions], report, width, label="the report's")
    axes.set_xticks(list(positions), labels, rotation=20, ha="right")
    axes.set_yscale("log")
    axes.set_ylabel("tx/s")
    axes.grid(True, axis="y", alpha=0.3)
    axes.legend()
    page.figure(figure, "capacity", "Capacity here, its projection, and the report's figure")


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    capacities = capacities_of(outcomes)
    cores = _cores(outcomes)
    page.section(
        "Capacity beside the report's",
        CAPACITY_RULE,
        "",
        "`≥`: the sweep's highest rate, the capacity may lie higher; `movevm` runs as fast as it"
        " can, its capacity is its median. The report's maximum is a peak mean delivered, so"
        " that column, not the capacity, is its like. The projection's point is the capacity:"
        " the runs at it, and no run at another rate (the report's instances had 4 vCPUs). "
        + projections.label(cores),
        "",
        *projection_caveats(capacities),
    )
    page.table(
        [
            "configuration",
            "capacity (tx/s)",
            "delivered at capacity, median (min-max) (tx/s)",
            f"projection, {cores} cores per node (tx/s)",
            "projection limited by",
            "report's (tx/s)",
            "capacity / report's",
            "projection / report's",
            "peak mean delivered over the sweep, at the rate asked (tx/s)",
            "peak mean / report's",
        ],
        capacity_rows(capacities, {o.configuration.label: o.summaries for o in outcomes}),
    )
    settled = [o for o in outcomes if o.settled is not None]
    if settled:
        page.add(
            "",
            f"Each sweep was then narrowed at its edge ({SEARCH_RULE}):",
            "",
            *[
                f"- {o.configuration.label}: "
                + (f"{fmt(o.settled.rate)} tx/s, " if o.settled.rate else "not settled: ")
                + f"{o.settled.why}."
                for o in settled
                if o.settled is not None
            ],
        )
    page.add("", "What each figure of the report measured:", "")
    page.add(*[f"- {label}: {figure.meaning}." for label, figure in CAPACITY.items()])
    page.add(f"- Diem, the chain ({DIEM_TESTNET.text()} tx/s): {DIEM_TESTNET.meaning}.")
    page.section("Energy and cost at capacity")
    page.table(
        [
            "configuration",
            "energy per tx (mJ), median",
            "tx per joule",
            "energy figure",
            f"USD per million tx ({REPORT_INSTANCE.instance})",
        ],
        energy_rows(capacities),
    )
    page.add(
        "",
        "Energy: measured from RAPL counters where this machine exposes them, else a model"
        " (CPU use times Cloud Carbon Footprint's per-vCPU watts: `docs/summary.md`), as the"
        " column says. Cost: one instance of the report's type per node, one for `movevm` (one"
        f" process), at {REPORT_INSTANCE.describe()} (`benchmark/analysis/resources/cost.py`).",
    )
    page.section("Ratios between modes")
    ratios = ratio_rows(capacities, {o.configuration.label: o.commit for o in outcomes})
    page.table(["ratio", "capacity", f"projection ({cores} cores)", "report's"], ratios)
    cells = [cell for row in ratios for cell in row[1:3]]
    notes = [
        f"{UNSETTLED.strip()}: a capacity in the ratio is its sweep's highest rate, so the ratio"
        " is not settled; the projections' ratio is."
        if any(UNSETTLED in c for c in cells)
        else None,
        f"{ACROSS_COMMITS.strip()}: its two configurations ran at different commits (`--only`,"
        " above): the ratio holds a change of the code between them as well as the modes'"
        " difference."
        if any(ACROSS_COMMITS in c for c in cells)
        else None,
    ]
    page.add("", *[n for n in notes if n is not None])
    write_sections(outcomes, capacities, page)
    page.section("Every rate of every sweep")
    page.table(
        ["configuration", "rate asked (tx/s)", "runs", "delivered, median (min-max)", "kept up"],
        sweep_rows(outcomes),
    )
    _plot(capacities, page, cores)


def energy_rows(capacities: dict[str, Capacity | None]) -> list[list[str]]:
    """Energy and cost per transaction of the runs at each capacity (the runs' own figures; cost
    at the report's instance price, whatever the run was given)."""
    rows = []
    for label, found in capacities.items():
        if found is None:
            rows.append([label, "-", "-", "-", "-"])
            continue
        joules = found.median(lambda s: s.energy.joules_per_tx if s.energy else None)
        sources = {s.energy.source for s in found.runs if s.energy is not None}
        rented = instances(
            int(found.runs[0].config.get("nodes") or 1), found.runs[0].pipeline.consensus
        )
        usd = cost(REPORT_INSTANCE.usd_per_hour, rented, found.delivered).usd_per_million_tx
        rows.append(
            [
                label,
                fmt(None if joules is None else joules * 1000, 3),
                fmt(None if not joules else 1 / joules),
                ", ".join(sorted(sources)) or "-",
                fmt(usd, 4),
            ]
        )
    return rows


def capacities_of(outcomes: Sequence[Outcome]) -> dict[str, Capacity | None]:
    return {o.configuration.label: capacity(o.summaries) for o in outcomes}


MODES = Experiment(
    name="modes",
    title="Modes: the report's table, rerun",
    question=(
        "What does each mode sustain here (`hotstuff`, `hotcrypto`, `hotmove` with the bare VM"
        " and behind the adapter, `movevm` alone), what would a node of 4 cores sustain (the"
        " report's instances), and how do these and the ratios between modes compare with the"
        " report's figures? (4 nodes and 4 clients on this machine; `movevm` one process.)"
    ),
    configurations=_configurations,
    write=_write,
)
