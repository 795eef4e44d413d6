"""From a run's log directory to a printed and saved summary (the same for local and remote)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from ..analysis import results
from ..analysis.audit.fault_report import analyse_faults, attach, enforce
from ..analysis.metrics import RunMetrics, load_run
from ..analysis.node_lives import mark_lives
from ..analysis.options import AnalysisOptions
from ..analysis.resources.energy import energy_of
from ..analysis.resources.profiles import load_profiles
from ..analysis.run_summary import Summary, summarize
from ..config import BenchParameters
from ..faults.events import FaultLog
from ..report.text import render_summary


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
    (`profile-*/profile.folded` under the logs, written by `--profile`) and the energy counters
    (`energy.json`, see `analysis/resources/energy.py`) join the summary."""
    known = bench.to_dict() if bench is not None else {}
    analysis = (options or AnalysisOptions()).to_config()
    config = {**known, **analysis, **(extra or {}), "logs": str(log_dir)}
    run, faults = _read(log_dir)
    summary = _summary(run, config, log_dir)
    out.write(render_summary(summary))
    analysis_of_faults = analyse_faults(run, faults, config, summary.pipeline)
    out.write(analysis_of_faults.render())
    saved = results.save(summary, results_dir) if results_dir is not None else None
    if saved is not None:
        attach(saved, analysis_of_faults)
        out.write(f"Result saved to {saved}\n")
    out.flush()
    if enforce_audit:
        enforce(analysis_of_faults)
    return summary, saved


def summary_from_logs(log_dir: Path, config: Mapping[str, Any]) -> Summary:
    """A finished run's summary worked out again from its logs, with the configuration it ran
    with (as its saved result holds it): what the analysis of today makes of an earlier run."""
    run, _ = _read(log_dir)
    return _summary(run, dict(config), log_dir)


def _read(log_dir: Path) -> tuple[RunMetrics, FaultLog]:
    # A restarted node's records are read per life (its counters start again from zero).
    faults = FaultLog.load(log_dir)
    return mark_lives(load_run(log_dir), faults), faults


def _summary(run: RunMetrics, config: dict[str, Any], log_dir: Path) -> Summary:
    summary = summarize(run, config)
    return replace(
        summary,
        profile=load_profiles(log_dir),
        energy=energy_of(log_dir, summary.window, summary.resources, summary.end_to_end.tps),
    )
