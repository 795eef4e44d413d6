"""From a run's log directory to a printed and saved summary (the same for local and remote)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from . import results
from .analysis_options import AnalysisOptions
from .config import BenchParameters
from .metrics import load_run
from .profiles import load_profiles
from .report import render_summary
from .summary import Summary, summarize


def finish_run(
    log_dir: Path,
    bench: BenchParameters | None,
    results_dir: Path | None,
    out: TextIO,
    extra: dict[str, Any] | None = None,
    *,
    options: AnalysisOptions | None = None,
) -> tuple[Summary, Path | None]:
    """Parse the logs, summarise, print, and save the result (unless `results_dir` is None).
    Without `bench` the configuration is unknown and the mode comes from the records. Profiles
    (`profile-*/profile.folded` under the logs, written by `--profile`) join the summary."""
    run = load_run(log_dir)
    known = bench.to_dict() if bench is not None else {}
    analysis = (options or AnalysisOptions()).to_config()
    config = {**known, **analysis, **(extra or {}), "logs": str(log_dir)}
    summary = replace(summarize(run, config), profile=load_profiles(log_dir))
    out.write(render_summary(summary))
    saved = results.save(summary, results_dir) if results_dir is not None else None
    if saved is not None:
        out.write(f"Result saved to {saved}\n")
    out.flush()
    return summary, saved
