"""The lines of the dilation page beyond the gate's tables (`dilation.py`): the round trip over
two links and how often nodes used their quota up under each case, the collapse at 31 nodes, the
cost of a clock read, and what dilation does not emulate. Nothing here decides whether a K
passes."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..analysis.run_summary import Summary
from .experiment import Outcome
from .measures import by_rate, delivered, fmt, median_of, rounds_per_second, spread
from .page import Page

# Links as a cluster in one region has them, one-way (`--delay`, in ms). Over loopback with no
# delay, a kept-up run's latency is mostly the kernel's wake-ups and loopback hops, which take
# the same real microseconds at every K and so are K times shorter in the processes' time: no K
# can agree there on latency, nor on the rounds a second and the CPU per transaction that follow
# from it. Every configuration of a real cluster has links; with a delay that dwarfs those
# microseconds, the same configurations are judged again by the same rule, and the pages that
# emulate links at least this long use the K these pass (`passed_factors` of `with_links`).
LINK_DELAY_MS = "1"
LINKS = f"{LINK_DELAY_MS} ms links"


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


def collapse_section(
    collapse: Sequence[Outcome], nodes: Sequence[int], bound: int, repeats: int, page: Page
) -> None:
    """The collapse runs (`dilation.collapse_configurations`): the best median delivered of each
    emulation and committee size, against the same emulation's smallest committee."""
    if not collapse:
        return
    page.section(
        "Was the collapse at 31 nodes the system or the emulation?",
        f"`hotstuff` at {', '.join(map(str, nodes))} nodes, uncommitted bound"
        f" {fmt(bound)} bytes (the scaling page's), {repeats} runs at each rate;"
        " delivered is the best median over the rates asked, median (min-max) of its runs; the"
        " last column is delivered over the same emulation's 4 nodes.",
    )
    nodes_list = list(nodes)
    rows, base = [], {}
    for outcome in collapse:
        _, emulation, nodes_text = outcome.configuration.label.split(": ")
        size = int(nodes_text.split()[0])
        if not outcome.summaries:
            rows.append([emulation, str(size), "-", "-", "-", "-"])
            continue
        best = max(
            by_rate(outcome.summaries).values(),
            key=lambda r: median_of([delivered(s) for s in r]) or 0,
        )
        capacity = median_of([delivered(s) for s in best]) or 0.0
        if size == nodes_list[0]:
            base[emulation] = capacity
        rounds = median_of([rounds_per_second(s) for s in best])
        factor = outcome.configuration.flags.get("dilation", "1")
        rows.append(
            [
                emulation,
                str(size),
                str(factor),
                spread([delivered(s) for s in best]),
                fmt(rounds, 1),
                fmt(capacity / base[emulation], 2) if base.get(emulation) else "-",
            ]
        )
    page.table(["emulation", "nodes", "K", "delivered tx/s", "rounds/s", "of 4 nodes"], rows)


def clock_section(bench: Outcome | None, page: Page) -> None:
    """What a clock read costs, from the criterion bench's table."""
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


def not_emulated_section(page: Page) -> None:
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
