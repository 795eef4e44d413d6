"""Timeline figures: one PNG per saved run, one panel per quantity (tx/s, CPU cores, input queue
length, blocked share), one line per stage, over the seconds of the run (see timeline.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # after mpl.use: the backend must be chosen first

from ..analysis.results import Result
from ..analysis.timelines import STAGE_QUANTITIES
from ..json_path import lookup

LABELS = {
    "tps": "tx/s",
    "cpu_cores": "CPU (cores)",
    "queue": "input queue (batches)",
    "blocked_share": "blocked (share)",
}


def timeline_figure(result: Result, directory: Path) -> Path | None:
    """The run's timeline as `timeline-<result file>.png`; None if it saved no timeline."""
    seconds = lookup(result, ("timeline", "t_s"))
    stages = lookup(result, ("timeline", "stages"))
    if not isinstance(seconds, list) or not seconds or not isinstance(stages, dict):
        return None
    figure, axes = plt.subplots(len(STAGE_QUANTITIES), 1, sharex=True, figsize=(7.0, 8.0))
    for panel, quantity in zip(axes, STAGE_QUANTITIES, strict=True):
        # One colour per stage in every panel.
        for colour, (stage, series) in enumerate(sorted(stages.items())):
            values = series.get(quantity) if isinstance(series, dict) else None
            if not isinstance(values, list) or all(v is None for v in values):
                continue
            # A missing second is a gap in the line, not a zero.
            points = [float("nan") if v is None else float(v) for v in values]
            panel.plot(seconds[: len(points)], points, marker=".", label=stage, color=f"C{colour}")
        panel.set_ylabel(LABELS[quantity])
        panel.grid(True, alpha=0.3)
        if panel.get_legend_handles_labels()[0]:
            panel.legend(fontsize="small", loc="upper right")
    axes[-1].set_xlabel("Seconds since the load started")
    stem = Path(str(result.get("file", "run"))).stem
    figure.suptitle(f"Timeline: {stem}")
    figure.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"timeline-{stem}.png"
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return path


def timelines(items: Sequence[Result], directory: Path) -> list[Path]:
    return [path for item in items if (path := timeline_figure(item, directory)) is not None]
