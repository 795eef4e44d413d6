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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TextIO

from ..analysis.run_summary import Summary
from ..config import NODE_MODES, BenchParameters
from ..errors import HarnessError
from ..faults.schedule import FaultSchedule, schedule_from_flags
from ..flags import sweep_from_flags
from ..runners.finish import summary_from_logs
from ..runners.local import DEFAULT_BASE_PORT, LocalBench
from ..runners.local import build as cargo_build
from ..runners.remote import RemoteBench
from ..runners.sweep import PointRunner
from .bench import read_table, run_bench
from .experiment import Configuration, Experiment, Outcome
from .page import Machine, Page, commit_of
from .page_index import comparison_lines, write_index
from .probe import QUICK_SECONDS, SECONDS, Probe, Prober, drift
from .search import Settled, settle

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
        earlier, kept = _recorded(experiment, quick, logs_dir, path=unfinished)
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
        earlier, kept = _recorded(experiment, quick, logs_dir)
        kept_from = earlier.commit
        configurations = [c for c in configurations if only in c.label or c.label not in kept]
    prepared = [prepare(c, repo_root) for c in configurations]
    if build:
        cargo_build(repo_root, out)
    probing = where.task == "local"
    prober = Prober(QUICK_SECONDS if quick else SECONDS) if probing else None

    def recorded(ran: Sequence[Outcome]) -> tuple[Record, list[Outcome]]:
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
            _record(unfinished, *recorded(ran))

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
    record, outcomes = recorded(ran)
    _record(record_path(logs_dir, experiment.name, quick), record, outcomes)
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


@dataclass(frozen=True)
class Record:
    """What a page says of where and from what its runs came."""

    machine: Machine
    commit: str
    task: str = "local"
    hosts: str | None = None
    # The command each configuration ran, by label: a page written again quotes what ran, even
    # where the experiment's flags changed since.
    commands: Mapping[str, str] = field(default_factory=dict)
    # With `--only`: what it matched, and the commit of the earlier run the other
    # configurations were taken from.
    only: str | None = None
    kept_from: str | None = None
    # With `--resume`: how many configurations came from the run that stopped halfway.
    resumed: int = 0


def rewrite_experiment(
    experiment: Experiment, *, quick: bool, repo_root: Path, output: Path, logs_dir: Path
) -> Path:
    """Writes `experiment`'s page again from the logs of its last run on this machine, with the
    analysis of this checkout; returns the page's path."""
    record, recorded = _recorded(experiment, quick, logs_dir)
    outcomes = [
        recorded.get(c.label) or Outcome(c, error="not in the recorded run")
        for c in experiment.configurations(quick)
    ]
    return _write_page(
        experiment, outcomes, record, quick=quick, output=output, rewritten=commit_of(repo_root)
    )


def _recorded(
    experiment: Experiment, quick: bool, logs_dir: Path, path: Path | None = None
) -> tuple[Record, dict[str, Outcome]]:
    """The last run of `experiment` recorded on this machine (or the record at `path`): where it
    ran, and each configuration's outcome read again from its logs with this checkout's
    analysis."""
    path = path or record_path(logs_dir, experiment.name, quick)
    try:
        saved = json.loads(path.read_text())
        machine = Machine(**{**saved["machine"], "load": tuple(saved["machine"]["load"])})
        entries = {c["label"]: c for c in saved["configurations"]}
        commands = {label: c["command"] for label, c in entries.items() if "command" in c}
        task = saved.get("task", "local")
        record = Record(
            machine,
            saved["commit"],
            task,
            saved.get("hosts"),
            commands,
            only=saved.get("only"),
            kept_from=saved.get("kept_from"),
            resumed=saved.get("resumed", 0),
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HarnessError(
            f"no usable record of a run of {experiment.name} at {path} ({error}); run"
            f" `fab experiment --name={experiment.name}{' --quick' if quick else ''}` first"
        ) from error
    outcomes = {}
    for configuration in experiment.configurations(quick):
        entry = entries.get(configuration.label)
        if entry is not None:
            outcomes[configuration.label] = _outcome_of(configuration, entry, record)
    return record, outcomes


def _outcome_of(configuration: Configuration, entry: Mapping[str, Any], record: Record) -> Outcome:
    outcome = Outcome(configuration, commit=entry.get("commit") or _commit_before(record, entry))
    outcome.error = entry["error"]
    try:
        outcome.summaries = [summary_from_logs(Path(run["logs"]), run) for run in entry["runs"]]
        if entry.get("table") and outcome.error is None:
            outcome.table = read_table(Path(entry["table"]))
        settled = entry.get("settled")
        outcome.settled = Settled(**settled) if isinstance(settled, dict) else None
        outcome.probe_before = _probe(entry.get("probe_before"))
        outcome.probe_after = _probe(entry.get("probe_after"))
    except (OSError, ValueError, KeyError) as error:
        raise HarnessError(
            f"{configuration.label}: a run's logs cannot be read again ({error})"
        ) from error
    return outcome


def _commit_before(record: Record, entry: Mapping[str, Any]) -> str:
    """The commit a configuration ran at, for a record written before each configuration kept
    its own: an `--only` run's commit for what it matched, the run before's for the others."""
    if record.only and record.kept_from and record.only not in entry["label"]:
        return record.kept_from
    return record.commit


def record_path(logs_dir: Path, name: str, quick: bool) -> Path:
    """Where the last run of experiment `name` on this machine is recorded."""
    return logs_dir / "experiments" / f"{name}{'-quick' if quick else ''}.json"


def unfinished_path(logs_dir: Path, name: str, quick: bool) -> Path:
    """Where a run of experiment `name` that is going on (or stopped halfway) is recorded."""
    path = record_path(logs_dir, name, quick)
    return path.with_name(f"{path.stem}.unfinished.json")


def table_path(logs_dir: Path, name: str, quick: bool, label: str) -> Path:
    """Where the bench of configuration `label` of experiment `name` writes its table (beside
    the record, for `--rewrite`)."""
    return _beside(record_path(logs_dir, name, quick), label)


def _beside(record: Path, label: str) -> Path:
    """The file beside `record` that holds what configuration `label` wrote."""
    slug = "".join(c if c.isalnum() else "-" for c in label)
    return record.with_name(f"{record.stem}-{slug}.json")


def _record(path: Path, record: Record, outcomes: Sequence[Outcome]) -> None:
    saved = {
        "machine": asdict(record.machine),
        "commit": record.commit,
        "task": record.task,
        "hosts": record.hosts,
        "only": record.only,
        "kept_from": record.kept_from,
        "resumed": record.resumed,
        "configurations": [
            {
                "label": o.configuration.label,
                "commit": o.commit,
                "command": record.commands.get(o.configuration.label),
                "error": o.error,
                "runs": [s.config for s in o.summaries],
                "table": (
                    str(_beside(path, o.configuration.label))
                    if o.configuration.bench is not None
                    else None
                ),
                "settled": asdict(o.settled) if o.settled else None,
                "probe_before": asdict(o.probe_before) if o.probe_before else None,
                "probe_after": asdict(o.probe_after) if o.probe_after else None,
            }
            for o in outcomes
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1, default=str))


def _write_page(
    experiment: Experiment,
    outcomes: Sequence[Outcome],
    record: Record,
    *,
    quick: bool,
    output: Path,
    rewritten: str | None = None,
) -> Path:
    page = Page(name=experiment.name, title=experiment.title, directory=output)
    _header(
        page,
        experiment,
        [o.configuration for o in outcomes],
        record,
        commits={o.configuration.label: o.commit for o in outcomes},
        quick=quick,
        rewritten=rewritten,
    )
    _machine_section(page, outcomes)
    experiment.write(outcomes, page)
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        page.section(
            "Runs that did not finish",
            *[f"- {o.configuration.label}: {o.error}" for o in failed],
        )
    written = page.write()
    write_index(page.directory)
    return written


def _probe(saved: object) -> Probe | None:
    if not isinstance(saved, dict):
        return None
    try:
        return Probe(**saved)
    except TypeError:
        return None


def _machine_section(page: Page, outcomes: Sequence[Outcome]) -> None:
    """The speed probe before and after each configuration, and how far it drifted."""
    probed = [o for o in outcomes if o.probe_before is not None]
    if not probed:
        return

    def pair(before: float, after: float | None) -> str:
        return f"{before:,.0f} / {'-' if after is None else f'{after:,.0f}'}"

    # A configuration without its `after` probe (its run was stopped before the next began, in
    # a record older than saving it at once) keeps its row, with `-` for what is missing.
    rows = [
        [
            o.configuration.label,
            pair(o.probe_before.sha256_mb_per_s, o.probe_after and o.probe_after.sha256_mb_per_s),
            pair(o.probe_before.signatures_per_s, o.probe_after and o.probe_after.signatures_per_s),
            "-" if o.probe_after is None else f"{o.probe_after.load:.2f}",
        ]
        for o in probed
        if o.probe_before is not None
    ]
    # Every probe once: a configuration's `before` is the one before it's `after` when they ran
    # in one go, and a probe of its own when only it ran again (`--only`).
    probes: list[Probe] = []
    for outcome in probed:
        for found in (outcome.probe_before, outcome.probe_after):
            if found is not None and (not probes or probes[-1] != found):
                probes.append(found)
    page.section(
        "The machine during the runs",
        "A fixed-work probe on every core before each configuration and after it"
        " (`benchmark/experiments/probe.py`: SHA-256 of 1 MiB buffers and ed25519 signing, summed"
        " over the cores), and the 1-minute load average after it: figures of configurations"
        " between which the machine drifted are not comparable to better than the drift.",
        "",
        *drift(probes),
    )
    page.table(
        [
            "configuration",
            "SHA-256 MB/s, before / after",
            "signatures/s, before / after",
            "load average after",
        ],
        rows,
    )


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
    rewritten: str | None,
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
            f" `{rewritten}`."
        ]
        if rewritten
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
