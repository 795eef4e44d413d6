"""Per run, every node's commits over time with the fault events marked (`fab plot`).

One PNG per saved result that holds a commits timeline (key `commits_timeline`, written by
`analysis/audit/fault_report.py`), in `<output>/commits/`: committed blocks (consensus progress)
on top, executed transactions (`hotstuff`: committed) below; a red line where a node crashed, a
green one where it restarted, an orange one where a partition cut it off and a blue one at the
heal.
A restarted node's counters start again from zero, which the lines show as a drop."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib as mpl

mpl.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # after mpl.use: the backend must be chosen first

from ..analysis import results
from ..faults.events import CRASH, HEAL, PARTITION, RESTART
from ..json_path import lookup

EVENT_COLOURS = {CRASH: "tab:red", RESTART: "tab:green", PARTITION: "tab:orange", HEAL: "tab:blue"}


def _with_gaps(
    points: list[dict[str, Any]], progress: str
) -> tuple[list[float], list[float], list[float]]:
    """The series with a gap (NaN) between two lives, so no line crosses the time a node was
    down."""
    times: list[float] = []
    blocks: list[float] = []
    counts: list[float] = []
    for before, point in zip([None, *points], points, strict=False):
        if before is not None and before["life"] != point["life"]:
            times.append(point["t"])
            blocks.append(math.nan)
            counts.append(math.nan)
        times.append(point["t"])
        blocks.append(
            point["committed_blocks"] if point["committed_blocks"] is not None else math.nan
        )
        counts.append(point[progress] if point[progress] is not None else math.nan)
    return times, blocks, counts


def _draw(result: dict[str, Any], path: Path) -> Path:
    nodes = lookup(result, ("commits_timeline", "nodes")) or {}
    events = lookup(result, ("faults", "events")) or []
    mode = lookup(result, ("config", "mode"))
    # The count of done transactions, by its name in the timeline's points.
    progress = results.pipeline_of(result).done_counter[-1]
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for node, points in sorted(nodes.items(), key=lambda item: int(item[0])):
        times, blocks, counts = _with_gaps(points, progress)
        top.plot(times, blocks, marker=".", label=f"node-{node}")
        bottom.plot(times, counts, marker=".", label=f"node-{node}")
    for event in events:
        colour = EVENT_COLOURS.get(str(event["kind"]), "tab:gray")
        for axes in (top, bottom):
            axes.axvline(event["t"], color=colour, linestyle="--", linewidth=1)
        top.annotate(
            f"{event['kind']} {event['node']}",
            (event["t"], 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            fontsize=7,
            color=colour,
        )
    top.set_ylabel("committed blocks")
    bottom.set_ylabel("executed tx" if progress == "executed" else "committed tx")
    bottom.set_xlabel("seconds from the start of the clients")
    top.legend(fontsize=7)
    top.set_title(f"{mode}: commits per node ({result.get('file', '')})", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return path


def plot_commits(results_dir: Path, output_dir: Path, mode: str) -> list[Path]:
    """One commits timeline per saved run of `mode` that has one."""
    written = []
    for result in results.load(results_dir, mode):
        if not lookup(result, ("commits_timeline", "nodes")):
            continue
        stem = Path(str(result["file"])).stem
        written.append(_draw(result, output_dir / "commits" / f"{stem}.png"))
    return written
