"""Runs an experiment's configurations on this machine and writes its page.

Every configuration is checked before the first run (a mistake in the last should cost seconds,
not the hour before it), the binaries are built once, and a configuration that fails (a process
died, an audit failed) is recorded on the page with why, and the others still run.

Each run of an experiment is recorded under the logs (`logs/experiments/NAME.json`: the machine,
the commit, and every run's configuration and log directory), so `--rewrite` can write the page
again from those logs, with today's analysis, without running anything: an hour of runs is not
lost to a better explanation of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from ..errors import HarnessError
from ..faults.schedule import FaultSchedule, schedule_from_flags
from ..flags import sweep_from_flags
from ..runners.finish import summary_from_logs
from ..runners.local import DEFAULT_BASE_PORT, LocalBench
from ..runners.local import build as cargo_build
from .experiment import Configuration, Experiment, Outcome
from .page import Machine, Page, commit_of

# Flags whose value is a file.
FILE_FLAGS = ("delay_matrix",)


def run_experiment(
    experiment: Experiment,
    *,
    quick: bool,
    repo_root: Path,
    output: Path,
    logs_dir: Path,
    results_dir: Path,
    out: TextIO,
    work_dir: Path | None = None,
    binaries: Path | None = None,
    build: bool = True,
    base_port: int = DEFAULT_BASE_PORT,
) -> Path:
    """Runs every configuration of `experiment` and writes its page into `output`; returns the
    page's path."""
    machine = Machine.this_one()
    configurations = experiment.configurations(quick)
    prepared = [prepare(c, repo_root) for c in configurations]
    if build:
        cargo_build(repo_root, out)
    outcomes: list[Outcome] = []
    for configuration, points, schedule in prepared:
        out.write(f"\n== {experiment.name}: {configuration.label}: {configuration.command()}\n")
        out.flush()
        runner = LocalBench(
            repo_root=repo_root,
            base_port=base_port,
            logs_dir=logs_dir,
            results_dir=results_dir,
            work_dir=work_dir,
            binaries=binaries,
            fault_schedule=schedule,
            out=out,
        )
        outcome = Outcome(configuration)
        try:
            for point in points:
                outcome.summaries += runner.run(point)
        except HarnessError as error:
            outcome.error = str(error).splitlines()[0]
            out.write(f"{configuration.label} stopped: {outcome.error}\n")
        outcomes.append(outcome)
    commit = commit_of(repo_root)
    _record(record_path(logs_dir, experiment.name, quick), machine, commit, outcomes)
    return _write_page(experiment, outcomes, machine, commit, quick=quick, output=output)


def rewrite_experiment(
    experiment: Experiment, *, quick: bool, repo_root: Path, output: Path, logs_dir: Path
) -> Path:
    """Writes `experiment`'s page again from the logs of its last run on this machine, with the
    analysis of this checkout; returns the page's path."""
    path = record_path(logs_dir, experiment.name, quick)
    try:
        record = json.loads(path.read_text())
        machine = Machine(**{**record["machine"], "load": tuple(record["machine"]["load"])})
        recorded = {c["label"]: c for c in record["configurations"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HarnessError(
            f"no usable record of a run of {experiment.name} at {path} ({error}); run"
            f" `fab experiment --name={experiment.name}{' --quick' if quick else ''}` first"
        ) from error
    outcomes = []
    for configuration in experiment.configurations(quick):
        outcome = Outcome(configuration)
        entry = recorded.get(configuration.label)
        if entry is None:
            outcome.error = "not in the recorded run"
        else:
            outcome.error = entry["error"]
            try:
                outcome.summaries = [
                    summary_from_logs(Path(run["logs"]), run) for run in entry["runs"]
                ]
            except (OSError, ValueError, KeyError) as error:
                raise HarnessError(
                    f"{configuration.label}: a run's logs cannot be read again ({error})"
                ) from error
        outcomes.append(outcome)
    return _write_page(
        experiment,
        outcomes,
        machine,
        record["commit"],
        quick=quick,
        output=output,
        rewritten=commit_of(repo_root),
    )


def record_path(logs_dir: Path, name: str, quick: bool) -> Path:
    """Where the last run of experiment `name` on this machine is recorded."""
    return logs_dir / "experiments" / f"{name}{'-quick' if quick else ''}.json"


def _record(path: Path, machine: Machine, commit: str, outcomes: Sequence[Outcome]) -> None:
    record = {
        "machine": asdict(machine),
        "commit": commit,
        "configurations": [
            {
                "label": o.configuration.label,
                "error": o.error,
                "runs": [s.config for s in o.summaries],
            }
            for o in outcomes
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str))


def _write_page(
    experiment: Experiment,
    outcomes: Sequence[Outcome],
    machine: Machine,
    commit: str,
    *,
    quick: bool,
    output: Path,
    rewritten: str | None = None,
) -> Path:
    page = Page(name=experiment.name, title=experiment.title, directory=output)
    configurations = [o.configuration for o in outcomes]
    _header(page, experiment, configurations, machine, commit, quick=quick, rewritten=rewritten)
    experiment.write(outcomes, page)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        page.section(
            "Runs that did not finish",
            *[f"- {o.configuration.label}: {o.error}" for o in failed],
        )
    return page.write()


def prepare(
    configuration: Configuration, repo_root: Path
) -> tuple[Configuration, list, FaultSchedule]:
    """The points and fault schedule of a configuration, checked now (a bad flag is one error
    before anything runs). A file a flag names by a relative path (an experiment's
    `--delay-matrix`) is the repository's, wherever `fab` was started."""
    flags = configuration.flag_values()
    for name in FILE_FLAGS:
        given = flags.get(name)
        if isinstance(given, str) and not Path(given).is_absolute():
            flags[name] = str(repo_root / given)
    points = sweep_from_flags(flags)
    schedule = schedule_from_flags(
        list(configuration.crash), configuration.kill_leader_every, list(configuration.partition)
    )
    for point in points:
        schedule.check(point)
    return configuration, points, schedule


def _header(
    page: Page,
    experiment: Experiment,
    configurations: Sequence[Configuration],
    machine: Machine,
    commit: str,
    *,
    quick: bool,
    rewritten: str | None = None,
) -> None:
    page.add("", experiment.question)
    size = (
        "`--quick`: a CI-sized version (short runs at low rates); its figures check the"
        " machinery, they are not measurements to quote."
        if quick
        else "the full experiment."
    )
    page.section(
        "How this page was made",
        f"Written by `fab experiment {experiment.name}{' --quick' if quick else ''}`, {size}",
        "",
        f"- Machine: {machine.describe()}.",
        f"- Commit: `{commit}`.",
        *(
            [
                f"- Written again from these runs' logs by `fab experiment {experiment.name}"
                f"{' --quick' if quick else ''} --rewrite`, with the analysis of commit"
                f" `{rewritten}`."
            ]
            if rewritten
            else []
        ),
        "- Commands (each repeated `--runs` times, every rate of a list in turn):",
        *[f"  - {c.label}: `{c.command()}`" for c in configurations],
    )
