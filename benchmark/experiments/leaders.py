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

from collections.abc import Sequence
from pathlib import Path

from ..analysis.metrics import load_run
from ..analysis.run_summary import Summary
from ..faults.events import RESTART, FaultLog
from .experiment import Configuration, Experiment, Outcome
from .page import Page

RULES = ("round-robin", "reputation")
OUTAGE = "more than f down, then back"


def scenarios(quick: bool) -> list[tuple[str, dict[str, str], tuple[str, ...], str | None]]:
    """(label, flags, crashes, kill-leader period) of each scenario."""
    if quick:
        rate, duration, long, kill = "2000", "6", "9", "3"
        outage = ("2@2:5", "3@2:5")
    else:
        rate, duration, long, kill = "8000", "20", "60", "5"
        outage = ("2@5:15", "3@5:15")
    base = {"mode": "hotcrypto", "rate": rate, "duration": duration}
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


def resumed_after_ms(summary: Summary) -> float | None:
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


def _fmt(value: float | None, suffix: str = "") -> str:
    return "-" if value is None else f"{value:,.0f}{suffix}"


def _fault_free(configuration: Configuration) -> bool:
    return (
        "faults" not in configuration.flags
        and not configuration.crash
        and not configuration.partition
        and configuration.kill_leader_every is None
    )


def _nodes(configuration: Configuration) -> str:
    return str(configuration.flags.get("nodes", "4"))


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    by_label = {o.configuration.label: o for o in outcomes}
    headers = [
        "scenario",
        "delivered tx/s",
        "of fault-free",
        "end-to-end p50 ms",
        "p50 against fault-free",
        "rounds timed out",
        "timeouts by leader (all nodes)",
    ]
    for rule in RULES:
        ours = [
            o for o in outcomes if o.configuration.label.startswith(f"{rule}: ") and o.summaries
        ]
        # Each row against the fault-free run of as many nodes.
        bases = {
            _nodes(o.configuration): o.summaries[0] for o in ours if _fault_free(o.configuration)
        }
        rows = []
        for outcome in ours:
            summary = outcome.summaries[0]
            base = bases.get(_nodes(outcome.configuration))
            tps, p50 = summary.end_to_end.tps, summary.end_to_end.latency.p50_ms
            base_tps = base.end_to_end.tps if base else None
            base_p50 = base.end_to_end.latency.p50_ms if base else None
            rounds = summary.rounds
            rows.append(
                [
                    outcome.configuration.label.removeprefix(f"{rule}: "),
                    _fmt(tps),
                    "-" if not base_tps else f"{tps / base_tps:.0%}",
                    _fmt(p50),
                    "-" if not (base_p50 and p50) else f"{p50 / base_p50:.1f}x",
                    "-" if rounds is None else f"{rounds.timeouts:,.0f} of {rounds.rounds:,.0f}",
                    "-"
                    if rounds is None
                    else ", ".join(f"{k} x{v}" for k, v in rounds.timed_out_leaders.items()) or "-",
                ]
            )
        page.section(f"`--leader={rule}`")
        page.table(headers, rows)
        outage = by_label.get(f"{rule}: {OUTAGE}")
        if outage and outage.summaries:
            resumed = resumed_after_ms(outage.summaries[0])
            page.add(
                "",
                f"After the outage, the survivors committed again {_fmt(resumed, ' ms')} after"
                " the second node came back (the round timeout is 1,000 ms).",
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
)
