"""Remote runs: node i and client i on host i (`remote_hosts.py`), started in the background,
watched until the clients are done, stopped, their logs downloaded and summarised exactly like a
local run.

Processes are started with `setsid nohup ... &` so they survive the SSH session and lead their
own process group. No tmux. A remote run is real: no CPU budget, no dilation, no standalone
process (`movevm` runs with `fab local`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .. import binary_flags
from ..analysis import pipeline as pipelines
from ..analysis.metrics import load_run
from ..analysis.options import AnalysisOptions
from ..analysis.resources.profiles import PROFILE_GRACE
from ..analysis.run_summary import Summary
from ..aws.settings import Settings
from ..binary_flags import ModeFlags
from ..binary_modes import runs_committee
from ..config import BenchParameters, read_json
from ..faults.injector import FaultInjector, NodeControl
from ..faults.net_emulation import REMOTE_PARTITION_LEAD_S, check_links
from ..run_files import Ports, RunFiles, host_slots
from .commands import committee_client_command, node_command
from .finish import finish_run
from .host_scripts import (
    BENCH_DIR,
    HostStatus,
    background_script,
    bash,
    parse_status,
    status_script,
)
from .plan import RunSetup
from .processes import DEFAULT_GRACE
from .progress import describe
from .prometheus import MetricsEndpoints, check_ports, remote_endpoints
from .remote_control import RemoteNodeControl
from .remote_hosts import Host, RemoteError, RemoteHosts, select_hosts

__all__ = ["BENCH_DIR", "Host", "RemoteBench", "RemoteError", "select_hosts"]

# Clients may run this long beyond --duration before the run is declared hung.
EXIT_MARGIN = 60.0
POLL_INTERVAL = 1.0


class RemoteBench(RemoteHosts):
    """Runs benchmarks on `hosts` (host i runs node i and client i)."""

    def __init__(
        self,
        settings: Settings,
        hosts: Sequence[Host],
        *,
        local_node_binary: Path,
        work_dir: Path,
        logs_dir: Path,
        results_dir: Path | None,
        out: TextIO | None = None,
        grace: float = DEFAULT_GRACE,
        connect_timeout: int = 10,
        poll_interval: float = POLL_INTERVAL,
        prometheus_port: int | None = None,
        analysis: AnalysisOptions | None = None,
        enforce_audit: bool = True,
        partition_lead: float = REMOTE_PARTITION_LEAD_S,
    ) -> None:
        super().__init__(settings, hosts, out or sys.stdout, grace, connect_timeout)
        self.local_node_binary = local_node_binary
        self.work_dir = work_dir
        self.logs_dir = logs_dir
        self.results_dir = results_dir
        self.analysis = analysis or AnalysisOptions()
        self.poll_interval = poll_interval
        # Nodes serve GET /metrics on this port, clients on the next (see prometheus.py).
        self.prometheus_port = prometheus_port
        self.enforce_audit = enforce_audit
        # Seconds from writing the partition windows to the clients' start
        # (faults/net_emulation.py).
        self.partition_lead = partition_lead
        # Node i's start command, to restart it with (the fault schedule).
        self.node_scripts: dict[int, str] = {}

    def _binary(self, name: str) -> str:
        return f"../{self.settings.repo_name}/target/release/{name}"

    def metrics_endpoints(self, bench: BenchParameters) -> MetricsEndpoints | None:
        if self.prometheus_port is None:
            return None
        hosts = [host.address for host in self.hosts[: bench.nodes]]
        return remote_endpoints(self.prometheus_port, bench, hosts)

    def start_nodes(
        self,
        files: RunFiles,
        bench: BenchParameters,
        flags: ModeFlags,
        emulation: Path | None = None,
        profile: bool = False,
    ) -> RemoteNodeControl:
        """Start the live nodes (each reads `emulation`, uploaded here, if given; with `profile`,
        each profiles itself); returns what the fault injector kills and restarts them with."""
        if emulation is not None:
            self.put_everywhere(emulation, bench.live_nodes)
        genesis = files.genesis_file.name if files.genesis_file else None
        endpoints = self.metrics_endpoints(bench)

        def start_node(index: int) -> None:
            command = node_command(
                self._binary("node"),
                keys=files.key_files[index].name,
                committee=files.committee_file.name,
                parameters=files.parameters_file.name,
                genesis=genesis,
                bench=bench,
                flags=flags,
                prometheus=endpoints.nodes[index].listen if endpoints else None,
                # Relative to the run directory, the processes' working directory.
                profile=f"logs/profile-node-{index}" if profile else None,
                store=f"store-node-{index}.redb" if bench.store else None,
                net_emulation=emulation.name if emulation is not None else None,
                index=index,
            )
            self.node_scripts[index] = bash(
                background_script(f"node-{index}", command, append=True)
            )
            self._run(index, bash(background_script(f"node-{index}", command)))

        self._each(range(bench.live_nodes), start_node)
        return RemoteNodeControl(self._run, BENCH_DIR, self.node_scripts)

    def start_clients(self, files: RunFiles, bench: BenchParameters, flags: ModeFlags) -> None:
        """Start client i on host i; the clients wait for every live node themselves."""
        genesis = files.genesis_file.name if files.genesis_file else None
        endpoints = self.metrics_endpoints(bench)
        binary = self._binary("client")

        def start_client(index: int) -> None:
            command = committee_client_command(
                binary, bench, flags, files, index, genesis=genesis, endpoints=endpoints
            )
            self._run(index, bash(background_script(f"client-{index}", command)))

        self._each(range(bench.live_nodes), start_client)

    def status(self, count: int) -> list[HostStatus]:
        return self._each(
            range(count),
            lambda i: parse_status(self._run(i, bash(status_script([f"node-{i}", f"client-{i}"])))),
        )

    def wait(self, bench: BenchParameters, faults: FaultInjector | None = None) -> None:
        """Poll until every client exited by itself; fail fast if a node dies or a client fails,
        unless `faults` killed that node (its client then loses its connection and stops)."""
        live = bench.live_nodes
        started = time.monotonic()
        deadline = started + bench.duration + EXIT_MARGIN
        while True:
            if faults is not None:
                faults.tick()
            statuses = self.status(live)
            done = 0
            for index, status in enumerate(statuses):
                crashed = faults is not None and faults.ever_crashed(index)
                node_state, node_code = status.states.get(f"node-{index}", ("gone", None))
                down = faults is not None and faults.is_expected_down(index)
                if node_state != "running" and not down:
                    raise self._failure(index, f"node-{index}", f"{node_state} ({node_code})")
                state, code = status.states.get(f"client-{index}", ("gone", None))
                if (state == "exited" and code == 0) or (crashed and state != "running"):
                    done += 1
                elif state != "running":
                    raise self._failure(index, f"client-{index}", f"{state} ({code})")
            elapsed = time.monotonic() - started
            records = [r for s in statuses for r in s.records]
            self.out.write(f"[{elapsed:5.1f}s / {bench.duration}s] {describe(records)}\n")
            self.out.flush()
            if done == live and not (faults is not None and faults.holds_run(bench.duration)):
                return
            if time.monotonic() > deadline:
                raise RemoteError(f"clients still running {EXIT_MARGIN:.0f} s after their duration")
            time.sleep(self.poll_interval)

    def _failure(self, index: int, name: str, state: str) -> RemoteError:
        try:
            tail = self._run(index, f"tail -n 20 {BENCH_DIR}/logs/{name}.log")
        except RemoteError as error:
            tail = str(error)
        return RemoteError(f"{self.hosts[index]}: {name} {state}; last log lines:\n{tail}")

    def check(self, bench: BenchParameters) -> None:
        """Host i runs node i: a committee needs as many hosts; metrics ports are not node ports."""
        if not runs_committee(bench.mode):
            raise RemoteError(f"{bench.mode} runs in one process: not on the hosts (`fab local`)")
        if bench.node_cpus is not None:
            # A remote node has its host's cores: the instance type is its budget.
            raise RemoteError(
                "--node-cpus caps nodes that share this machine (fab local); a remote node has its"
                " host's cores (choose the instance type)"
            )
        if bench.vcpus is not None:
            # Dilation makes one machine hold a cluster; hosts are the cluster itself.
            raise RemoteError(
                "--dilation and --vcpus emulate a cluster on this machine (fab local); remote"
                " nodes run on real hosts in real time"
            )
        if bench.nodes > len(self.hosts):
            raise RemoteError(
                f"{bench.nodes} nodes need {bench.nodes} hosts, have {len(self.hosts)}"
            )
        check_links(bench)
        endpoints = self.metrics_endpoints(bench)
        if endpoints is not None and self.prometheus_port is not None:
            hosts = [host.address for host in self.hosts[: bench.nodes]]
            node_ports = [
                port
                for slot in set(host_slots(hosts))
                for port in self.settings.ports.shifted(slot).all()
            ]
            check_ports(endpoints, node_ports, self.prometheus_port)

    def ready(self) -> None:
        """The binaries are the hosts' (`fab install`); a missing one fails the run's start."""

    # -- the transport of `plan.py` ----------------------------------------------------------

    @property
    def where(self) -> str:
        return "remote"

    @property
    def results_directory(self) -> Path | None:
        return self.results_dir

    @property
    def ports(self) -> Ports:
        return self.settings.ports

    def run_id(self, bench: BenchParameters, index: int) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"{bench.mode}-n{bench.nodes}-r{bench.rate}-{stamp}-run{index}"

    def log_directory(self, run_id: str) -> Path:
        return self.logs_dir / run_id

    def config_directory(self, run_id: str) -> Path:
        return self.work_dir / run_id

    def addresses(self, bench: BenchParameters) -> list[str]:
        return [host.address for host in self.hosts[: bench.nodes]]

    def announce(self, bench: BenchParameters, run_id: str, index: int, log_dir: Path) -> None:
        self.out.write(
            f"Remote run {run_id}: {bench.live_nodes} live node(s) of {bench.nodes}, "
            f"{bench.rate:,} tx/s for {bench.duration} s\n"
        )

    def described_hosts(self) -> str | None:
        return (
            f"{len(self.hosts)} hosts, {self.settings.instance_type} in"
            f" {', '.join(self.settings.regions)} (`fab remote`)"
        )

    @contextlib.contextmanager
    def session(self, run: RunSetup) -> Iterator[RemoteSession]:
        """`run.clock` is real: `check` refuses dilated runs."""
        bench = run.bench
        if run.files is None:
            raise RemoteError(f"{bench.mode} runs no committee: run it with fab local")
        # A profiled node writes its flame graph after SIGTERM, before the grace runs out.
        grace = max(self.grace, PROFILE_GRACE) if run.profile else self.grace
        self.upload(run.files, bench.nodes)
        try:
            yield RemoteSession(self, bench, run.profile, grace)
        finally:
            # Whatever happened, nothing of this run keeps running on the hosts.
            self.stop(bench.nodes, grace=grace)

    def measures_energy(self) -> bool:
        # This machine's counters do not see the hosts: the summary's energy is a model.
        return False

    def result_fields(self, bench: BenchParameters) -> dict[str, Any]:
        return {"hosts": [str(h) for h in self.hosts[: bench.nodes]]}

    def after_run(self, log_dir: Path) -> None:
        """The hosts' run directories stay until the next run (`fab logs` reads them)."""

    def logs(self, log_dir: Path) -> Summary | None:
        """Download the logs of the last run from every host and summarise them (not saved)."""
        paths = self.download(len(self.hosts), log_dir)
        if not paths:
            self.out.write("No logs on the hosts.\n")
            return None
        bench_file = log_dir / "bench.json.remote"
        bench: BenchParameters | None = None
        try:
            self.connections[0].get(f"{BENCH_DIR}/bench.json", str(bench_file))
            data: Any = read_json(bench_file)
            bench = BenchParameters.from_dict(data if isinstance(data, dict) else {})
        except Exception:  # noqa: BLE001 - without it the summary still has the mode
            bench = None
        mode = bench.mode if bench is not None else load_run(log_dir).reported_mode()
        if mode is None:
            raise RemoteError(
                f"the logs in {log_dir} name no mode and the hosts hold no bench.json"
            )
        pipelines.save(pipelines.describe(self.local_node_binary, mode), log_dir)
        summary, _ = finish_run(
            log_dir,
            bench,
            None,
            self.out,
            extra={"where": "remote"},
            enforce_audit=self.enforce_audit,
        )
        return summary


@dataclass
class RemoteSession:
    """A run's processes on the hosts: node i and client i on host i."""

    remote: RemoteBench
    bench: BenchParameters
    profile: bool
    grace: float

    @property
    def flags(self) -> ModeFlags:
        """What the binaries (this machine's build) say the mode takes."""
        return binary_flags.describe(self.remote.local_node_binary, self.bench.mode)

    def start_nodes(self, files: RunFiles, emulation: Path | None) -> NodeControl:
        return self.remote.start_nodes(files, self.bench, self.flags, emulation, self.profile)

    def start_clients(self, files: RunFiles) -> None:
        self.remote.start_clients(files, self.bench, self.flags)

    def wait(self, faults: FaultInjector) -> None:
        self.remote.wait(self.bench, faults)

    def stop_nodes(self) -> None:
        self.remote.stop(self.bench.live_nodes, grace=self.grace)

    def collect(self, log_dir: Path) -> None:
        self.remote.download(self.bench.live_nodes, log_dir)

    def run_standalone(self) -> None:
        raise RemoteError(f"{self.bench.mode} runs no committee: run it with fab local")
