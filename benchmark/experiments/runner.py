"""Runs an experiment's configurations and writes its page (`results_page.py`).

Every configuration is checked before the first run (a mistake in the last should cost seconds,
not the hour before it), the binaries are built once, and a configuration that fails (a process
died, an audit failed) is recorded on the page with why, and the others still run.

The runs go through the runners' transport: this machine (`LocalBench`, as `fab local` runs) or
the hosts of `fab remote` (`RemoteBench`, `fab experiment NAME --remote`), each configuration's
points run by a `RunPlan` with its fault schedule and profiling, as `fab local` and `fab remote`
run theirs. What the transport refuses (on the hosts, a mode that runs in one process) is said
on the page.

Each run of an experiment is recorded under the logs (`records.py`), so `--rewrite` can write the
page again from those logs, with today's analysis, without running anything: an hour of runs is
not lost to a better explanation of them. While it runs, the record is kept up to date after
every configuration (`NAME.unfinished.json`), so a run stopped halfway (a crash, a closed
session) goes on from where it stopped with `--resume`, at the same commit, instead of from the
start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from ..analysis.run_summary import Summary
from ..config import BenchParameters
from ..errors import HarnessError
from ..faults.schedule import FaultSchedule, schedule_from_flags
from ..flags import sweep_from_flags
from ..runners.local import DEFAULT_BASE_PORT, LocalBench
from ..runners.local import build as cargo_build
from ..runners.plan import RunPlan, Transport
from .bench import run_bench
from .experiment import Configuration, Experiment, Outcome
from .page import Machine, commit_of
from .probe import QUICK_SECONDS, SECONDS, Prober
from .profiled import profile_at_capacity
from .records import (
    Record,
    last_record,
    record_path,
    recorded,
    save,
    table_path,
    unfinished_path,
    with_readings,
)
from .results_page import write_page
from .search import settle

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
    transport: Transport | None = None,
    only: str | None = None,
    resume: bool = False,
) -> Path:
    """Runs every configuration of `experiment` on `transport` (this machine unless given) and
    writes its page into `output`; returns the page's path. With `only`, runs the configurations
    whose label contains it and takes the others from the last recorded run (`--rewrite`'s).
    With `resume`, runs the configurations an unfinished run of the same commit did not get to,
    and takes the others from it."""
    where = transport or LocalBench(
        repo_root=repo_root,
        base_port=base_port,
        logs_dir=logs_dir,
        results_dir=results_dir,
        work_dir=work_dir,
        binaries=binaries,
        out=out,
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
        earlier, kept, _ = last_record(experiment, quick, logs_dir, output)
        kept_from = earlier.commit
        configurations = [c for c in configurations if only in c.label or c.label not in kept]
    prepared = [prepare(c, repo_root) for c in configurations]
    if build:
        cargo_build(repo_root, out)
    probing = where.where == "local"
    prober = Prober(QUICK_SECONDS if quick else SECONDS) if probing else None

    def record_of(ran: Sequence[Outcome]) -> tuple[Record, list[Outcome]]:
        """The record of `ran` with what was kept, in the experiment's order."""
        by_label = {o.configuration.label: o for o in ran}
        outcomes = [
            by_label.get(c.label) or kept[c.label]
            for c in experiment.configurations(quick)
            if c.label in by_label or c.label in kept
        ]
        commands = {o.configuration.label: o.configuration.command(where.where) for o in outcomes}
        record = Record(
            machine,
            commit,
            where.where,
            where.described_hosts(),
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
    return write_page(experiment, outcomes, record, quick=quick, output=output, repo_root=repo_root)


def _run_all(
    experiment: Experiment,
    prepared: Sequence[tuple[Configuration, list[BenchParameters], FaultSchedule]],
    *,
    where: Transport,
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
            f"\n== {experiment.name}: {configuration.label}: {configuration.command(where.where)}\n"
        )
        out.flush()
        outcome = Outcome(configuration, commit=commit)
        started = time.monotonic()
        if prober is not None:
            outcome.probe_before = prober.probe()
            if outcomes:
                outcomes[-1].probe_after = outcome.probe_before
                # Kept now: a run stopped during this configuration keeps the last one's probe.
                save_progress(outcomes)
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
        outcome.seconds = time.monotonic() - started
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
    where: Transport,
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
        if where.where != "local":
            outcome.error = "a criterion bench runs on this machine only (`fab experiment`)"
        else:
            table = table_path(files.logs_dir, name, quick, configuration.label)
            outcome.table = run_bench(configuration.bench, files.repo_root, table, files.out)
        return
    runner = RunPlan(where, schedule, configuration.profile)
    for point in points:
        outcome.summaries += runner.run(point)
    if configuration.search is not None and points:
        last = points[-1]

        def at(rate: int, runs: int) -> list[Summary]:
            return runner.run(replace(last, rate=rate, runs=runs))

        outcome.settled = settle(outcome.summaries, at, configuration.search)
        files.out.write(f"{configuration.label}: capacity search: {outcome.settled.why}\n")
    if configuration.profile_at_capacity and points:
        profile_at_capacity(lambda: RunPlan(where, schedule, profile=True), outcome, points[-1])


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
