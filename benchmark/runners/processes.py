"""Local child processes that never outlive the harness.

Every child starts in its own session, hence its own process group, so that stopping it also
stops anything it spawned, and so that a Ctrl-C in the terminal reaches only the harness, which
then stops the children in order: SIGTERM to the group (the binaries print a final METRICS line
and exit), a grace period, SIGKILL to whatever is left, and a wait so no zombie remains.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from .released import Released

DEFAULT_GRACE = 5.0


@dataclass
class ManagedProcess:
    name: str
    command: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process remains in the group. Zombies count as gone: orphans
    are reparented to PID 1, which in a container may never reap them."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            # Fields after the command name (which may hold spaces): state, ppid, pgrp, ...
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ProcessSet(Released):
    """Start processes with their output in log files; stop them all on exit, whatever happens."""

    def __init__(self, grace: float = DEFAULT_GRACE) -> None:
        self.grace = grace
        self.processes: list[ManagedProcess] = []

    def release(self) -> None:
        self.stop_all()

    def start(
        self,
        name: str,
        command: Sequence[str],
        log_path: Path,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        *,
        append: bool = False,
    ) -> ManagedProcess:
        """`append`: keep the log's earlier content (a node restarted by a fault schedule)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab" if append else "wb") as log:
            popen = subprocess.Popen(
                list(command),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        process = ManagedProcess(name=name, command=list(command), log_path=log_path, popen=popen)
        self.processes.append(process)
        return process

    def failed(self, processes: Sequence[ManagedProcess] | None = None) -> list[ManagedProcess]:
        """Processes that already exited with a non-zero code."""
        chosen = self.processes if processes is None else processes
        return [p for p in chosen if p.returncode not in (None, 0)]

    def stop(self, processes: Sequence[ManagedProcess], grace: float | None = None) -> None:
        """SIGTERM each group, wait up to `grace` seconds, SIGKILL the rest, reap everything."""
        grace = self.grace if grace is None else grace
        for process in processes:
            if process.running():
                _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in processes:
            remaining = max(0.0, deadline - time.monotonic())
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=remaining)
        for process in processes:
            # The leader may be gone while something it spawned still holds the group.
            if process.running() or _group_alive(process.pid):
                _signal_group(process.pid, signal.SIGKILL)
            process.popen.wait()
        deadline = time.monotonic() + grace
        while any(_group_alive(p.pid) for p in processes) and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop_all(self, grace: float | None = None) -> None:
        self.stop(self.processes, grace)


class Interrupted(Exception):
    """The harness received SIGTERM or SIGHUP; raised so cleanup code runs."""


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into an exception (Ctrl-C already is one) so `finally` blocks run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(f"received {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
