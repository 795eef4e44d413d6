"""The hosts of remote runs, over SSH (Fabric): commands on one host or on each in parallel, files
up and down, the install, and stopping whatever a run started.

Layout on every host (paths relative to the login user's home directory):
    <repo name>/                  the repository; binaries in target/release/{node,client}
    hotmove-bench/                the current run: key, committee, parameters, genesis, bench.json
    hotmove-bench/logs/           node-i.log, client-i.log (stdout and stderr of each process);
                                  with --profile, profile-node-i/ (flame graph, folded stacks)
    hotmove-bench/pids/           <process>.pid, and <process>.exit (its exit code) once it ended

Stopping sends SIGTERM to a process group, waits a grace period, then SIGKILL, just like local
runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TextIO, TypeVar

from fabric import Connection, ThreadingGroup
from fabric.exceptions import GroupException
from invoke.exceptions import UnexpectedExit

from ..aws.settings import Settings
from ..errors import HarnessError
from ..run_files import RunFiles
from .host_scripts import BENCH_DIR, bash, install_script, stop_script

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


class RemoteHosts:
    """SSH to `hosts` (host i runs node i and client i), with `grace` for a process to stop."""

    def __init__(
        self,
        settings: Settings,
        hosts: Sequence[Host],
        out: TextIO,
        grace: float,
        connect_timeout: int,
    ) -> None:
        if not hosts:
            raise RemoteError("no hosts (are the instances running? see `fab info`)")
        self.settings = settings
        self.hosts = list(hosts)
        self.out = out
        self.grace = grace
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

    def __enter__(self) -> Self:
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

    def stop(self, count: int, pattern: str = "*", grace: float | None = None) -> None:
        """Stop the matching processes on the first `count` hosts (SIGTERM, `grace` or the
        hosts', SIGKILL)."""
        wait = self.grace if grace is None else grace
        self._each(range(count), lambda i: self._run(i, bash(stop_script(pattern, wait))))

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

    def kill(self) -> None:
        """Stop every process a run started on every host, and delete the run directories."""
        self.stop(len(self.hosts))
        self._each(range(len(self.hosts)), lambda i: self._run(i, f"rm -rf {BENCH_DIR}"))
