"""From a run's log directory to a printed and saved summary (the same for local and remote)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from . import results
from .config import BenchParameters
from .metrics import load_run
from .report import render_summary
from .summary import Summary, summarize


def finish_run(
    log_dir: Path,
    bench: BenchParameters | None,
    results_dir: Path | None,
    out: TextIO,
    extra: dict[str, Any] | None = None,
) -> tuple[Summary, Path | None]:
    """Parse the logs, summarise, print, and save the result (unless `results_dir` is None).
    Without `bench` the configuration is unknown and the mode comes from the records."""
    run = load_run(log_dir)
    known = bench.to_dict() if bench is not None else {}
    config = {**known, **(extra or {}), "logs": str(log_dir)}
    summary = summarize(run, config)
    out.write(render_summary(summary))
    saved = results.save(summary, results_dir) if results_dir is not None else None
    if saved is not None:
        out.write(f"Result saved to {saved}\n")
    out.flush()
    return summary, saved
