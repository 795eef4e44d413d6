"""`workloads`: every workload under each VM and payload kind, in `movevm` (the VM alone, as fast
as it runs) and in `hotmove` (behind consensus and signatures, a sweep of rates to its capacity).

Each row is a workload and a payload kind; beside each VM its throughput and the CPU the executor
spent per transaction (medians of the runs, at capacity in `hotmove`), then adapter over bare.
The quick version runs every workload under both VMs, one payload kind each (alternating), in
both modes; the full one runs every combination.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..analysis.run_summary import Summary
from .experiment import Configuration, Experiment, Outcome
from .measures import (
    CAPACITY_RULE,
    Capacity,
    by_rate,
    capacity,
    delivered,
    fmt,
    median_of,
    over_runs,
    processed,
    stage_us_per_tx,
)
from .page import Page
from .rates import rate_rows
from .search import RULE as SEARCH_RULE
from .search import Search

MOVE_MODES = ("movevm", "hotmove")
# The grid: every workload under each VM and payload kind (the values of the binaries' flags
# `--workload`, `--vm` and `--payload`; a test checks them against what the client describes).
WORKLOADS = ("transfer", "donothing", "cpuheavy", "kvstore", "smallbank")
VMS = ("bare", "adapter")
PAYLOADS = ("script", "entry")
# A cpuheavy transaction takes the VM about half a millisecond: the default channels (10,000
# transactions) would take longer to drain after the load stops than a run waits for its
# final METRICS lines.
SLOW_WORKLOAD_CHANNEL = {"cpuheavy": "1000"}

# hotmove rates to sweep, by workload: what 4 nodes on 2 cores could keep up with spans two
# orders of magnitude between a transfer and a sort. Every rate is a multiple of 80: a client
# sends its share (rate / 4) in 20 bursts a second, rounded down to whole transactions per burst.
FULL_RATES = {
    "transfer": "4000,8000,12000,16000,20000,24000",
    "donothing": "4000,8000,12000,16000,20000,24000",
    "smallbank": "4000,8000,12000,16000,20000,24000",
    "kvstore": "480,960,1600,2400,3200,4800,6400",
    "cpuheavy": "80,160,240,320,480,640,800",
}
QUICK_RATES = {
    "transfer": "2000",
    "donothing": "2000",
    "smallbank": "2000",
    "kvstore": "960",
    "cpuheavy": "160",
}


def label_of(mode: str, workload: str, vm: str, payload: str) -> str:
    return f"{mode}: {workload}, {vm}, {payload}"


def _grid(quick: bool) -> list[tuple[str, str, str]]:
    """(workload, vm, payload): all of them, or every workload under both VMs with one payload
    kind (alternating)."""
    if not quick:
        return [(w, vm, p) for w in WORKLOADS for p in PAYLOADS for vm in VMS]
    return [(w, vm, PAYLOADS[i % len(PAYLOADS)]) for i, w in enumerate(WORKLOADS) for vm in VMS]


def _configurations(quick: bool) -> Sequence[Configuration]:
    configurations = []
    for mode in MOVE_MODES:
        for workload, vm, payload in _grid(quick):
            flags: dict[str, str | bool] = {
                "mode": mode,
                "workload": workload,
                "vm": vm,
                "payload": payload,
            }
            if workload in SLOW_WORKLOAD_CHANNEL:
                flags["channel_capacity"] = SLOW_WORKLOAD_CHANNEL[workload]
            label = label_of(mode, workload, vm, payload)
            if mode == "hotmove":
                rates = QUICK_RATES if quick else FULL_RATES
                flags["rate"] = rates[workload]
                flags |= (
                    {"runs": "1", "duration": "3"} if quick else {"runs": "3", "duration": "20"}
                )
                # The coarse sweep runs each rate three times (the per-rate table gives their
                # spread); its edge is then settled (`search.py`): five runs at the capacity, a
                # finer step above it.
                search = None if quick else Search()
                configurations.append(Configuration(label, flags, search=search))
            else:
                flags |= (
                    {"runs": "1", "duration": "2"} if quick else {"runs": "3", "duration": "10"}
                )
                configurations.append(Configuration(label, flags))
    return configurations


def _tps(found: Capacity | None) -> float | None:
    if found is None:
        return None
    return float(found.rate) if found.rate is not None else found.delivered


def _cells(mode: str, runs: Sequence[Summary]) -> list[str]:
    """One VM's cells: its throughput (in `hotmove` the capacity, then what its runs at it
    processed, as the capacity's rule counts) and its executor µs/tx; where no rate was kept
    up, the best run and the cost at the lowest rate."""
    executor = stage_us_per_tx("executor")
    found = capacity(runs)
    if found is not None:
        # Runs that saturate on their own (`movevm`): their spread is the throughput's.
        tps = (
            over_runs([delivered(s) for s in found.runs]) if mode == "movevm" else found.describe()
        )
        at_it = over_runs([processed(s) for s in found.runs])
        cells = [tps, at_it, over_runs([executor(s) for s in found.runs], 1)]
    elif runs:
        lowest = by_rate(runs)[min(by_rate(runs))]
        best = f"none kept up (best {fmt(max(delivered(s) for s in runs))})"
        cells = [best, "-", fmt(median_of([executor(s) for s in lowest]), 1)]
    else:
        cells = ["-", "-", "-"]
    # `movevm` asks no rate: it has no "processed at it" column.
    return [cells[0], cells[2]] if mode == "movevm" else cells


def headers(mode: str) -> list[str]:
    """The table's columns: each VM's throughput and cost, then adapter over bare."""
    per_vm = (
        ("tx/s", "executor µs/tx")
        if mode == "movevm"
        else ("tx/s", "processed at it, median (min-max)", "executor µs/tx")
    )
    return ["workload", "payload", *[f"{vm} {h}" for vm in VMS for h in per_vm], "adapter / bare"]


def rows(mode: str, runs: dict[str, list[Summary]]) -> list[list[str]]:
    """A row per workload and payload kind that ran under some VM."""
    table = []
    for workload in WORKLOADS:
        for payload in PAYLOADS:
            labels = {vm: label_of(mode, workload, vm, payload) for vm in VMS}
            if all(label not in runs for label in labels.values()):
                continue
            cells = [workload, payload]
            for vm in VMS:
                cells += _cells(mode, runs.get(labels[vm], []))
            bare = _tps(capacity(runs.get(labels["bare"], [])))
            adapter = _tps(capacity(runs.get(labels["adapter"], [])))
            cells.append("-" if bare is None or adapter is None else f"{adapter / bare:.2f}")
            table.append(cells)
    return table


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    runs = {o.configuration.label: o.summaries for o in outcomes}
    page.add("", CAPACITY_RULE)
    for mode in MOVE_MODES:
        measure = (
            "tx/s: the median (min-max) of its runs, as fast as the VM runs"
            if mode == "movevm"
            else f"tx/s: capacity, settled where the sweep was narrowed ({SEARCH_RULE}; ≥: the"
            " sweep's highest rate); processed at it: what the executor got through in the runs at"
            " that rate, the SmallBank payments it ran to an abort (no funds) included"
        )
        page.section(
            f"`{mode}`",
            f"{measure}; executor µs/tx: its CPU per transaction, median (min-max) of those runs.",
        )
        page.table(headers(mode), rows(mode, runs))
    sweeps = sweep_rows(outcomes)
    if sweeps:
        page.section(
            "Every rate of every `hotmove` sweep",
            "Each rate asked: its runs, what they delivered and what the executor processed"
            " (median (min-max)), and whether the rate was kept up by the capacity's rule (in"
            " brackets, how many of its runs kept up, each on its own).",
        )
        page.table(
            [
                "configuration",
                "rate asked (tx/s)",
                "runs",
                "delivered, median (min-max)",
                "processed, median (min-max)",
                "kept up",
            ],
            sweeps,
        )


def sweep_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """Every rate of every `hotmove` sweep, in the order the configurations ran."""
    return [
        row
        for o in outcomes
        if o.configuration.flags.get("mode") == "hotmove"
        for row in rate_rows(o.configuration.label, o.summaries, extra=[processed])
    ]


WORKLOADS_EXPERIMENT = Experiment(
    name="workloads",
    title="Workloads: every workload, VM and payload kind, alone and behind consensus",
    question=(
        "What does each workload (transfer, donothing, cpuheavy, kvstore, smallbank) cost the"
        " Move VM, bare and behind the adapter, as a script and as an entry function, alone"
        " (`movevm`) and behind consensus and signatures (`hotmove`, 4 nodes and 4 clients on"
        " this machine)?"
    ),
    configurations=_configurations,
    write=_write,
)
