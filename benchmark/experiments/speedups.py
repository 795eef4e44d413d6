"""The `parallel` page's speedups: the executor's criterion bench (`executor/benches/parallel.rs`)
as tables and findings. Pre-generated blocks executed through the ledger alone, every workload x
`--dest` x block size x scheme and threads; each cell is the median block's transactions per
second, and its ratio to sequential execution of the same blocks. The `one-thread/` groups set
sequential execution against one worker of each scheme, alternated block by block.
"""

from __future__ import annotations

from collections.abc import Sequence

from .page import Page

SCHEMES = ("sequential", "waves", "blockstm")


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


def findings(rows: Sequence[dict]) -> list[str]:
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
            " clock changes). Each cell is the median of a few seconds of blocks, alternated"
            " block by block with its sequential baseline: single cells are this noisy here,"
            " and only differences well beyond it say something."
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


def speedup_section(rows: Sequence[dict], page: Page) -> None:
    columns, table = speedup_table(rows)
    page.section("Speedup over sequential execution")
    page.table(columns, table)
    page.add(
        "",
        "transactions per second of the median block (speedup over sequential execution)",
        "",
    )
    best = best_rows(rows)
    if best:
        most = max(threads_of(c) for _, c in speedups(rows))
        page.table(
            ["workload", "dest", f"waves-{most}", f"blockstm-{most}", "best per thread"],
            best,
        )
        page.add("")
    page.add(*findings(rows))
    page.add(*_contended(rows))


# The bench's groups that set sequential execution against one worker of each scheme.
ONE_THREAD = "one-thread/"


def one_thread_rows(rows: Sequence[dict]) -> list[list[str]]:
    """Per `one-thread` group of the bench: sequential execution's median block, and each
    scheme's at one worker with its ratio to it."""
    mine = [r for r in rows if str(r["group"]).startswith(ONE_THREAD)]
    columns, table = speedup_table(mine)
    wanted = ["sequential", "waves-1", "blockstm-1"]
    return [
        [row[0].removeprefix(ONE_THREAD), *[row[columns.index(c)] for c in wanted]]
        for row in table
        if all(c in columns for c in wanted)
    ]


def one_thread_section(rows: Sequence[dict], page: Page) -> None:
    table = one_thread_rows(rows)
    if not table:
        return
    ratios = [v for (g, c), v in speedups(rows).items() if g.startswith(ONE_THREAD)]
    page.section(
        "Sequential execution against one worker",
        "With one worker, waves and Block-STM run a block's transactions one after another on"
        " the calling thread, as sequential execution does, plus their bookkeeping (declared"
        " conflicts, recorded reads, a multi-version memory): neither can be faster than it. An"
        " earlier version of this page had both 1.2-1.3 times faster on cpuheavy and kvstore."
        " Profiled, the sequential path had no cost the others had not: under callgrind it ran"
        " no more instructions per block than either, and no more simulated cache misses, and"
        " timed block by block in turn with them it ran as fast. The bench then measured each"
        " configuration on its own, one after another, sequential execution first in every"
        " group, and on this shared machine a drift of a quarter between two such measurements"
        " is common: it read as a difference between the schemes. Every group now runs its"
        " configurations alternated block by block (each iteration the next block under every"
        " configuration), so that a drift falls on all of them alike; these groups run more"
        " blocks of the two workloads, for this comparison alone (the"
        f" `{ONE_THREAD}` groups of `executor/benches/parallel.rs`):",
    )
    page.table(
        ["workload / dest / block", "sequential", "waves-1", "blockstm-1"],
        table,
    )
    if ratios:
        page.add(
            "",
            f"- One worker ran at {min(ratios):.2f}-{max(ratios):.2f}x sequential execution here.",
        )
