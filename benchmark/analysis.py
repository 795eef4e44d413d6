"""From a run's log directory to a printed and saved summary (the same for local and remote)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from . import results
from .analysis_options import AnalysisOptions
from .config import BenchParameters
from .fault_analysis import analyse_faults, attach, enforce
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
    enforce_audit: bool = True,
) -> tuple[Summary, Path | None]:
    """Parse the logs, summarise, audit, print, and save the result (unless `results_dir` is
    None); a failed audit raises once the result is saved (unless not `enforce_audit`).
    Without `bench` the configuration is unknown and the mode comes from the records. Profiles
    (`profile-*/profile.folded` under the logs, written by `--profile`) join the summary."""
    run = load_run(log_dir)
    known = bench.to_dict() if bench is not None else {}
    analysis = (options or AnalysisOptions()).to_config()
    config = {**known, **analysis, **(extra or {}), "logs": str(log_dir)}
    summary = replace(summarize(run, config), profile=load_profiles(log_dir))
    out.write(render_summary(summary))
    faults = analyse_faults(run, log_dir, config, summary.mode)
    out.write(faults.render())
    saved = results.save(summary, results_dir) if results_dir is not None else None
    if saved is not None:
        attach(saved, faults)
        out.write(f"Result saved to {saved}\n")
    out.flush()
    if enforce_audit:
        enforce(faults)
    return summary, saved
