"""Graphs of aggregated results (mean and standard deviation over runs), as PNG and PDF.

* robustness: input rate -> end-to-end throughput, one line per committee (nodes, faults) and
  settings (`--store`, `--batch-size`, a fault schedule, ...: `results.settings_of`);
* latency-throughput: end-to-end throughput -> p50 latency, the same lines;
* tps: best throughput per committee size among the points whose latency is under a cap;
* batch sizes: histogram of transactions per batch, one series per stage;
* timelines: per run, tx/s, CPU, queue length and blocked share of every stage over time
  (`timeline.py`, PNG only, in `timelines/`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import matplotlib as mpl

mpl.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # after mpl.use: the backend must be chosen first
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..analysis import results
from ..analysis.results import Point, Result
from ..errors import HarnessError
from .timeline import timelines

DEFAULT_LATENCY_CAPS: tuple[int, ...] = (2_000, 5_000)


class PlotError(HarnessError):
    """Nothing to plot."""


def _save(figure: Figure, directory: Path, stem: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix in ("png", "pdf"):
        path = directory / f"{stem}.{suffix}"
        figure.savefig(path, bbox_inches="tight")
        paths.append(path)
    plt.close(figure)
    return paths


# More lines than this and the legend goes beside the graph, where it hides no point.
LEGEND_INSIDE_MAX = 4


def _legend(axes: Axes) -> None:
    lines = len(axes.get_legend_handles_labels()[0])
    if lines > LEGEND_INSIDE_MAX:
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    elif lines:
        axes.legend()


# A line of the robustness and latency graphs: a committee (nodes, faults) run with one set of
# settings (`Point.settings`).
Line = tuple[int, int, tuple[str, ...]]


def _lines(points: Sequence[Point]) -> dict[Line, list[Point]]:
    groups: dict[Line, list[Point]] = {}
    for point in points:
        groups.setdefault((point.nodes, point.faults, point.settings), []).append(point)
    return dict(sorted(groups.items()))


def _label(line: Line, consensus: bool) -> str:
    nodes, faults, settings = line
    if not consensus:
        committee = "Move VM"
    else:
        committee = f"{nodes} nodes" + (f" ({faults} faulty)" if faults else "")
    return ", ".join([committee, *settings])


def _errorbar(
    axes: Axes,
    label: str,
    x: Sequence[float],
    y: Sequence[float],
    *,
    xerr: Sequence[float] | None = None,
    yerr: Sequence[float] | None = None,
) -> None:
    """One line of points with their standard deviations."""
    axes.errorbar(x, y, xerr=xerr, yerr=yerr, marker="o", capsize=3, label=label)


def _titled(axes: Axes, xlabel: str, ylabel: str, title: str) -> None:
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)


def robustness(points: Sequence[Point], directory: Path, mode: str, consensus: bool) -> list[Path]:
    figure, axes = plt.subplots()
    for line, group in _lines(points).items():
        ordered = sorted(group, key=lambda p: p.rate)
        _errorbar(
            axes,
            _label(line, consensus),
            [p.rate for p in ordered],
            [p.tps.mean or 0.0 for p in ordered],
            yerr=[p.tps.std or 0.0 for p in ordered],
        )
    _titled(axes, "Input rate (tx/s)", "Throughput (tx/s)", f"Robustness ({mode})")
    _legend(axes)
    return _save(figure, directory, f"robustness-{mode}")


def latency_throughput(
    points: Sequence[Point], directory: Path, mode: str, consensus: bool
) -> list[Path]:
    figure, axes = plt.subplots()
    drawn = 0
    for line, group in _lines(points).items():
        ordered = sorted((p for p in group if p.latency_p50.mean is not None), key=lambda p: p.rate)
        if not ordered:
            continue
        drawn += 1
        _errorbar(
            axes,
            _label(line, consensus),
            [p.tps.mean or 0.0 for p in ordered],
            [(p.latency_p50.mean or 0.0) / 1000.0 for p in ordered],
            xerr=[p.tps.std or 0.0 for p in ordered],
            yerr=[(p.latency_p50.std or 0.0) / 1000.0 for p in ordered],
        )
    _titled(
        axes,
        "Throughput (tx/s)",
        "End-to-end latency, p50 (s)",
        f"Latency vs throughput ({mode})",
    )
    if drawn:
        _legend(axes)
    return _save(figure, directory, f"latency-{mode}")


def best_under_cap(points: Sequence[Point], cap_ms: float) -> dict[Line, Point]:
    """Per line (committee and settings), the point of highest mean throughput whose mean p50
    latency is <= cap."""
    best: dict[Line, Point] = {}
    for line, group in _lines(points).items():
        eligible = [
            p for p in group if p.latency_p50.mean is not None and p.latency_p50.mean <= cap_ms
        ]
        if eligible:
            best[line] = max(eligible, key=lambda p: p.tps.mean or 0.0)
    return best


def tps(points: Sequence[Point], directory: Path, mode: str, caps: Sequence[float]) -> list[Path]:
    """Per cap, one line per fault count and settings across committee sizes."""
    figure, axes = plt.subplots()
    for cap in caps:
        best = best_under_cap(points, cap)
        for faults, settings in sorted({(f, s) for _, f, s in best}):
            chosen = sorted(
                ((n, p) for (n, f, s), p in best.items() if (f, s) == (faults, settings)),
                key=lambda item: item[0],
            )
            parts = [f"latency <= {cap / 1000:g} s", *([f"{faults} faulty"] if faults else [])]
            axes.errorbar(
                [n for n, _ in chosen],
                [p.tps.mean or 0.0 for _, p in chosen],
                yerr=[p.tps.std or 0.0 for _, p in chosen],
                marker="s",
                capsize=3,
                label=", ".join([*parts, *settings]),
            )
    axes.set_xlabel("Committee size")
    axes.set_ylabel("Throughput (tx/s)")
    axes.set_title(f"Best throughput under a latency cap ({mode})")
    axes.grid(True, alpha=0.3)
    _legend(axes)
    return _save(figure, directory, f"tps-{mode}")


def batch_histogram(items: Sequence[Result], directory: Path, mode: str) -> list[Path]:
    """One panel per stage: batches of the mempool (consensus) and of the verifier/executor
    stages are on different scales."""
    series = {
        stage: values for stage, values in sorted(results.batch_sizes(items).items()) if values
    }
    panels = max(1, len(series))
    figure, axes = plt.subplots(panels, 1, figsize=(6.4, 2.4 * panels + 0.8), squeeze=False)
    for row, (stage, values) in zip(axes[:, 0], series.items(), strict=False):
        row.hist(values, bins=30)
        row.set_title(f"{stage} ({len(values)} intervals)", fontsize="medium")
        row.set_ylabel("Intervals")
    axes[-1, 0].set_xlabel("Transactions per batch (mean per interval)")
    figure.suptitle(f"Batch sizes ({mode})")
    figure.tight_layout()
    return _save(figure, directory, f"batches-{mode}")


def plot_all(
    results_dir: Path,
    output_dir: Path,
    mode: str,
    caps: Sequence[float] = DEFAULT_LATENCY_CAPS,
    out: TextIO | None = None,
) -> list[Path]:
    """Draw every graph for one mode from the saved results; returns the files written. Files of
    the folder that are not saved results are left out, each named on `out`."""
    skipped: list[str] = []
    items = results.load(results_dir, mode, skipped)
    if out is not None:
        for line in skipped:
            out.write(f"skipped {line}\n")
    if not items:
        raise PlotError(f"no saved results for mode {mode} in {results_dir}")
    points = results.aggregate(items)
    # Every result of one mode ran the same pipeline.
    consensus = results.pipeline_of(items[0]).consensus
    return [
        *robustness(points, output_dir, mode, consensus),
        *latency_throughput(points, output_dir, mode, consensus),
        *tps(points, output_dir, mode, caps),
        *batch_histogram(items, output_dir, mode),
        *timelines(items, output_dir / "timelines"),
    ]
