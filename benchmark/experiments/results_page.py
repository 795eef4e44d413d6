"""An experiment's results page, written from its record and the outcome of every configuration:
after its runs (`runner.py`), or again without running anything (`--rewrite`), from the logs of
its last run here or, on a clone, from the record committed beside the page (`records.py`).
Every page written rewrites the index of the pages too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from .experiment import Configuration, Experiment, Outcome
from .machine_section import machine_section
from .page import Page, commit_of
from .page_index import comparison_lines, write_index
from .records import Record, last_record, page_record_path, relative, save_beside_page


def rewrite_experiment(
    experiment: Experiment, *, quick: bool, repo_root: Path, output: Path, logs_dir: Path
) -> Path:
    """Writes `experiment`'s page again without running anything: from the logs of its last run
    on this machine, with the analysis of this checkout; where they are not here (a clone), from
    the record committed beside the page, as it was written. Returns the page's path."""
    record, recorded_outcomes, from_logs = last_record(experiment, quick, logs_dir, output)
    if from_logs:
        record = replace(record, rewritten=commit_of(repo_root))
    outcomes = [
        recorded_outcomes.get(c.label) or Outcome(c, error="not in the recorded run")
        for c in experiment.configurations(quick)
    ]
    return write_page(experiment, outcomes, record, quick=quick, output=output, repo_root=repo_root)


def write_page(
    experiment: Experiment,
    outcomes: Sequence[Outcome],
    record: Record,
    *,
    quick: bool,
    output: Path,
    repo_root: Path,
) -> Path:
    """Writes the page, and the record it was written from beside it; paths under `repo_root`
    are written relative to it, so neither names the machine that ran the runs."""
    page = Page(name=experiment.name, title=experiment.title, directory=output, quick=quick)
    _header(
        page,
        experiment,
        [o.configuration for o in outcomes],
        record,
        commits={o.configuration.label: o.commit for o in outcomes},
        seconds=[o.seconds for o in outcomes],
        quick=quick,
    )
    machine_section(page, outcomes)
    experiment.write(outcomes, page)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        page.section(
            "Runs that did not finish",
            *[f"- {o.configuration.label}: {relative(o.error or '', repo_root)}" for o in failed],
        )
    written = page.write()
    save_beside_page(
        page_record_path(output, experiment.name),
        experiment.name,
        quick,
        record,
        outcomes,
        root=repo_root,
    )
    write_index(page.directory)
    return written


def _commit_lines(record: Record, commits: Mapping[str, str | None]) -> list[str]:
    """What ran at another commit than the record's, by commit (`--only` runs leave a page whose
    configurations ran at several)."""
    earlier: dict[str, list[str]] = {}
    for label, commit in commits.items():
        if commit is not None and commit != record.commit:
            earlier.setdefault(commit, []).append(label)
    if record.only is None and not earlier:
        return []
    head = (
        f"- Only the configurations whose label contains `{record.only}` ran at this commit"
        " (`--only`); the others are from earlier runs"
        if record.only is not None
        else "- Some configurations ran at other commits"
    )
    if not earlier:
        return [f"{head}, at the same commit."]
    return [
        f"{head}:",
        *[f"  - at `{commit}`: {grouped(labels)}." for commit, labels in earlier.items()],
    ]


def _time_lines(seconds: Sequence[float | None]) -> list[str]:
    """How long the configurations took on that machine, where the record kept it for all."""
    known = [s for s in seconds if s is not None]
    if not known or len(known) < len(seconds):
        return []
    return [
        f"- Time: {sum(known) / 60:.0f} min of real time for the {len(known)} configurations"
        f" (their runs and the probe before each; {max(known) / 60:.0f} min the longest)."
    ]


def grouped(labels: Sequence[str]) -> str:
    """Labels named by their case (what comes before the first `: `), with how many of the case's
    configurations there are where it has several: a gate's page has dozens of labels that differ
    only in K and run."""
    cases: dict[str, list[str]] = {}
    for label in labels:
        cases.setdefault(label.split(": ", 1)[0], []).append(label)
    return "; ".join(
        members[0] if len(members) == 1 else f"{case} ({len(members)} configurations)"
        for case, members in cases.items()
    )


def _header(
    page: Page,
    experiment: Experiment,
    configurations: Sequence[Configuration],
    record: Record,
    *,
    commits: Mapping[str, str | None],
    seconds: Sequence[float | None],
    quick: bool,
) -> None:
    page.add("", experiment.question)
    size = (
        "`--quick`: a CI-sized version (short runs at low rates); its figures check the"
        " machinery, they are not measurements to quote."
        if quick
        else "the full experiment."
    )
    remote = " --remote" if record.task == "remote" else ""
    again = (
        [
            f"- Written again from these runs' logs by `fab experiment {experiment.name}"
            f"{' --quick' if quick else ''}{remote} --rewrite`, with the analysis of commit"
            f" `{record.rewritten}`."
        ]
        if record.rewritten
        else []
    )
    page.section(
        "How this page was made",
        f"Written by `fab experiment {experiment.name}{' --quick' if quick else ''}{remote}`,"
        f" {size}",
        "",
        f"- Machine: {record.machine.describe()}.",
        *_time_lines(seconds),
        *comparison_lines(record.machine.cpu, experiment.compared_with, page.directory),
        *([f"- Hosts: {record.hosts}."] if record.hosts else []),
        f"- Commit: `{record.commit}`.",
        *_commit_lines(record, commits),
        *(
            [
                f"- The run stopped halfway and went on with `--resume` at the same commit:"
                f" {record.resumed} of its configurations ran before the stop (their probes show"
                " the machine then)."
            ]
            if record.resumed
            else []
        ),
        *again,
        "- Commands (each"
        + (" `fab` command" if any(c.bench for c in configurations) else "")
        + " repeated `--runs` times, every rate of a list in turn):",
        *[
            f"  - {c.label}: `{record.commands.get(c.label) or c.command(record.task)}`"
            for c in configurations
        ],
    )
