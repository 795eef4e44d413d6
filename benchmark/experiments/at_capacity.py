"""What the modes page shows of each mode at its capacity, by the methods the report builds on:

* A node's flame graph, from one more run at the capacity with `--profile` (`profiled.py`), and
  the share of that node's samples each group of threads took (consensus, the verifier's pool,
  the executor: a node names its threads after what they work for, `node/stages/src/metrics/
  cpu.rs`). The flame graph is copied beside the page, so that its link works wherever the page
  is read.
* The layered queue-length method (the report's section 2): the mean and largest length of each
  bounded channel between stages, and the share of the window its producer spent blocked on it
  (the channel full). A stage whose input channel stays full while its producer waits is the one
  that holds the pipeline back; queues that stay short say the stage keeps up.
* Per-stage latency: each hop of the sample transactions' path (`analysis/consensus/hops.py`),
  p50 and p99.

Queues and hops are medians over the capacity's runs (the unprofiled ones), the largest queue
the largest of them.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..analysis.consensus.hops import PATH, SEND
from ..analysis.resources.profiles import FLAMEGRAPH, ProcessProfile
from ..analysis.run_summary import Summary
from .experiment import Outcome
from .measures import Capacity, fmt, median_of, share
from .page import Page

# The thread groups a profile is split into, as a node names its threads; the rest is "other".
THREAD_GROUPS = ("consensus", "verifier", "executor")
OTHER = "other"
NUMBERED = re.compile(r"-\d+$")


def thread_group(thread: str) -> str:
    """The group a sampled thread belongs to: its name without a pool number (`verifier-3`)."""
    name = NUMBERED.sub("", thread)
    return name if name in THREAD_GROUPS else OTHER


def thread_shares(profile: ProcessProfile) -> dict[str, float]:
    """The share of a process's samples each thread group took."""
    counts: Counter[str] = Counter()
    for thread, samples in profile.threads.items():
        counts[thread_group(thread)] += samples
    total = sum(counts.values())
    return {group: n / total for group, n in counts.items()} if total else {}


def profile_of(summaries: Sequence[Summary]) -> tuple[Summary, ProcessProfile] | None:
    """The first profiled process of the profiled runs (node 0, or the one process), with its
    run."""
    for summary in summaries:
        if summary.profile is not None and summary.profile.first is not None:
            return summary, summary.profile.first
    return None


def slug(label: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", label.lower()))


def profile_rows(outcomes: Sequence[Outcome], page: Page) -> list[list[str]]:
    """Per configuration with a profiled run: the rate it ran at, the node's samples and each
    thread group's share, and a link to its flame graph (copied beside the page)."""
    rows = []
    for outcome in outcomes:
        found = profile_of(outcome.profiled)
        if found is None:
            continue
        run, process = found
        shares = thread_shares(process)
        rate = run.config.get("rate")
        asked = fmt(float(rate)) if run.pipeline.consensus and rate else "-"
        # The graph from the run's logs where they are here; else the copy beside the page (a
        # page written again from its committed record, on a clone).
        copy = page.figure_dir / f"flamegraph-{slug(outcome.configuration.label)}.svg"
        graph = Path(str(run.config.get("logs", ""))) / process.name / FLAMEGRAPH
        if run.config.get("logs") and graph.exists():
            page.figure_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(graph, copy)
        link = f"[{process.name}]({page.name}/{copy.name})" if copy.exists() else "-"
        rows.append(
            [
                outcome.configuration.label,
                asked,
                fmt(process.samples),
                *[share(shares.get(group, 0.0)) for group in (*THREAD_GROUPS, OTHER)],
                link,
            ]
        )
    return rows


def profiled_commands(outcomes: Sequence[Outcome], task: str = "local") -> list[str]:
    """The command each profiled run was, as a user types it."""
    lines = []
    for outcome in outcomes:
        if not outcome.profiled:
            continue
        config = outcome.profiled[0].config
        flags = dict(outcome.configuration.flags) | {"runs": "1"}
        if outcome.profiled[0].pipeline.consensus and config.get("rate"):
            flags["rate"] = str(config["rate"])
        again = replace(outcome.configuration, flags=flags, profile=True, search=None)
        lines.append(f"  - {outcome.configuration.label}: `{again.command(task)}`")
    return lines


def channel_rows(capacities: Mapping[str, Capacity | None]) -> list[list[str]]:
    """Per configuration and bounded channel between stages, at the capacity: the queue's mean
    and largest length, and the share of the window its producer was blocked on it."""
    rows = []
    for label, found in capacities.items():
        if found is None:
            continue
        channels = [
            (row.input_channel, row.name)
            for row in found.runs[0].stages
            if row.input_channel is not None
        ]
        for channel, stage in channels:
            rows_of = [r for s in found.runs if (r := s.stage(stage)) is not None]
            largest = [r.queue_max for r in rows_of if r.queue_max is not None]
            rows.append(
                [
                    label,
                    f"`{channel}`",
                    fmt(median_of([r.queue_mean for r in rows_of]), 1),
                    fmt(max(largest) if largest else None),
                    share(median_of([r.input_blocked_share for r in rows_of])),
                    share(median_of([r.busy_share for r in rows_of])),
                ]
            )
    return rows


def hop_names(capacities: Mapping[str, Capacity | None]) -> list[str]:
    """Every hop some run at a capacity measured, in the path's order, then the whole paths
    (send to the last event of a mode's path: `commit` in hotstuff)."""
    seen = {
        (hop.start, hop.end): hop.name
        for found in capacities.values()
        if found
        for summary in found.runs
        for hop in summary.hops
    }

    def order(hop: tuple[str, str]) -> tuple[bool, int]:
        start, end = hop
        whole = start == SEND and end != PATH[1]
        return whole, PATH.index(end) if end in PATH else len(PATH)

    return [seen[hop] for hop in sorted(seen, key=order)]


def hop_rows(capacities: Mapping[str, Capacity | None]) -> list[list[str]]:
    """Per configuration whose runs have samples: each hop's p50 / p99 in ms, medians over the
    runs at the capacity."""
    names = hop_names(capacities)
    rows = []
    for label, found in capacities.items():
        if found is None or not any(s.hops for s in found.runs):
            continue
        cells = []
        for name in names:
            hops = [h for s in found.runs for h in s.hops if h.name == name]
            p50 = median_of([h.latency.p50_ms for h in hops])
            p99 = median_of([h.latency.p99_ms for h in hops])
            cells.append("-" if p50 is None else f"{fmt(p50, 1)} / {fmt(p99, 1)}")
        rows.append([label, *cells])
    return rows


def write_sections(
    outcomes: Sequence[Outcome], capacities: Mapping[str, Capacity | None], page: Page
) -> None:
    """The flame graphs, queues and hops at each capacity, each in a section of its own."""
    profiles = profile_rows(outcomes, page)
    page.section(
        "A node at capacity: its profile",
        "Each configuration's capacity was run once more with `--profile` (99 samples a second of"
        " every thread; that run counts towards no figure above, the profiler costs CPU). Node 0's"
        " samples (the process's, for `movevm`) by the threads that took them: consensus (its"
        " runtime's threads), the verifier's pool, the executor; the flame graph shows the"
        " functions. The profiled runs:",
        *profiled_commands(outcomes),
    )
    if profiles:
        page.table(
            [
                "configuration",
                "profiled at (tx/s)",
                "samples",
                *[f"{group} threads" for group in THREAD_GROUPS],
                "other threads",
                "flame graph",
            ],
            profiles,
        )
    else:
        page.add("", "No configuration has a profiled run (none kept up with a rate).")
    page.section(
        "Queues between the stages at capacity",
        "The layered queue-length method (the report's section 2): every stage takes its input"
        " from a bounded channel; a channel that stays full while its producer waits on it names"
        " the stage that holds the pipeline back, and short queues say a stage keeps up. Queue"
        " lengths in batches, sampled every second over the steady window (mean: the median over"
        " the runs at capacity of each run's mean; max: the largest in any of them); producer"
        " blocked on it: the share of the window the stage that sends into it waited for room;"
        " consumer busy: the share the stage it feeds spent working (wall clock).",
    )
    page.table(
        [
            "configuration",
            "channel",
            "queue mean",
            "queue max",
            "producer blocked on it",
            "consumer busy",
        ],
        channel_rows(capacities),
    )
    names = hop_names(capacities)
    page.section(
        "Latency per stage at capacity",
        "The sample transactions' path, hop by hop (`benchmark/analysis/consensus/hops.py`):"
        " p50 / p99 in ms, medians over the runs at capacity. `movevm` has no clients and no"
        " samples.",
    )
    if names:
        page.table(["configuration", *names], hop_rows(capacities))
