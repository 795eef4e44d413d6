"""`faults`: every fault the harness can inject, under each leader rule: what the committee
delivered, how long each node that came back took to catch up, when commits resumed, and what
the audit said.

The scenarios are the four-node ones of `leaders` (fault-free, a node never booted, the leader
killed every S seconds, more than f down then back: the same flags, so the two pages agree) and
two more: one node crashed and restarted, and one node partitioned off and healed. Catch-up times
and the audit are the run's fault analysis (`analysis/audit/fault_report.py`), read again from
its logs. A run whose audit fails stops its configuration (the runner names it under "Runs that
did not finish"), so every row here passed its audit; the column says how many checks that was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import median
from typing import Any

from ..analysis.audit.fault_report import FaultAnalysis, analyse_faults
from ..analysis.codec import decode, encode
from ..analysis.metrics import load_run
from ..analysis.node_lives import mark_lives
from ..analysis.run_summary import Summary
from ..analysis.timelines import CatchUp, CommitsTimeline
from ..faults.events import FaultLog
from .experiment import Configuration, Experiment, Outcome
from .leaders import OUTAGE, RULES, against, p50_of, resumed_after_ms, scenarios, tps_of
from .leaders import read_logs as leaders_read_logs
from .measures import fmt, over_runs
from .page import Page

FAULT_FREE = "fault-free"
CRASH_AND_RESTART = "crash and restart"
PARTITION_AND_HEAL = "partition and heal"
# The names of `leaders`' scenarios on this page.
NAMES = {"--faults=1": "crash from the start (--faults=1)", OUTAGE: OUTAGE}

Scenario = tuple[str, dict[str, str], tuple[str, ...], str | None, tuple[str, ...]]


def _name(label: str, kill: str | None) -> str:
    if kill is not None:
        return f"kill the leader every {kill} s ({label})"
    return NAMES.get(label, label)


def _scenarios(quick: bool) -> list[Scenario]:
    """(label, flags, crashes, kill-leader period, partitions) of each scenario."""
    shared = [s for s in scenarios(quick) if "nodes" not in s[1]]  # the four-node ones
    base = shared[0][1]
    if quick:
        crash, partition = ("1@2:5",), ("3@2-5",)
        longer = {**base, "duration": "9"}
    else:
        crash, partition = ("1@5:15",), ("3@5-15",)
        longer = {**base, "duration": "30"}
    named: list[Scenario] = [
        (NAMES.get(label, label), flags, crashes, kill, ())
        for label, flags, crashes, kill in shared
    ]
    named.insert(2, (CRASH_AND_RESTART, longer, crash, None, ()))
    named.insert(4, (PARTITION_AND_HEAL, longer, (), None, partition))
    return named


# The rules of a `--quick` run: one. The quick `leaders` experiment already runs the four-node
# scenarios both pages share under both rules; this page adds crash-and-restart and partition,
# checked under the rule whose code they exercise more (the chain read from a store after a
# restart, the rounds after a heal).
QUICK_RULES = ("reputation",)


def _configurations(quick: bool) -> Sequence[Configuration]:
    return [
        Configuration(
            f"{rule}: {label}",
            {**flags, "leader": rule},
            crash=crash,
            kill_leader_every=kill,
            partition=partition,
        )
        for rule in (QUICK_RULES if quick else RULES)
        for label, flags, crash, kill, partition in _scenarios(quick)
    ]


FAULT_ANALYSIS = "fault_analysis"


def read_logs(summary: Summary) -> dict[str, Any]:
    """What the page reads from a run's logs: when commits resumed, and the catch-ups and the
    audit of its fault analysis (not its per-second timeline, which the page does not show)."""
    found = analysis_from_logs(summary)
    if found is not None:
        timeline = CommitsTimeline(
            found.commits_timeline.start_ms, catch_ups=found.commits_timeline.catch_ups
        )
        found = FaultAnalysis(FaultLog(), timeline, found.audit)
    return {**leaders_read_logs(summary), FAULT_ANALYSIS: encode(found)}


def fault_analysis(summary: Summary) -> FaultAnalysis | None:
    """The run's catch-ups and audit, as read from its logs when its summary was made
    (`read_logs`), else from its logs now."""
    if FAULT_ANALYSIS in summary.readings:
        saved = summary.readings[FAULT_ANALYSIS]
        return None if saved is None else decode(FaultAnalysis, saved)
    return analysis_from_logs(summary)


def analysis_from_logs(summary: Summary) -> FaultAnalysis | None:
    """The run's faults, catch-ups and audit, from the logs the summary names."""
    logs = summary.config.get("logs")
    if not isinstance(logs, str):
        return None
    directory = Path(logs)
    faults = FaultLog.load(directory)
    run = mark_lives(load_run(directory), faults)
    return analyse_faults(run, faults, summary.config, summary.pipeline)


def catch_up_text(catch_ups: Sequence[CatchUp]) -> str:
    """How long the nodes that came back took to reach what the others had: one figure for one
    comeback, the median and the longest of several, and how many never did."""
    if not catch_ups:
        return "-"
    times = [c.caught_up_after for c in catch_ups if c.caught_up_after is not None]
    missed = len(catch_ups) - len(times)
    if len(catch_ups) == 1:
        only = catch_ups[0]
        if only.caught_up_after is None:
            return f"did not (node-{only.node} reached {fmt(only.reached)} of {fmt(only.target)})"
        return f"{only.caught_up_after:.1f} s (node-{only.node})"
    text = f"{len(times)} of {len(catch_ups)}"
    if times:
        text += f": median {median(times):.1f} s, longest {max(times):.1f} s"
    if missed:
        text += f"; {missed} did not"
    return text


def audit_text(analyses: Sequence[FaultAnalysis | None]) -> str:
    """The audit of every run: `ok (N checks)`, with how many runs when there were several, or
    the checks that failed."""
    reports = [a.audit for a in analyses if a is not None]
    if not reports:
        return "-"
    failed = [r for r in reports if not r.ok]
    if not failed:
        checks = sorted({len(r.checks) for r in reports})
        counted = "/".join(str(c) for c in checks)
        runs = f" in {len(reports)} of {len(reports)} runs" if len(reports) > 1 else ""
        return f"ok{runs} ({counted} checks)"
    names = sorted({c.name for r in failed for c in r.failures})
    runs = f" in {len(failed)} of {len(reports)} runs" if len(reports) > 1 else ""
    return f"FAILED{runs}: {', '.join(names)}"


def scenario_row(
    label: str,
    summaries: Sequence[Summary],
    base: Sequence[Summary],
    analyses: Sequence[FaultAnalysis | None],
    resumed_ms: Sequence[float | None],
) -> list[str]:
    """A scenario's runs against the fault-free runs of its rule: figures over several runs
    are `median (min-max)`, the share of fault-free a ratio of medians, catch-ups pooled."""
    catch_ups = [c for a in analyses if a is not None for c in a.commits_timeline.catch_ups]
    return [
        label,
        str(len(summaries)),
        over_runs(tps_of(summaries)),
        against(tps_of(summaries), tps_of(base), "share"),
        over_runs(p50_of(summaries)),
        catch_up_text(catch_ups) if any(a is not None for a in analyses) else "-",
        over_runs(resumed_ms, suffix=" ms"),
        audit_text(analyses),
    ]


HEADERS = [
    "scenario",
    "runs",
    "delivered tx/s",
    "of fault-free (medians)",
    "end-to-end p50 ms",
    "caught up after coming back",
    "commits resumed after the last restart",
    "audit",
]


def _write(outcomes: Sequence[Outcome], page: Page) -> None:
    page.add(
        "",
        "Caught up: from a node's restart (or the end of its partition) until it had executed"
        " what the others had when it came back (committed, in `hotstuff`). Commits resumed:"
        " from the last restart of the run until the first commit of a node that stayed up."
        " Figures over several runs are `median (min-max)`; catch-ups are pooled over the runs.",
    )
    for rule in RULES:
        prefix = f"{rule}: "
        if not any(o.configuration.label.startswith(prefix) for o in outcomes):
            continue
        mine = [o for o in outcomes if o.configuration.label.startswith(prefix) and o.summaries]
        first = next((o for o in mine if o.configuration.label == prefix + FAULT_FREE), None)
        base = first.summaries if first else []
        rows = [
            scenario_row(
                outcome.configuration.label.removeprefix(prefix),
                outcome.summaries,
                base,
                [fault_analysis(s) for s in outcome.summaries],
                [resumed_after_ms(s) for s in outcome.summaries],
            )
            for outcome in mine
        ]
        page.section(f"`--leader={rule}`")
        page.table(HEADERS, rows)


FAULTS = Experiment(
    name="faults",
    title="Faults: crashes, restarts, leader kills, partitions, and more than f down",
    question=(
        "What does a committee deliver when a member crashes from the start, crashes and comes"
        " back, when its leader is killed every few seconds, when a member is partitioned off"
        " and healed, and when more than f members are down for a while; how long does a node"
        " that comes back take to catch up, and does the audit hold? Under both leader rules"
        " (`hotcrypto`, 4 nodes and 4 clients on this machine)."
    ),
    configurations=_configurations,
    write=_write,
    compared_with=("leaders",),
    read_logs=read_logs,
)
