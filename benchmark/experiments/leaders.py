"""`leaders`: what faults cost under each leader rule, round-robin and reputation.

`hotcrypto` at a rate the fault-free committee keeps up with, under each rule: fault-free, one of
four nodes never booted, seven nodes fault-free and two of them never booted, the leader of the
moment killed every five seconds (and restarted), and more than f down then back (two of four
crashed at 5 s and restarted at 15 s). Each faulty run is set against the fault-free run of its
rule and node count: the share of its throughput it delivered and its end-to-end p50 against the
fault-free one; and, after the
outage, how long after the second restart the survivors committed again (`first_commit_ms` of
their METRICS lines against the restart in `faults.json`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..analysis.metrics import load_run
from ..analysis.run_summary import Summary
from ..faults.events import RESTART, FaultLog
from .experiment import Configuration, Experiment, Outcome
from .measures import median_of, over_runs, share
from .page import Page

RULES = ("round-robin", "reputation")
OUTAGE = "more than f down, then back"


def scenarios(quick: bool) -> list[tuple[str, dict[str, str], tuple[str, ...], str | None]]:
    """(label, flags, crashes, kill-leader period) of each scenario."""
    if quick:
        rate, duration, long, kill = "2000", "4", "8", "3"
        outage = ("2@2:5", "3@2:5")
    else:
        rate, duration, long, kill = "8000", "20", "60", "5"
        outage = ("2@5:15", "3@5:15")
    # Three runs of each scenario in the full experiment: a fault's cost varies from run to run
    # (where in a round a crash lands, which leader a kill hits), and one run hid how much.
    runs = "1" if quick else "3"
    base = {"mode": "hotcrypto", "rate": rate, "duration": duration, "runs": runs}
    return [
        ("fault-free", base, (), None),
        ("--faults=1", {**base, "faults": "1"}, (), None),
        # The seven-node rows are held to a seven-node fault-free run: seven nodes on the same
        # cores cost latency of their own.
        ("--nodes=7", {**base, "nodes": "7"}, (), None),
        ("--nodes=7 --faults=2", {**base, "nodes": "7", "faults": "2"}, (), None),
        (f"--kill-leader-every={kill}", {**base, "duration": long}, (), kill),
        (OUTAGE, {**base, "duration": long if quick else "30"}, outage, None),
    ]


def _configurations(quick: bool) -> Sequence[Configuration]:
    return [
        Configuration(
            f"{rule}: {label}", {**flags, "leader": rule}, crash=crash, kill_leader_every=kill
        )
        for rule in RULES
        for label, flags, crash, kill in scenarios(quick)
    ]


RESUMED = "resumed_after_ms"


def read_logs(summary: Summary) -> dict[str, Any]:
    """What the page reads from a run's logs: when commits resumed."""
    return {RESUMED: resumed_from_logs(summary)}


def resumed_after_ms(summary: Summary) -> float | None:
    """How long after the last restart of the run a node that stayed up committed again, as read
    from its logs when its summary was made (`read_logs`), else from its logs now."""
    if RESUMED in summary.readings:
        found = summary.readings[RESUMED]
        return float(found) if isinstance(found, int | float) else None
    return resumed_from_logs(summary)


def resumed_from_logs(summary: Summary) -> float | None:
    """How long after the last restart of the run a node that stayed up committed again (the
    earliest among them), from the nodes' `first_commit_ms` and the run's `faults.json`."""
    logs = summary.config.get("logs")
    if not isinstance(logs, str):
        return None
    directory = Path(logs)
    restarts = [e.time_ms for e in FaultLog.load(directory).events if e.kind == RESTART]
    if not restarts:
        return None
    back = max(restarts)
    crashed = {e.node for e in FaultLog.load(directory).events}
    firsts = []
    for index, node in enumerate(load_run(directory).nodes):
        if index in crashed:
            continue
        times = [
            float(t)
            for record in node.records
            if isinstance(t := (record.get("consensus") or {}).get("first_commit_ms"), int | float)
            and t >= back
        ]
        if times:
            firsts.append(min(times))
    return min(firsts) - back if firsts else None


def _fault_free(configuration: Configuration) -> bool:
    return (
        "faults" not in configuration.flags
        and not configuration.crash
        and not configuration.partition
        and configuration.kill_leader_every is None
    )


def _nodes(configuration: Configuration) -> str:
    return str(configuration.flags.get("nodes", "4"))


def tps_of(summaries: Sequence[Summary]) -> list[float]:
    return [s.end_to_end.tps for s in summaries]


def p50_of(summaries: Sequence[Summary]) -> list[float | None]:
    return [s.end_to_end.latency.p50_ms for s in summaries]


def against(runs: Sequence[float | None], base: Sequence[float | None], form: str) -> str:
    """The median of `runs` over the median of `base` (`form`: `share` or `times`)."""
    ours, theirs = median_of(runs), median_of(base)
    if ours is None or not theirs:
        return "-"
    return share(ours / theirs) if form == "share" else f"{ours / theirs:.1f}x"


def timeouts_text(summaries: Sequence[Summary]) -> tuple[str, str]:
    """Rounds that timed out out of all (per run, as `a, b, c of x, y, z`), and the leaders of
    the rounds that timed out, counted over every run."""
    rounds = [s.rounds for s in summaries if s.rounds is not None]
    if not rounds:
        return "-", "-"
    timed_out = ", ".join(f"{r.timeouts:,.0f}" for r in rounds)
    total = ", ".join(f"{r.rounds:,.0f}" for r in rounds)
    leaders: Counter[str] = Counter()
    for r in rounds:
        leaders.update(r.timed_out_leaders)
    by_leader = ", ".join(f"{k} x{v:g}" for k, v in leaders.items()) or "-"
    return f"{timed_out} of {total}", by_leader


# Why round-robin loses more than the crashed members' own rounds (what the timeouts-by-leader
# column shows: each crashed member, and the member before it in the order).
ROUND_ROBIN_LOSSES = (
    "Under round-robin a crashed member costs two rounds in every n, not one: a replica sends"
    " its vote to the leader of the next round, so the votes on the block of the member just"
    " before a crashed one go to the crashed one, no QC forms, and that round times out as well"
    " as the crashed member's own (the timeouts by leader name both). In a committee of 4 with"
    " one member down that is half the rounds, each costing the 1 s round timeout. Leader"
    " reputation leaves a member that stopped signing out of the leaders, so neither round is"
    " lost once it is noticed."
)


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    by_label = {o.configuration.label: o for o in outcomes}
    headers = [
        "scenario",
        "runs",
        "delivered tx/s",
        "of fault-free (medians)",
        "end-to-end p50 ms",
        "p50 against fault-free (medians)",
        "rounds timed out (each run)",
        "timeouts by leader (all nodes, all runs)",
    ]
    page.add(
        "",
        "Figures over several runs are `median (min-max)`; each row is held to the fault-free"
        " row of as many nodes under the same rule.",
    )
    for rule in RULES:
        ours = [
            o for o in outcomes if o.configuration.label.startswith(f"{rule}: ") and o.summaries
        ]
        # Each row against the fault-free runs of as many nodes.
        bases = {_nodes(o.configuration): o.summaries for o in ours if _fault_free(o.configuration)}
        rows = []
        for outcome in ours:
            runs = outcome.summaries
            base = bases.get(_nodes(outcome.configuration), [])
            timed_out, by_leader = timeouts_text(runs)
            rows.append(
                [
                    outcome.configuration.label.removeprefix(f"{rule}: "),
                    str(len(runs)),
                    over_runs(tps_of(runs)),
                    against(tps_of(runs), tps_of(base), "share"),
                    over_runs(p50_of(runs)),
                    against(p50_of(runs), p50_of(base), "times"),
                    timed_out,
                    by_leader,
                ]
            )
        page.section(f"`--leader={rule}`")
        page.table(headers, rows)
        if rule == "round-robin":
            page.add("", ROUND_ROBIN_LOSSES)
        outage = by_label.get(f"{rule}: {OUTAGE}")
        if outage and outage.summaries:
            resumed = over_runs([resumed_after_ms(s) for s in outage.summaries], suffix=" ms")
            page.add(
                "",
                f"After the outage, the survivors committed again {resumed} after the second"
                " node came back (the round timeout is 1,000 ms).",
            )


LEADERS = Experiment(
    name="leaders",
    title="Leaders: what faults cost under round-robin and under reputation",
    question=(
        "How much of its fault-free throughput and latency does a committee keep when members"
        " crash, under round-robin leaders and under leader reputation, and how soon do commits"
        " resume once a quorum is back after an outage of more than f members?"
        " (`hotcrypto`, every node and client on this machine.)"
    ),
    configurations=_configurations,
    write=_write,
    read_logs=read_logs,
)
