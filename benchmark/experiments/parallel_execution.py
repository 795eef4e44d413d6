"""`parallel`: what running a block's transactions in parallel buys, per workload and contention,
and which stage limits `hotmove` once it does.

Two parts. The speedups come from the executor's criterion bench (`executor/benches/parallel.rs`):
pre-generated blocks executed through the ledger alone, with no generator or decoder thread
competing for the cores, every workload x `--dest` x block size x scheme and threads; each cell
is the median block's transactions per second, and its ratio to sequential execution of the same
blocks. The stage limit comes from `fab local --mode=hotmove` runs of uniform transfers, with
sequential execution and with Block-STM: what each stage cost per transaction, and the summary's
projection of it (the one rule every page projects by). Nodes of more cores are measured by the
scale experiment's virtual-CPUs axis, not projected here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..analysis.run_summary import Summary
from ..analysis.stages.projection import CPU_BOUND, Projection
from . import projections
from .experiment import Configuration, CriterionBench, Experiment, Outcome
from .measures import (
    delivered,
    fmt,
    median_of,
    over_runs,
    projection_cores,
    projection_tps,
    stage_us_per_tx,
)
from .page import Page
from .speedups import ONE_THREAD, one_thread_section, speedup_section

SPEEDUPS = "speedups"
EXECS = ("sequential", "blockstm")
STAGES = ("consensus", "verifier", "executor")
# Transfers to payees drawn among every account: blocks with few conflicts, where the schemes
# can run transactions side by side (the bench's other `--dest`s say what contention does).
HOTMOVE = {"mode": "hotmove", "vm": "adapter", "payload": "entry", "dest": "uniform"}


def label_of(scheme: str) -> str:
    return f"hotmove --exec={scheme}"


# What a quick run of the bench would be: one filter, short measurements. `--quick` leaves the
# bench out: `cargo bench -p executor` compiles the Move crates again under its own feature set
# (minutes on two cores, more than CI's budget has), while the projection runs reuse the
# release binaries. Run it by hand: `HOTMOVE_BENCH_QUICK=1 cargo bench -p executor --bench
# parallel -- transfer/uniform/1000`.
QUICK_BENCH = CriterionBench("executor", "parallel", filter="transfer/uniform/1000", quick=True)


def _configurations(quick: bool) -> Sequence[Configuration]:
    if quick:
        runs = {"rate": "1000", "runs": "1", "duration": "5"}
        bench = []
    else:
        runs = {"rate": "16000", "runs": "3", "duration": "20"}
        bench = [Configuration(SPEEDUPS, {}, bench=CriterionBench("executor", "parallel"))]
    return [
        *bench,
        *[Configuration(label_of(e), {**HOTMOVE, "exec": e, **runs}) for e in EXECS],
    ]


def _stage_limit(runs: Sequence[Summary]) -> str:
    """What limits the runs' projections, the most frequent answer: the cores (all full), or a
    stage at the ceiling of the threads it may use."""
    bounds = Counter(_bound(s.projection) for s in runs if s.projection is not None)
    return bounds.most_common(1)[0][0] if bounds else "-"


def _bound(projection: Projection) -> str:
    if projection.bound == CPU_BOUND:
        return f"the cores ({projection.limiting_stage} costs most)"
    threads = next(s.max_cores for s in projection.stages if s.stage == projection.bound)
    return f"{projection.bound} ({threads:g} thread{'s' if threads > 1 else ''})"


def projection_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """A row per `--exec`: what its runs measured (delivered, each stage's CPU per transaction)
    and the summary's projection of them, the one rule every page projects by, for the cores
    it was made for (`--project-cores`). Nodes of more cores are measured on the scale page,
    not projected here."""
    rows = []
    for outcome in outcomes:
        if outcome.configuration.bench is not None or not outcome.summaries:
            continue
        runs = outcome.summaries
        scheme = str(outcome.configuration.flags.get("exec"))
        rows.append(
            [
                scheme,
                over_runs([delivered(r) for r in runs]),
                *[fmt(median_of([stage_us_per_tx(s)(r) for r in runs]), 1) for s in STAGES],
                fmt(median_of([projection_tps(r) for r in runs])),
                _stage_limit(runs),
            ]
        )
    return rows


def projected_cores(outcomes: Sequence[Outcome]) -> str:
    cores = {c for o in outcomes for s in o.summaries if (c := projection_cores(s)) is not None}
    return ", ".join(f"{c:g}" for c in sorted(cores)) or "-"


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    bench = next((o for o in outcomes if o.configuration.bench is not None), None)
    if bench is not None and bench.table:
        speedup_section(
            [r for r in bench.table if not str(r["group"]).startswith(ONE_THREAD)], page
        )
        one_thread_section(bench.table, page)
    rows = projection_rows(outcomes)
    if rows:
        rate = next(
            (o.configuration.flags.get("rate") for o in outcomes if o.configuration.flags), None
        )
        cores = projected_cores(outcomes)
        page.section(
            "Which stage limits `hotmove` once execution is parallel",
            f"Uniform transfers at {fmt(float(str(rate)))} tx/s asked, four nodes on this"
            " machine; what the runs measured, medians (delivered: median (min-max)). Each"
            " `--exec` is a point: its runs at that rate. The executor's threads are one per"
            " core under Block-STM and one when sequential. " + projections.label(cores),
            "",
            *projections.caveats(
                {
                    str(o.configuration.flags.get("exec")): o.summaries
                    for o in outcomes
                    if o.configuration.bench is None
                }
            ),
        )
        page.table(
            [
                "`--exec`",
                "delivered tx/s",
                *[f"{s} µs/tx" for s in STAGES],
                f"projection, {cores} cores per node (tx/s)",
                "projection limited by",
            ],
            rows,
        )


PARALLEL = Experiment(
    name="parallel",
    title="Parallel execution: what Block-STM and conflict waves buy, per workload and contention",
    question=(
        "For which workloads and how much contention does running a block's transactions in"
        " parallel pay, by how much per thread, and where can it not? And once execution is"
        " parallel, which stage of `hotmove` limits it? (Move adapter, entry-function payloads,"
        " fees credited per block, 10,000 accounts.)"
    ),
    configurations=_configurations,
    write=_write,
)
