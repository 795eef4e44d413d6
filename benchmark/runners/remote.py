"""Remote runs over SSH (Fabric): install, upload the configuration, start nodes and clients in
the background, wait, stop, download the logs, and summarise exactly like a local run.

Layout on every host (paths relative to the login user's home directory):
    <repo name>/                  the repository; binaries in target/release/{node,client}
    hotmove-bench/                the current run: key, committee, parameters, genesis, bench.json
    hotmove-bench/logs/           node-i.log, client-i.log (stdout and stderr of each process);
                                  with --profile, profile-node-i/ (flame graph, folded stacks)
    hotmove-bench/pids/           <process>.pid, and <process>.exit (its exit code) once it ended

Host i runs node i and client i. Processes are started with `setsid nohup ... &` so they survive
the SSH session and lead their own process group; stopping sends SIGTERM to the group, waits a
grace period, then SIGKILL, just like local runs. No tmux.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from fabric import Connection, ThreadingGroup
from fabric.exceptions import GroupException
from invoke.exceptions import UnexpectedExit

from .. import binary_flags
from ..analysis import pipeline as pipelines
from ..analysis.metrics import load_run
from ..analysis.options import AnalysisOptions
from ..analysis.resources.profiles import PROFILE_GRACE
from ..analysis.run_summary import Summary
from ..aws.settings import Settings
from ..binary_flags import ModeFlags
from ..config import BenchParameters, Ports, RunFiles, host_slots, read_json
from ..errors import HarnessError
from ..faults.injector import FaultInjector, NodeControl
from ..faults.net_emulation import (
    REMOTE_PARTITION_LEAD_S,
    check_links,
)
from ..faults.schedule import FaultSchedule
from ..run_clock import RunClock
from .commands import committee_client_command, node_command
from .finish import finish_run
from .host_scripts import (
    BENCH_DIR,
    HostStatus,
    background_script,
    bash,
    install_script,
    parse_status,
    status_script,
    stop_script,
)
from .plan import RunPlan
from .processes import DEFAULT_GRACE
from .progress import describe
from .prometheus import MetricsEndpoints, check_ports, remote_endpoints
from .remote_control import RemoteNodeControl

# Clients may run this long beyond --duration before the run is declared hung.
EXIT_MARGIN = 60.0
POLL_INTERVAL = 1.0

T = TypeVar("T")


class RemoteError(HarnessError):
    """A remote step failed; the message names the host and shows what it printed."""


@dataclass(frozen=True)
class Host:
    """A machine reachable over SSH; `address` is also the address other nodes use."""

    address: str
    user: str
    port: int = 22

    def __str__(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"


def select_hosts(per_region: dict[str, list[str]], user: str) -> list[Host]:
    """Interleave regions (first host of each region, then the second, ...) so any prefix of the
    list spreads the committee over as many regions as possible."""
    queues = [list(ips) for ips in per_region.values()]
    hosts = []
    while any(queues):
        for queue in queues:
            if queue:
                hosts.append(Host(queue.pop(0), user))
    return hosts


# ---------------------------------------------------------------------------------------------


class RemoteBench:
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
        profile: bool = False,
        analysis: AnalysisOptions | None = None,
        fault_schedule: FaultSchedule | None = None,
        enforce_audit: bool = True,
        partition_lead: float = REMOTE_PARTITION_LEAD_S,
    ) -> None:
        if not hosts:
            raise RemoteError("no hosts (are the instances running? see `fab info`)")
        self.settings = settings
        self.hosts = list(hosts)
        self.local_node_binary = local_node_binary
        self.work_dir = work_dir
        self.logs_dir = logs_dir
        self.results_dir = results_dir
        self.out = out or sys.stdout
        # A profiled node writes its flame graph after SIGTERM, before the grace runs out.
        self.grace = max(grace, PROFILE_GRACE) if profile else grace
        self.profile = profile
        self.analysis = analysis or AnalysisOptions()
        self.poll_interval = poll_interval
        # Nodes serve GET /metrics on this port, clients on the next (see prometheus.py).
        self.prometheus_port = prometheus_port
        # Crashes and leader kills during every run (faults/schedule.py); node i's start script.
        self.fault_schedule = fault_schedule or FaultSchedule()
        self.enforce_audit = enforce_audit
        # Seconds from writing the partition windows to the clients' start
        # (faults/net_emulation.py).
        self.partition_lead = partition_lead
        self.node_scripts: dict[int, str] = {}
        self.connections = [
            Connection(
                host=host.address,
                user=host.user,
                port=host.port,
                connect_timeout=connect_timeout,
                connect_kwargs={
                    "key_filename": [str(settings.key_path)],
                    "look_for_keys": False,
                    "allow_agent": False,
                },
            )
            for host in self.hosts
        ]

    def __enter__(self) -> RemoteBench:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self.connections:
            connection.close()

    # -- plumbing --------------------------------------------------------------------------------

    def _run(self, index: int, command: str) -> str:
        try:
            result = self.connections[index].run(command, hide=True, in_stream=False)
        except UnexpectedExit as error:
            raise RemoteError(
                f"{self.hosts[index]}: exit {error.result.exited}:\n"
                f"{error.result.stdout[-2000:]}{error.result.stderr[-2000:]}"
            ) from error
        except Exception as error:
            raise RemoteError(f"{self.hosts[index]}: {error}") from error
        return str(result.stdout)

    def _each(self, indices: Sequence[int], action: Callable[[int], T]) -> list[T]:
        """Run `action(i)` for every host index in parallel; raise one error naming all failures."""
        if not indices:
            return []
        with ThreadPoolExecutor(max_workers=min(32, len(indices))) as pool:
            futures = [pool.submit(action, i) for i in indices]
            results: list[T] = []
            errors: list[str] = []
            for future in futures:
                try:
                    results.append(future.result())
                except Exception as error:  # noqa: BLE001 - reported below with the others
                    errors.append(str(error))
        if errors:
            raise RemoteError("\n".join(errors))
        return results

    # -- install ---------------------------------------------------------------------------------

    def install(self, skip_toolchain: bool = False) -> None:
        """Install the toolchain and build dependencies (unless skipped), fetch the repository
        at the configured branch and build it in release mode, on every host in parallel."""
        self.out.write(f"Installing on {len(self.hosts)} host(s)...\n")
        group = ThreadingGroup.from_connections(self.connections)
        try:
            group.run(
                bash(install_script(self.settings, skip_toolchain)), hide=True, in_stream=False
            )
        except GroupException as error:
            failures = []
            for connection, result in error.result.items():
                if isinstance(result, Exception):
                    detail = getattr(getattr(result, "result", None), "stderr", "") or str(result)
                    failures.append(f"{connection.user}@{connection.host}: {detail[-2000:]}")
            raise RemoteError("install failed:\n" + "\n".join(failures)) from error
        self.out.write("Installed.\n")

    # -- one run ---------------------------------------------------------------------------------

    def upload(self, files: RunFiles, count: int) -> None:
        """Give host i < count its key and the shared files in a fresh run directory; clear the
        other hosts too, so no stale process or log of an earlier run remains anywhere."""
        shared = [files.committee_file, files.parameters_file, files.bench_file]
        if files.genesis_file is not None:
            shared.append(files.genesis_file)

        def upload_one(index: int) -> None:
            self._run(index, bash(stop_script("*", self.grace)))
            self._run(index, f"rm -rf {BENCH_DIR} && mkdir -p {BENCH_DIR}/logs {BENCH_DIR}/pids")
            if index >= count:
                return
            connection = self.connections[index]
            for path in [files.key_files[index], *shared]:
                try:
                    connection.put(str(path), f"{BENCH_DIR}/{path.name}")
                except Exception as error:
                    raise RemoteError(
                        f"{self.hosts[index]}: upload of {path} failed: {error}"
                    ) from error

        self._each(range(len(self.hosts)), upload_one)

    def _binary(self, name: str) -> str:
        return f"../{self.settings.repo_name}/target/release/{name}"

    def metrics_endpoints(self, bench: BenchParameters) -> MetricsEndpoints | None:
        if self.prometheus_port is None:
            return None
        hosts = [host.address for host in self.hosts[: bench.nodes]]
        return remote_endpoints(self.prometheus_port, bench, hosts)

    def put_everywhere(self, path: Path, count: int) -> None:
        """Copy `path` into the run directory of the first `count` hosts."""

        def put(index: int) -> None:
            try:
                self.connections[index].put(str(path), f"{BENCH_DIR}/{path.name}")
            except Exception as error:
                raise RemoteError(
                    f"{self.hosts[index]}: upload of {path} failed: {error}"
                ) from error

        self._each(range(count), put)

    def start_nodes(
        self,
        files: RunFiles,
        bench: BenchParameters,
        flags: ModeFlags,
        emulation: Path | None = None,
    ) -> RemoteNodeControl:
        """Start the live nodes (each reads `emulation`, uploaded here, if given); returns what
        the fault injector kills and restarts them with."""
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
                profile=f"logs/profile-node-{index}" if self.profile else None,
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

    def stop(self, count: int, pattern: str = "*") -> None:
        """Stop the matching processes on the first `count` hosts (SIGTERM, grace, SIGKILL)."""
        self._each(range(count), lambda i: self._run(i, bash(stop_script(pattern, self.grace))))

    def download(self, count: int, log_dir: Path) -> list[Path]:
        """Fetch every log (and profile file) of the first `count` hosts into `log_dir`."""
        log_dir.mkdir(parents=True, exist_ok=True)
        listing_command = (
            f"cd {BENCH_DIR}/logs 2>/dev/null && ls -1 -d *.log profile-*/* 2>/dev/null || true"
        )

        def fetch(index: int) -> list[Path]:
            listing = self._run(index, listing_command)
            fetched = []
            for name in listing.split():
                # `node-0.log` or `profile-node-0/flamegraph.svg`: keep one directory level.
                relative = Path(name)
                if len(relative.parts) > 2 or ".." in relative.parts:
                    continue
                target = log_dir / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    self.connections[index].get(f"{BENCH_DIR}/logs/{name}", str(target))
                except Exception as error:
                    raise RemoteError(
                        f"{self.hosts[index]}: download of {name} failed: {error}"
                    ) from error
                fetched.append(target)
            return fetched

        return [path for paths in self._each(range(count), fetch) for path in paths]

    def check(self, bench: BenchParameters) -> None:
        """Host i runs node i: a committee needs as many hosts; metrics ports are not node ports."""
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
        self.fault_schedule.check(bench)
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

    def run(self, bench: BenchParameters) -> list[Summary]:
        """Run `bench` `bench.runs` times (`plan.py`); each run prints and saves its summary."""
        return RunPlan(self).run(bench)

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

    @contextlib.contextmanager
    def session(
        self,
        bench: BenchParameters,
        run_id: str,
        log_dir: Path,
        files: RunFiles | None,
        clock: RunClock,
    ) -> Iterator[RemoteSession]:
        """`clock` is real: `check` refuses dilated runs."""
        if files is None:
            raise RemoteError(f"{bench.mode} runs no committee: run it with fab local")
        self.upload(files, bench.nodes)
        try:
            yield RemoteSession(self, bench)
        finally:
            # Whatever happened, nothing of this run keeps running on the hosts.
            self.stop(bench.nodes)

    def measures_energy(self) -> bool:
        # This machine's counters do not see the hosts: the summary's energy is a model.
        return False

    def result_fields(self, bench: BenchParameters) -> dict[str, Any]:
        return {"hosts": [str(h) for h in self.hosts[: bench.nodes]]}

    def after_run(self, log_dir: Path) -> None:
        """The hosts' run directories stay until the next run (`fab logs` reads them)."""

    # -- inspection ------------------------------------------------------------------------------

    def kill(self) -> None:
        """Stop every process a run started on every host, and delete the run directories."""
        self.stop(len(self.hosts))
        self._each(range(len(self.hosts)), lambda i: self._run(i, f"rm -rf {BENCH_DIR}"))

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

    @property
    def flags(self) -> ModeFlags:
        """What the binaries (this machine's build) say the mode takes."""
        return binary_flags.describe(self.remote.local_node_binary, self.bench.mode)

    def start_nodes(self, files: RunFiles, emulation: Path | None) -> NodeControl:
        return self.remote.start_nodes(files, self.bench, self.flags, emulation)

    def start_clients(self, files: RunFiles) -> None:
        self.remote.start_clients(files, self.bench, self.flags)

    def wait(self, faults: FaultInjector) -> None:
        self.remote.wait(self.bench, faults)

    def stop_nodes(self) -> None:
        self.remote.stop(self.bench.live_nodes)

    def collect(self, log_dir: Path) -> None:
        self.remote.download(self.bench.live_nodes, log_dir)

    def run_standalone(self) -> None:
        raise RemoteError(f"{self.bench.mode} runs no committee: run it with fab local")
