"""One run, wherever its processes live: the steps every run takes, once, in order.

    describe the pipeline -> write the committee's files -> start the nodes -> start the clients
    (at a fixed time when partitions count from it) -> inject the fault schedule -> wait -> stop
    the nodes -> collect the logs -> finish (summary, audit, printed and saved)

A `Transport` says how each step is carried out: `LocalBench` with processes of this machine on
loopback ports, `RemoteBench` with processes on SSH hosts. Faults, Prometheus endpoints, the
energy meter and the finish are the plan's, so they behave the same on both. A plan is what a
sweep runs its points with (`sweep.PointRunner`): `fab local`, `fab remote` and every
configuration of an experiment each make one over the transport they run on, with the fault
schedule and profiling of their runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from .. import binary_flags
from ..analysis import pipeline as pipelines
from ..analysis.options import AnalysisOptions
from ..analysis.resources.energy import EnergyMeter
from ..analysis.run_summary import Summary
from ..config import BenchParameters
from ..faults.injector import FaultInjector, NodeControl
from ..faults.members import committee_names
from ..faults.net_emulation import wait_for_clients_start, write_node_file_if_emulating
from ..faults.schedule import FaultSchedule
from ..run_clock import RunClock
from ..run_files import Ports, RunFiles, write_run_files
from .finish import finish_run
from .processes import signals_interrupt
from .prometheus import MetricsEndpoints


@dataclass(frozen=True)
class RunSetup:
    """One run, as a transport's session starts its processes."""

    bench: BenchParameters
    run_id: str
    log_dir: Path
    # The committee's files; None for a run without a committee.
    files: RunFiles | None
    # The processes' clock: dilated or real.
    clock: RunClock
    # Whether each node (or the standalone process) profiles itself.
    profile: bool


class Session(Protocol):
    """One run's processes on a transport: started, waited for and stopped by the plan. Leaving
    the session (however the run ends) stops whatever still runs."""

    def start_nodes(self, files: RunFiles, emulation: Path | None) -> NodeControl:
        """Start the live nodes (each reads `emulation` if given) and return what the fault
        injector kills and restarts them with; returns once clients may connect."""

    def start_clients(self, files: RunFiles) -> None:
        """Start one client per live node."""

    def wait(self, faults: FaultInjector) -> None:
        """Until every client is done and the schedule holds the run no longer; fails the run
        when a process dies that the schedule did not kill."""

    def stop_nodes(self) -> None:
        """Stop the live nodes (SIGTERM, grace, SIGKILL) so each prints its final METRICS."""

    def collect(self, log_dir: Path) -> None:
        """Bring every log (and profile) of the run into `log_dir`, after the processes stopped."""

    def run_standalone(self) -> None:
        """A mode without a committee (`movevm`): its one process, to the end."""


class Transport(Protocol):
    """Where a run's processes live: the settings every run reads, and its sessions."""

    out: TextIO
    analysis: AnalysisOptions
    enforce_audit: bool
    partition_lead: float

    @property
    def where(self) -> str:
        """`local` or `remote`, as saved with the result."""

    @property
    def local_node_binary(self) -> Path:
        """The node binary of this machine: keys, genesis and `node describe`."""

    @property
    def results_directory(self) -> Path | None:
        """Where results are saved; None: not saved."""

    def described_hosts(self) -> str | None:
        """The hosts the runs use, as a results page names them; None for this machine."""

    def check(self, bench: BenchParameters) -> None:
        """Refuse `bench` before anything starts if this transport cannot run it."""

    def ready(self) -> None:
        """Refuse to start runs that cannot (binaries that are not built)."""

    def run_id(self, bench: BenchParameters, index: int) -> str: ...

    def log_directory(self, run_id: str) -> Path: ...

    def config_directory(self, run_id: str) -> Path: ...

    def addresses(self, bench: BenchParameters) -> list[str]:
        """The address of each member of the committee."""

    @property
    def ports(self) -> Ports: ...

    def metrics_endpoints(self, bench: BenchParameters) -> MetricsEndpoints | None: ...

    def announce(self, bench: BenchParameters, run_id: str, index: int, log_dir: Path) -> None:
        """Say which run starts (`index` of `bench.runs`), and where."""

    def session(self, run: RunSetup) -> AbstractContextManager[Session]:
        """The run's processes, their command lines passing what the binaries say the mode
        takes (`binary_flags.describe`)."""

    def measures_energy(self) -> bool:
        """Whether this machine's energy counters see the run's processes."""

    def result_fields(self, bench: BenchParameters) -> dict[str, Any]:
        """What the saved result says of where the run happened (the plan adds the run's index,
        `where` and `profile`)."""

    def after_run(self, log_dir: Path) -> None:
        """Clean up what the summary will not read (the processes have stopped)."""


@dataclass
class RunPlan:
    """The runs of a point on `transport`, every one with the fault schedule `faults` (crashes,
    restarts, leader kills and partitions) and, with `profile`, nodes that profile themselves."""

    transport: Transport
    faults: FaultSchedule = field(default_factory=FaultSchedule)
    profile: bool = False

    def check(self, bench: BenchParameters) -> None:
        """Refuse `bench` if its schedule does not fit it or the transport cannot run it."""
        self.faults.check(bench)
        self.transport.check(bench)

    def run(self, bench: BenchParameters) -> list[Summary]:
        """Run `bench` `bench.runs` times; each run prints and saves its summary."""
        self.transport.ready()
        bench = self.faults.bench_for(bench)
        self.check(bench)
        # The binaries are built by now: they say which of the settings the mode takes.
        binary_flags.describe(self.transport.local_node_binary, bench.mode).check(bench)
        # SIGTERM and SIGHUP become an exception, so every session stops what it started.
        with signals_interrupt():
            return [self.run_once(bench, index) for index in range(bench.runs)]

    def run_once(self, bench: BenchParameters, index: int = 0) -> Summary:
        transport = self.transport
        run_id = transport.run_id(bench, index)
        log_dir = transport.log_directory(run_id)
        log_dir.mkdir(parents=True, exist_ok=True)
        transport.announce(bench, run_id, index, log_dir)
        endpoints = transport.metrics_endpoints(bench)
        if endpoints is not None:
            transport.out.write(endpoints.describe())
        # What the mode runs, asked of the node and kept beside the logs for their analysis.
        pipeline = pipelines.describe(transport.local_node_binary, bench.mode)
        pipelines.save(pipeline, log_dir)
        # The processes' clock: dilated runs slow it, and the harness times them on it.
        clock = RunClock.starting_now(bench.dilation)
        if pipeline.consensus:
            self._run_committee(bench, pipeline.genesis, run_id, log_dir, clock)
        else:
            setup = RunSetup(bench, run_id, log_dir, None, clock, self.profile)
            with (
                transport.session(setup) as session,
                self._meter(log_dir, clock),
            ):
                session.run_standalone()
        transport.after_run(log_dir)
        summary, _ = finish_run(
            log_dir,
            bench,
            transport.results_directory,
            transport.out,
            extra={
                "run": index,
                "where": transport.where,
                **transport.result_fields(bench),
                "profile": self.profile,
            },
            options=transport.analysis,
            enforce_audit=transport.enforce_audit,
        )
        return summary

    def _run_committee(
        self, bench: BenchParameters, genesis: bool, run_id: str, log_dir: Path, clock: RunClock
    ) -> None:
        transport = self.transport
        files = write_run_files(
            bench,
            transport.local_node_binary,
            transport.config_directory(run_id),
            transport.addresses(bench),
            transport.ports,
            genesis=genesis,
        )
        names = committee_names(files.committee_file)
        schedule = self.faults
        # With partitions the clients' start is fixed now: the nodes' windows count from it (on
        # hosts, their clocks are assumed synchronised, as for the latency hops). Times on the
        # processes' clock, as the nodes read the windows.
        lead = transport.partition_lead
        clients_at = clock.now() + lead if schedule.partitions else None
        emulation = write_node_file_if_emulating(
            files.directory, names, bench, schedule.partitions, clients_at
        )
        faults = None
        try:
            setup = RunSetup(bench, run_id, log_dir, files, clock, self.profile)
            with transport.session(setup) as session:
                control = session.start_nodes(files, emulation)
                wait_for_clients_start(clients_at, lead, transport.out, clock)
                session.start_clients(files)
                faults = FaultInjector(
                    schedule,
                    control,
                    names,
                    bench.live_nodes,
                    transport.out,
                    clock=clock.now,
                    duration=bench.duration,
                )
                faults.start(at=clients_at)
                with self._meter(log_dir, clock):
                    session.wait(faults)
                session.stop_nodes()
            session.collect(log_dir)
        finally:
            if faults is not None:
                faults.log.save(log_dir)

    def _meter(self, log_dir: Path, clock: RunClock) -> AbstractContextManager[None]:
        """The energy meter over the run's steady part, where this machine sees the processes
        (not in a dilated run: the machine's energy over K times the time is not the emulated
        cluster's, whose energy is then modelled from its CPU)."""
        if not self.transport.measures_energy() or clock.dilated:
            return nullcontext()
        return _metered(log_dir)


@contextmanager
def _metered(log_dir: Path) -> Iterator[None]:
    meter = EnergyMeter()
    meter.start()
    try:
        yield
    finally:
        meter.stop(log_dir)
