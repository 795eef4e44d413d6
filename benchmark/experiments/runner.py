"""Runs an experiment's configurations on this machine and writes its page.

Every configuration is checked before the first run (a mistake in the last should cost seconds,
not the hour before it), the binaries are built once, and a configuration that fails (a process
died, an audit failed) is recorded on the page with why, and the others still run.

The runs happen on a testbed: this machine (`LocalTestbed`, `fab local`'s runner) or the hosts of
`fab remote` (`RemoteTestbed`, `fab experiment NAME --remote`), where a configuration that runs in
one process (`movevm`) is left out, said so on the page.

Each run of an experiment is recorded under the logs (`logs/experiments/NAME.json`: the machine,
the commit, and every run's configuration and log directory), so `--rewrite` can write the page
again from those logs, with today's analysis, without running anything: an hour of runs is not
lost to a better explanation of them. While it runs, the record is kept up to date after every
configuration (`NAME.unfinished.json`), so a run stopped halfway (a crash, a closed session)
goes on from where it stopped with `--resume`, at the same commit, instead of from the start.
Every page is written with its record beside it (`docs/results/NAME/record.json`, `records.py`):
on a clone without the logs, `--rewrite` (and `--only`, for what it keeps) reads that instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, TextIO

from ..analysis.run_summary import Summary
from ..config import NODE_MODES, BenchParameters
from ..errors import HarnessError
from ..faults.schedule import FaultSchedule, schedule_from_flags
from ..flags import sweep_from_flags
from ..runners.local import DEFAULT_BASE_PORT, LocalBench
from ..runners.local import build as cargo_build
from ..runners.remote import RemoteBench
from ..runners.sweep import PointRunner
from .bench import run_bench
from .experiment import Configuration, Experiment, Outcome
from .machine_section import machine_section
from .page import Machine, Page, commit_of
from .page_index import comparison_lines, write_index
from .probe import QUICK_SECONDS, SECONDS, Prober
from .profiled import profile_at_capacity
from .records import (
    Record,
    page_record_path,
    read_beside_page,
    record_path,
    recorded,
    save,
    save_beside_page,
    table_path,
    unfinished_path,
    with_readings,
)
from .search import settle

# Flags whose value is a file.
FILE_FLAGS = ("delay_matrix",)


class Testbed(Protocol):
    """Where an experiment's runs happen."""

    # The `fab` task whose commands the page quotes.
    task: str

    def hosts(self) -> str | None:
        """The hosts the runs used, as the page says it; None for this machine."""

    def cannot_run(self, points: Sequence[BenchParameters]) -> str | None:
        """Why a configuration's points cannot run here, or None."""

    def runner(self, schedule: FaultSchedule, profile: bool = False) -> PointRunner:
        """What runs a configuration's points, with its fault schedule (profiled, or not)."""


@dataclass
class LocalTestbed:
    """This machine: a `fab local` runner per configuration."""

    repo_root: Path
    logs_dir: Path
    results_dir: Path
    out: TextIO
    work_dir: Path | None = None
    binaries: Path | None = None
    base_port: int = DEFAULT_BASE_PORT
    task: str = "local"

    def hosts(self) -> str | None:
        return None

    def cannot_run(self, points: Sequence[BenchParameters]) -> str | None:
        return None

    def runner(self, schedule: FaultSchedule, profile: bool = False) -> PointRunner:
        return LocalBench(
            repo_root=self.repo_root,
            base_port=self.base_port,
            logs_dir=self.logs_dir,
            results_dir=self.results_dir,
            work_dir=self.work_dir,
            binaries=self.binaries,
            fault_schedule=schedule,
            out=self.out,
            profile=profile,
        )


@dataclass
class RemoteTestbed:
    """The hosts of `fab remote`, through one open `RemoteBench`."""

    bench: RemoteBench
    task: str = "remote"

    def hosts(self) -> str | None:
        settings = self.bench.settings
        return (
            f"{len(self.bench.hosts)} hosts, {settings.instance_type} in"
            f" {', '.join(settings.regions)} (`fab remote`)"
        )

    def cannot_run(self, points: Sequence[BenchParameters]) -> str | None:
        single = sorted({p.mode for p in points if p.mode not in NODE_MODES})
        if single:
            return f"{', '.join(single)} runs in one process: not on the hosts (`fab local`)"
        return None

    def runner(self, schedule: FaultSchedule, profile: bool = False) -> PointRunner:
        self.bench.fault_schedule = schedule
        self.bench.profile = profile
        return self.bench


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
    testbed: Testbed | None = None,
    only: str | None = None,
    resume: bool = False,
) -> Path:
    """Runs every configuration of `experiment` on `testbed` (this machine unless given) and
    writes its page into `output`; returns the page's path. With `only`, runs the configurations
    whose label contains it and takes the others from the last recorded run (`--rewrite`'s).
    With `resume`, runs the configurations an unfinished run of the same commit did not get to,
    and takes the others from it."""
    where = testbed or LocalTestbed(
        repo_root, logs_dir, results_dir, out, work_dir, binaries, base_port
    )
    machine = Machine.this_one()
    configurations = experiment.configurations(quick)
    kept: dict[str, Outcome] = {}
    kept_from = None
    # The checkout the binaries are built from: read before the runs, which take long enough for
    # the tree to change under them.
    commit = commit_of(repo_root)
    unfinished = unfinished_path(logs_dir, experiment.name, quick)
    if resume:
        if only is not None:
            raise HarnessError("--resume goes on with a whole run: it takes no --only")
        earlier, kept = recorded(experiment, quick, logs_dir, path=unfinished)
        if earlier.commit != commit:
            raise HarnessError(
                f"the unfinished run of {experiment.name} is of commit {earlier.commit}, this"
                f" checkout is {commit}: a page holds one commit's runs (check that commit out,"
                " or start again without --resume)"
            )
        machine = earlier.machine
        configurations = [c for c in configurations if c.label not in kept]
    elif only is not None:
        if not any(only in c.label for c in configurations):
            raise HarnessError(f"no configuration of {experiment.name} has {only!r} in its label")
        earlier, kept, _ = _earlier(experiment, quick, logs_dir, output)
        kept_from = earlier.commit
        configurations = [c for c in configurations if only in c.label or c.label not in kept]
    prepared = [prepare(c, repo_root) for c in configurations]
    if build:
        cargo_build(repo_root, out)
    probing = where.task == "local"
    prober = Prober(QUICK_SECONDS if quick else SECONDS) if probing else None

    def record_of(ran: Sequence[Outcome]) -> tuple[Record, list[Outcome]]:
        """The record of `ran` with what was kept, in the experiment's order."""
        by_label = {o.configuration.label: o for o in ran}
        outcomes = [
            by_label.get(c.label) or kept[c.label]
            for c in experiment.configurations(quick)
            if c.label in by_label or c.label in kept
        ]
        commands = {o.configuration.label: o.configuration.command(where.task) for o in outcomes}
        record = Record(
            machine,
            commit,
            where.task,
            where.hosts(),
            commands,
            only=only,
            kept_from=kept_from,
            resumed=len(kept) if resume else 0,
        )
        return record, outcomes

    def save_progress(ran: Sequence[Outcome]) -> None:
        # `--only` runs are short and keep a finished record: only whole runs are resumable.
        if only is None:
            save(unfinished, *record_of(ran))

    try:
        ran = _run_all(
            experiment,
            prepared,
            where=where,
            prober=prober,
            logs_dir=logs_dir,
            out=out,
            repo_root=repo_root,
            quick=quick,
            commit=commit,
            save_progress=save_progress,
        )
    finally:
        if prober is not None:
            prober.close()
    record, outcomes = record_of(ran)
    save(record_path(logs_dir, experiment.name, quick), record, outcomes)
    if only is None:
        unfinished.unlink(missing_ok=True)
    return _write_page(experiment, outcomes, record, quick=quick, output=output)


def _run_all(
    experiment: Experiment,
    prepared: Sequence[tuple[Configuration, list[BenchParameters], FaultSchedule]],
    *,
    where: Testbed,
    prober: Prober | None,
    logs_dir: Path,
    out: TextIO,
    repo_root: Path,
    quick: bool,
    commit: str,
    save_progress: Callable[[Sequence[Outcome]], None],
) -> list[Outcome]:
    """Runs each prepared configuration in turn, the machine probed before each and after the
    last (with `prober`); hands `save_progress` what ran after each."""
    outcomes: list[Outcome] = []
    for configuration, points, schedule in prepared:
        out.write(
            f"\n== {experiment.name}: {configuration.label}: {configuration.command(where.task)}\n"
        )
        out.flush()
        outcome = Outcome(configuration, commit=commit)
        if prober is not None:
            outcome.probe_before = prober.probe()
            if outcomes:
                outcomes[-1].probe_after = outcome.probe_before
                # Kept now: a run stopped during this configuration keeps the last one's probe.
                save_progress(outcomes)
        outcome.error = where.cannot_run(points)
        try:
            _run_configuration(
                where,
                outcome,
                points,
                schedule,
                files=Where(repo_root, logs_dir, out),
                name=experiment.name,
                quick=quick,
            )
            outcome.summaries = [with_readings(experiment, s) for s in outcome.summaries]
        except HarnessError as error:
            outcome.error = str(error).splitlines()[0]
        if outcome.error is not None:
            out.write(f"{configuration.label} stopped: {outcome.error}\n")
        outcomes.append(outcome)
        save_progress(outcomes)
    if prober is not None and outcomes:
        outcomes[-1].probe_after = prober.probe()
    return outcomes


@dataclass(frozen=True)
class Where:
    """Where an experiment's files and output go."""

    repo_root: Path
    logs_dir: Path
    out: TextIO


def _run_configuration(
    where: Testbed,
    outcome: Outcome,
    points: Sequence[BenchParameters],
    schedule: FaultSchedule,
    *,
    files: Where,
    name: str,
    quick: bool,
) -> None:
    """Runs one configuration's points (or its bench) into `outcome`, then its capacity search."""
    configuration = outcome.configuration
    if configuration.bench is not None:
        if where.task != "local":
            outcome.error = "a criterion bench runs on this machine only (`fab experiment`)"
        else:
            table = table_path(files.logs_dir, name, quick, configuration.label)
            outcome.table = run_bench(configuration.bench, files.repo_root, table, files.out)
        return
    if outcome.error is not None:
        return
    runner = where.runner(schedule, configuration.profile)
    for point in points:
        outcome.summaries += runner.run(point)
    if configuration.search is not None and points:
        last = points[-1]

        def at(rate: int, runs: int) -> list[Summary]:
            return runner.run(replace(last, rate=rate, runs=runs))

        outcome.settled = settle(outcome.summaries, at, configuration.search)
        files.out.write(f"{configuration.label}: capacity search: {outcome.settled.why}\n")
    if configuration.profile_at_capacity and points:
        profile_at_capacity(lambda: where.runner(schedule, True), outcome, points[-1])


def rewrite_experiment(
    experiment: Experiment, *, quick: bool, repo_root: Path, output: Path, logs_dir: Path
) -> Path:
    """Writes `experiment`'s page again without running anything: from the logs of its last run
    on this machine, with the analysis of this checkout; where they are not here (a clone), from
    the record committed beside the page, as it was written. Returns the page's path."""
    record, recorded_outcomes, from_logs = _earlier(experiment, quick, logs_dir, output)
    if from_logs:
        record = replace(record, rewritten=commit_of(repo_root))
    outcomes = [
        recorded_outcomes.get(c.label) or Outcome(c, error="not in the recorded run")
        for c in experiment.configurations(quick)
    ]
    return _write_page(experiment, outcomes, record, quick=quick, output=output)


def _earlier(
    experiment: Experiment, quick: bool, logs_dir: Path, output: Path
) -> tuple[Record, dict[str, Outcome], bool]:
    """The last run of `experiment`: from its logs on this machine, else from the record beside
    its page; and whether it came from the logs."""
    try:
        record, outcomes = recorded(experiment, quick, logs_dir)
        return record, outcomes, True
    except HarnessError as no_logs:
        committed = page_record_path(output, experiment.name)
        if not committed.is_file():
            raise HarnessError(
                f"{no_logs}; nor is there a record beside the page at {committed}"
            ) from no_logs
        record, outcomes = read_beside_page(committed, experiment, quick)
        return record, outcomes, False


def _write_page(
    experiment: Experiment,
    outcomes: Sequence[Outcome],
    record: Record,
    *,
    quick: bool,
    output: Path,
) -> Path:
    """Writes the page, and the record it was written from beside it."""
    page = Page(name=experiment.name, title=experiment.title, directory=output)
    _header(
        page,
        experiment,
        [o.configuration for o in outcomes],
        record,
        commits={o.configuration.label: o.commit for o in outcomes},
        quick=quick,
    )
    machine_section(page, outcomes)
    experiment.write(outcomes, page)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        page.section(
            "Runs that did not finish",
            *[f"- {o.configuration.label}: {o.error}" for o in failed],
        )
    written = page.write()
    save_beside_page(
        page_record_path(output, experiment.name), experiment.name, quick, record, outcomes
    )
    write_index(page.directory)
    return written


def prepare(
    configuration: Configuration, repo_root: Path
) -> tuple[Configuration, list[BenchParameters], FaultSchedule]:
    """The points and fault schedule of a configuration, checked now (a bad flag is one error
    before anything runs). A file a flag names by a relative path (an experiment's
    `--delay-matrix`) is the repository's, wherever `fab` was started. A bench has neither."""
    if configuration.bench is not None:
        return configuration, [], schedule_from_flags([], None, [])
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
        *[f"  - at `{commit}`: {', '.join(labels)}." for commit, labels in earlier.items()],
    ]


def _header(
    page: Page,
    experiment: Experiment,
    configurations: Sequence[Configuration],
    record: Record,
    *,
    commits: Mapping[str, str | None],
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
