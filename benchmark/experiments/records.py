"""The records of an experiment's runs: what a page says of where and from what its runs came, and
where that is kept.

Two records, of two uses:

* On the machine that ran them, under the logs (`logs/experiments/NAME.json`): the machine, the
  commit, and every run's configuration and log directory. `--rewrite` reads the runs' logs again
  with the analysis of today, and `--resume` and `--only` go on from it.
* Beside the page (`docs/results/NAME/record.json`), committed with it: the same facts, and every
  run's summary as the page was written from it (what the page read from the run's logs beyond
  the summary included, `Experiment.read_logs`), compact (no per-second series) and without the
  logs. A reader rewrites, re-plots and re-analyses the page from a clone with it: where the logs
  are not on the machine, `--rewrite` writes the page again from this record, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..analysis.codec import DecodeError, decode, encode
from ..analysis.run_summary import Summary
from ..errors import HarnessError
from ..runners.finish import summary_from_logs
from .bench import read_table
from .experiment import Configuration, Experiment, Outcome
from .page import Machine
from .probe import Probe
from .search import Settled

PAGE_RECORD = "record.json"
PAGE_RECORD_VERSION = 1
# Stands for a run while the record around it is laid out.
RUN_MARK = "\u0000run "


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
    # The commit whose analysis last wrote the page again from the runs' logs (`--rewrite`).
    rewritten: str | None = None


def record_path(logs_dir: Path, name: str, quick: bool) -> Path:
    """Where the last run of experiment `name` on this machine is recorded."""
    return logs_dir / "experiments" / f"{name}{'-quick' if quick else ''}.json"


def unfinished_path(logs_dir: Path, name: str, quick: bool) -> Path:
    """Where a run of experiment `name` that is going on (or stopped halfway) is recorded."""
    path = record_path(logs_dir, name, quick)
    return path.with_name(f"{path.stem}.unfinished.json")


def page_record_path(output: Path, name: str) -> Path:
    """The record committed beside page `name` of the pages in `output`."""
    return output / name / PAGE_RECORD


def table_path(logs_dir: Path, name: str, quick: bool, label: str) -> Path:
    """Where the bench of configuration `label` of experiment `name` writes its table (beside
    the record, for `--rewrite`)."""
    return _beside(record_path(logs_dir, name, quick), label)


def _beside(record: Path, label: str) -> Path:
    """The file beside `record` that holds what configuration `label` wrote."""
    slug = "".join(c if c.isalnum() else "-" for c in label)
    return record.with_name(f"{record.stem}-{slug}.json")


def with_readings(experiment: Experiment, summary: Summary) -> Summary:
    """`summary` with what the experiment's page reads from the run's logs beside it."""
    if experiment.read_logs is None:
        return summary
    return replace(summary, readings=experiment.read_logs(summary))


# -- On this machine, under the logs -------------------------------------------------------------


def save(path: Path, record: Record, outcomes: Sequence[Outcome]) -> None:
    saved = {
        **_facts(record),
        "configurations": [
            {
                **_outcome_facts(o, record),
                "runs": [s.config for s in o.summaries],
                "profiled": [s.config for s in o.profiled],
                "table": (
                    str(_beside(path, o.configuration.label))
                    if o.configuration.bench is not None
                    else None
                ),
            }
            for o in outcomes
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1, default=str))


def recorded(
    experiment: Experiment, quick: bool, logs_dir: Path, path: Path | None = None
) -> tuple[Record, dict[str, Outcome]]:
    """The last run of `experiment` recorded on this machine (or the record at `path`): where it
    ran, and each configuration's outcome read again from its logs with this checkout's
    analysis."""
    path = path or record_path(logs_dir, experiment.name, quick)
    try:
        saved = json.loads(path.read_text())
        record = _record_of(saved)
        entries = {c["label"]: c for c in saved["configurations"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HarnessError(
            f"no usable record of a run of {experiment.name} at {path} ({error}); run"
            f" `fab experiment --name={experiment.name}{' --quick' if quick else ''}` first"
        ) from error
    outcomes = {}
    for configuration in experiment.configurations(quick):
        entry = entries.get(configuration.label)
        if entry is not None:
            outcomes[configuration.label] = _from_logs(experiment, configuration, entry, record)
    return record, outcomes


def _from_logs(
    experiment: Experiment, configuration: Configuration, entry: Mapping[str, Any], record: Record
) -> Outcome:
    outcome = _outcome(configuration, entry, record)
    try:
        outcome.summaries = [
            with_readings(experiment, summary_from_logs(Path(run["logs"]), run))
            for run in entry["runs"]
        ]
        outcome.profiled = [
            with_readings(experiment, summary_from_logs(Path(run["logs"]), run))
            for run in entry.get("profiled", [])
        ]
        if entry.get("table") and outcome.error is None:
            outcome.table = read_table(Path(entry["table"]))
    except (OSError, ValueError, KeyError) as error:
        raise HarnessError(
            f"{configuration.label}: a run's logs cannot be read again ({error})"
        ) from error
    return outcome


# -- Beside the page, committed ------------------------------------------------------------------


def relative(text: str, root: Path | None) -> str:
    """`text` with every path under `root` written relative to it."""
    if root is None:
        return text
    for prefix in {str(root), str(root.resolve())}:
        text = text.replace(f"{prefix}/", "")
    return text


def save_beside_page(
    path: Path,
    experiment: str,
    quick: bool,
    record: Record,
    outcomes: Sequence[Outcome],
    *,
    root: Path | None = None,
) -> None:
    """The page's record: the facts, and every run's summary without its per-second series;
    paths under `root` (the checkout's) relative to it, so the record names no machine."""
    runs: list[str] = []

    def placed(summary: Summary) -> str:
        # A run is one line of its own: a rerun's diff is a line per run that changed. Keys keep
        # their order: a summary's dicts are ordered by meaning (timeouts by leader, most first).
        runs.append(json.dumps(encode(_compact(summary)), separators=(",", ":")))
        return f"{RUN_MARK}{len(runs) - 1}"

    saved = {
        "version": PAGE_RECORD_VERSION,
        "experiment": experiment,
        "quick": quick,
        **_facts(record),
        "configurations": [
            {
                **_outcome_facts(o, record),
                "runs": [placed(s) for s in o.summaries],
                "profiled": [placed(s) for s in o.profiled],
                "table": o.table,
            }
            for o in outcomes
        ],
    }
    text = json.dumps(saved, indent=1)
    for index, run in reversed(list(enumerate(runs))):
        text = text.replace(json.dumps(f"{RUN_MARK}{index}"), run, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(relative(text, root) + "\n")


def read_beside_page(
    path: Path, experiment: Experiment, quick: bool
) -> tuple[Record, dict[str, Outcome]]:
    """The page's committed record, every configuration's outcome as the page was written from
    it."""
    try:
        saved = json.loads(path.read_text())
        if saved.get("version") != PAGE_RECORD_VERSION:
            raise ValueError(f"version {saved.get('version')}, not {PAGE_RECORD_VERSION}")
        if saved.get("quick") != quick:
            raise ValueError(f"it records a {'--quick' if saved.get('quick') else 'full'} run")
        record = _record_of(saved)
        entries = {c["label"]: c for c in saved["configurations"]}
        outcomes = {}
        for configuration in experiment.configurations(quick):
            entry = entries.get(configuration.label)
            if entry is None:
                continue
            outcome = _outcome(configuration, entry, record)
            outcome.summaries = [decode(Summary, run) for run in entry["runs"]]
            outcome.profiled = [decode(Summary, run) for run in entry.get("profiled", [])]
            outcome.table = list(entry.get("table") or [])
            outcomes[configuration.label] = outcome
    except (OSError, ValueError, KeyError, TypeError, DecodeError) as error:
        raise HarnessError(
            f"no usable record of {experiment.name}'s page at {path} ({error})"
        ) from error
    return record, outcomes


def _compact(summary: Summary) -> Summary:
    """What a page is written from: the summary without its per-second series."""
    resources = summary.resources
    if resources is not None:
        resources = replace(resources, series={})
    return replace(summary, timeline={}, batch_sizes={}, resources=resources)


# -- Shared by both ------------------------------------------------------------------------------


def _facts(record: Record) -> dict[str, Any]:
    return {
        "machine": asdict(record.machine),
        "commit": record.commit,
        "task": record.task,
        "hosts": record.hosts,
        "only": record.only,
        "kept_from": record.kept_from,
        "resumed": record.resumed,
        "rewritten": record.rewritten,
    }


def _outcome_facts(outcome: Outcome, record: Record) -> dict[str, Any]:
    return {
        "label": outcome.configuration.label,
        "commit": outcome.commit,
        "command": record.commands.get(outcome.configuration.label),
        "error": outcome.error,
        "settled": asdict(outcome.settled) if outcome.settled else None,
        "probe_before": asdict(outcome.probe_before) if outcome.probe_before else None,
        "probe_after": asdict(outcome.probe_after) if outcome.probe_after else None,
        # Only where known: a record kept before is written again as it was.
        **({"seconds": outcome.seconds} if outcome.seconds is not None else {}),
    }


def _record_of(saved: Mapping[str, Any]) -> Record:
    machine = Machine(**{**saved["machine"], "load": tuple(saved["machine"]["load"])})
    commands = {
        c["label"]: c["command"] for c in saved["configurations"] if c.get("command") is not None
    }
    return Record(
        machine,
        saved["commit"],
        saved.get("task", "local"),
        saved.get("hosts"),
        commands,
        only=saved.get("only"),
        kept_from=saved.get("kept_from"),
        resumed=saved.get("resumed", 0),
        rewritten=saved.get("rewritten"),
    )


def _outcome(configuration: Configuration, entry: Mapping[str, Any], record: Record) -> Outcome:
    outcome = Outcome(configuration, commit=entry.get("commit") or _commit_before(record, entry))
    outcome.error = entry["error"]
    settled = entry.get("settled")
    outcome.settled = Settled(**settled) if isinstance(settled, dict) else None
    outcome.probe_before = _probe(entry.get("probe_before"))
    outcome.probe_after = _probe(entry.get("probe_after"))
    seconds = entry.get("seconds")
    outcome.seconds = float(seconds) if isinstance(seconds, int | float) else None
    return outcome


def _commit_before(record: Record, entry: Mapping[str, Any]) -> str:
    """The commit a configuration ran at, for a record written before each configuration kept
    its own: an `--only` run's commit for what it matched, the run before's for the others."""
    if record.only and record.kept_from and record.only not in entry["label"]:
        return record.kept_from
    return record.commit


def _probe(saved: object) -> Probe | None:
    if not isinstance(saved, dict):
        return None
    try:
        return Probe(**saved)
    except TypeError:
        return None


def last_record(
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
