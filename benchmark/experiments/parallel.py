"""`parallel`: what running a block's transactions in parallel buys, per workload and contention,
and which stage limits `hotmove` once it does.

Two parts. The speedups come from the executor's criterion bench (`executor/benches/parallel.rs`):
pre-generated blocks executed through the ledger alone, with no generator or decoder thread
competing for the cores, every workload x `--dest` x block size x scheme and threads; each cell
is the median block's transactions per second, and its ratio to sequential execution of the same
blocks. The stage limit comes from `fab local --mode=hotmove` runs of uniform transfers, with
sequential execution and with Block-STM, each run's CPU per transaction projected to nodes of 4,
8 and 16 cores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..analysis.run_summary import Summary
from ..analysis.stages.projection import CPU_BOUND, Projection
from .experiment import Configuration, CriterionBench, Experiment, Outcome
from .measures import delivered, fmt, median_of, over_runs, stage_us_per_tx
from .page import Page

SPEEDUPS = "speedups"
SCHEMES = ("sequential", "waves", "blockstm")
EXECS = ("sequential", "blockstm")
PROJECTED_CORES = (4, 8, 16)
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


def _column_key(name: str) -> tuple[int, int]:
    """Sequential first, then each scheme by threads."""
    scheme, _, threads = name.partition("-")
    order = SCHEMES.index(scheme) if scheme in SCHEMES else len(SCHEMES)
    return order, int(threads) if threads.isdigit() else 0


def speedup_table(rows: Sequence[dict]) -> tuple[list[str], list[list[str]]]:
    """The bench's rows as a table: per benchmark group, each configuration's median-block tx/s
    and its ratio to sequential execution."""
    columns = sorted({str(r["configuration"]) for r in rows}, key=_column_key)
    tps = {(str(r["group"]), str(r["configuration"])): r.get("tps") for r in rows}
    groups = sorted({str(r["group"]) for r in rows})
    table = []
    for group in groups:
        base = tps.get((group, "sequential"))
        cells = []
        for column in columns:
            value = tps.get((group, column))
            if not isinstance(value, int | float):
                cells.append("-")
            elif column != "sequential" and isinstance(base, int | float) and base > 0:
                cells.append(f"{value:.0f} ({value / base:.2f}x)")
            else:
                cells.append(f"{value:.0f}")
        table.append([group, *cells])
    return ["workload / dest / block", *columns], table


def speedups(rows: Sequence[dict]) -> dict[tuple[str, str], float]:
    """Each (group, parallel configuration)'s speedup over sequential execution."""
    tps = {(str(r["group"]), str(r["configuration"])): r.get("tps") for r in rows}
    found = {}
    for (group, column), value in tps.items():
        base = tps.get((group, "sequential"))
        if column == "sequential" or not isinstance(value, int | float):
            continue
        if isinstance(base, int | float) and base > 0:
            found[(group, column)] = value / base
    return found


def threads_of(column: str) -> int:
    return _column_key(column)[1]


def best_rows(rows: Sequence[dict]) -> list[list[str]]:
    """Per workload and `--dest`: each scheme's speedup at the most threads (the range over
    block sizes), and the best of them per thread."""
    found = speedups(rows)
    if not found:
        return []
    most = max(threads_of(c) for _, c in found)
    by_pair: dict[tuple[str, str], dict[str, list[float]]] = {}
    for (group, column), ratio in found.items():
        if threads_of(column) != most:
            continue
        workload, dest, _ = [*group.split("/"), "", ""][:3]
        by_pair.setdefault((workload, dest), {}).setdefault(column, []).append(ratio)
    table = []
    for (workload, dest), columns in sorted(by_pair.items()):
        ranges = [_range(columns.get(f"{s}-{most}", [])) for s in SCHEMES[1:]]
        best = max(max(v) for v in columns.values())
        table.append([workload, dest, *ranges, f"{best / most:.2f}"])
    return table


def _range(values: Sequence[float]) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}x"


def _findings(rows: Sequence[dict]) -> list[str]:
    found = speedups(rows)
    if not found:
        return []
    most = max(threads_of(c) for _, c in found)
    at_most = {k: v for k, v in found.items() if threads_of(k[1]) == most}
    best = max(at_most, key=lambda k: at_most[k])
    worst = min(at_most, key=lambda k: at_most[k])
    one = {k: v for k, v in found.items() if threads_of(k[1]) == 1}
    lines = [
        f"- At {most} threads the best speedup is {at_most[best]:.2f}x ({best[0]},"
        f" {best[1]}), {at_most[best] / most:.2f} of the ideal per thread; the least is"
        f" {at_most[worst]:.2f}x ({worst[0]}, {worst[1]}).",
    ]
    above = [k for k, v in found.items() if v > threads_of(k[1]) * 1.05]
    if above:
        lines.append(
            f"- {len(above)} of {len(found)} cells run faster than their thread count allows"
            " (over 1.05 of the ideal per thread), which no scheme can: the machine ran those"
            " configurations faster than the sequential one they are set against (other tenants,"
            " clock changes). Each cell is one criterion run of a few seconds, a few seconds"
            " after or before its sequential baseline: single cells are this noisy here, and"
            " only differences well beyond it say something."
        )
    if one:
        low, high = min(one.values()), max(one.values())
        cost = (
            ": what their bookkeeping (recorded reads, multi-version reads, validation, the"
            " levelling of declared conflicts) costs per transaction"
            if high < 1
            else ""
        )
        lines.append(
            f"- At one thread the schemes run at {low:.2f}-{high:.2f}x sequential execution{cost}."
        )
    return lines


def _contended(rows: Sequence[dict]) -> list[str]:
    """What the schemes do with transfers that cannot run side by side, if the bench ran any."""
    ratios = [
        ratio
        for (group, _), ratio in speedups(rows).items()
        if group.startswith("transfer/") and group.split("/")[1] in ("ring", "hot:1")
    ]
    if not ratios:
        return []
    return [
        "",
        "Where every transaction writes what the one before it wrote (`ring` transfers pay the"
        " next sender, `hot:1` transfers all pay one account), both schemes level the block by"
        " its declared conflicts and hand it to sequential execution"
        " (`executor/src/parallel/conflicts.rs`, counted as `contended_blocks`): they run at"
        f" {min(ratios):.2f}-{max(ratios):.2f}x sequential execution there, at any thread"
        " count, the levelling's cost.",
    ]


def _stage_limit(runs: Sequence[Summary], cores: int) -> str:
    """What limits the projection, the most frequent answer over runs: the cores (all full),
    or a stage at the ceiling of the threads it may use."""
    bounds = Counter(_bound(p) for p in (s.projected(cores) for s in runs) if p is not None)
    return bounds.most_common(1)[0][0] if bounds else "-"


def _bound(projection: Projection) -> str:
    if projection.bound == CPU_BOUND:
        return f"the cores ({projection.limiting_stage} costs most)"
    threads = next(s.max_cores for s in projection.stages if s.stage == projection.bound)
    return f"{projection.bound} ({threads} thread{'s' if threads > 1 else ''})"


def projection_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    rows = []
    for outcome in outcomes:
        if outcome.configuration.bench is not None or not outcome.summaries:
            continue
        runs = outcome.summaries
        scheme = str(outcome.configuration.flags.get("exec"))
        costs = [fmt(median_of([stage_us_per_tx(s)(r) for r in runs]), 1) for s in STAGES]
        for cores in PROJECTED_CORES:
            projected = median_of(
                [p.tps if (p := r.projected(cores)) is not None else None for r in runs]
            )
            rows.append(
                [
                    f"{scheme}, {cores}",
                    over_runs([delivered(r) for r in runs]),
                    *costs,
                    fmt(projected),
                    _stage_limit(runs, cores),
                ]
            )
    return rows


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    bench = next((o for o in outcomes if o.configuration.bench is not None), None)
    if bench is not None and bench.table:
        columns, table = speedup_table(bench.table)
        page.section("Speedup over sequential execution")
        page.table(columns, table)
        page.add(
            "",
            "transactions per second of the median block (speedup over sequential execution)",
            "",
        )
        best = best_rows(bench.table)
        if best:
            most = max(threads_of(c) for _, c in speedups(bench.table))
            page.table(
                ["workload", "dest", f"waves-{most}", f"blockstm-{most}", "best per thread"],
                best,
            )
            page.add("")
        page.add(*_findings(bench.table))
        page.add(*_contended(bench.table))
    rows = projection_rows(outcomes)
    if rows:
        rate = next(
            (o.configuration.flags.get("rate") for o in outcomes if o.configuration.flags), None
        )
        page.section(
            "Which stage limits `hotmove` once execution is parallel",
            f"Uniform transfers at {fmt(float(str(rate)))} tx/s asked, four nodes on this"
            " machine; medians of the runs (delivered: median (min-max)). The projection gives"
            " each stage the cores a node of N cores lets it use, at the CPU per transaction"
            " measured here (four nodes share this machine's cores, so it errs low), with the"
            " executor's threads one per core under Block-STM and one when sequential.",
            "",
        )
        page.table(
            [
                "`--exec`, cores per node",
                "delivered tx/s",
                *[f"{s} µs/tx" for s in STAGES],
                "projected tx/s",
                "limit",
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
