"""What an experiment is: configurations of `fab local`, and what to make of their runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..analysis.run_summary import Summary
from .page import Page
from .probe import Probe
from .search import Search, Settled


@dataclass(frozen=True)
class CriterionBench:
    """A criterion bench of a crate, run on this machine: a component measured alone (the
    parallel executor on pre-generated blocks). The bench writes its table as JSON to the file
    `HOTMOVE_BENCH_TABLE` names; `quick` sets `HOTMOVE_BENCH_QUICK=1` (short measurements)."""

    package: str
    bench: str
    # Criterion's filter: only the benchmarks whose names contain it.
    filter: str | None = None
    quick: bool = False

    def argv(self) -> list[str]:
        filtered = ["--", self.filter] if self.filter else []
        return ["cargo", "bench", "-p", self.package, "--bench", self.bench, *filtered]

    def env(self) -> dict[str, str]:
        """What the bench reads from its environment, besides the table's file."""
        return {"HOTMOVE_BENCH_QUICK": "1"} if self.quick else {}

    def command(self) -> str:
        """The command as a user types it."""
        return " ".join([*(f"{k}={v}" for k, v in self.env().items()), *self.argv()])


@dataclass(frozen=True)
class Configuration:
    """One `fab local` command of an experiment: its flags as a user types them (a flag without
    a value is a switch, `--store`), repeatable fault flags apart; or, with `bench`, a
    criterion bench instead (no flags)."""

    label: str
    flags: Mapping[str, str | bool]
    crash: tuple[str, ...] = ()
    partition: tuple[str, ...] = ()
    kill_leader_every: str | None = None
    bench: CriterionBench | None = None
    # After the sweep of rates, narrow the step at the capacity's edge (`search.py`).
    search: Search | None = None
    # Every run profiled (`fab local --profile`: flame graphs and folded stacks in its logs).
    profile: bool = False
    # After the sweep (and its search), one more run at the capacity found, profiled: the
    # sweep's own runs stay unprofiled, so the profiler's cost is in none of its figures
    # (`profiled.py`).
    profile_at_capacity: bool = False

    def command(self, task: str = "local") -> str:
        """The command as a user types it, of `fab local` (or `task`: `fab remote`)."""
        if self.bench is not None:
            return self.bench.command()
        parts = ["fab", task]
        for name, value in self.flags.items():
            flag = "--" + name.replace("_", "-")
            if value is True:
                parts.append(flag)
            elif value is not False:
                parts.append(f"{flag}={value}")
        parts += [f"--crash={spec}" for spec in self.crash]
        parts += [f"--partition={spec}" for spec in self.partition]
        if self.kill_leader_every is not None:
            parts.append(f"--kill-leader-every={self.kill_leader_every}")
        if self.profile:
            parts.append("--profile")
        return " ".join(parts)

    def flag_values(self) -> dict[str, object | None]:
        """The flags as `fab local` hands them to `flags.sweep_from_flags`: text, or True for a
        switch."""
        return {
            name: (value if value is True else str(value)) for name, value in self.flags.items()
        }


@dataclass
class Outcome:
    """A configuration's runs: their summaries (one per run, every rate of a sweep), and why it
    stopped early if it did (a process failed, an audit failed)."""

    configuration: Configuration
    summaries: list[Summary] = field(default_factory=list)
    error: str | None = None
    # A bench's table (`CriterionBench`): one row per benchmark, as the bench wrote it.
    table: list[dict[str, object]] = field(default_factory=list)
    # The machine's speed probe (`probe.py`) before the configuration ran and after; None on a
    # testbed of other hosts.
    probe_before: Probe | None = None
    probe_after: Probe | None = None
    # What the capacity search found, for a configuration with one.
    settled: Settled | None = None
    # The commit its binaries were built from: configurations of one page can differ
    # (`--only` runs some again on a later checkout).
    commit: str | None = None
    # The profiled run at the capacity (`Configuration.profile_at_capacity`), apart from
    # `summaries`: it counts towards no capacity.
    profiled: list[Summary] = field(default_factory=list)
    # The real seconds it took on the machine that ran it, its probe before included (None in a
    # record kept before they were): what a page's time goal is held to.
    seconds: float | None = None


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    # What the experiment asks, in a paragraph of the page.
    question: str
    # The configurations of a full run, and of a `--quick` one (CI-sized).
    configurations: Callable[[bool], Sequence[Configuration]]
    # Fills the page from the outcomes, in the order of `configurations`.
    write: Callable[[Sequence[Outcome], Page], None]
    # The other pages whose figures this page sets beside its own: the page says whether each
    # ran on the same processor.
    compared_with: tuple[str, ...] = ()
    # What the page reads from a run's logs beyond its summary (JSON-ready, by name): read once,
    # when the run's summary is made, and kept with it (`Summary.readings`), so that the page
    # can be written again from its committed record where the logs are not.
    read_logs: Callable[[Summary], dict[str, Any]] | None = None
