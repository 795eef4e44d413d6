"""Local process management: groups, SIGTERM then SIGKILL, nothing left behind."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmark.runners.processes import Interrupted, ManagedProcess, ProcessSet, signals_interrupt

PYTHON = sys.executable


def _wait_for_text(process: ManagedProcess, text: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in process.log_path.read_text():
        assert process.running(), process.log_tail()
        assert time.monotonic() < deadline, f"{text!r} never appeared"
        time.sleep(0.01)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_graceful_stop_keeps_the_final_line(tmp_path: Path) -> None:
    script = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('METRICS final', flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    with ProcessSet(grace=5) as processes:
        process = processes.start("graceful", [PYTHON, "-c", script], tmp_path / "g.log")
        _wait_for_text(process, "ready")
        processes.stop([process])
    assert process.returncode == 0
    assert "METRICS final" in process.log_path.read_text()


def test_stubborn_process_and_its_children_are_killed(tmp_path: Path) -> None:
    script = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('ready', child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    with ProcessSet(grace=0.3) as processes:
        process = processes.start("stubborn", [PYTHON, "-c", script], tmp_path / "s.log")
        _wait_for_text(process, "ready")
        child = int(process.log_path.read_text().split()[1])
        started = time.monotonic()
        processes.stop_all()
        assert time.monotonic() - started < 5
    assert process.returncode == -signal.SIGKILL
    assert _gone(child)


def test_an_error_inside_the_block_still_stops_everything(tmp_path: Path) -> None:
    started: list[ManagedProcess] = []

    def run() -> None:
        with ProcessSet(grace=1) as processes:
            started.append(
                processes.start(
                    "sleeper", [PYTHON, "-c", "import time; time.sleep(60)"], tmp_path / "x.log"
                )
            )
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run()
    assert not started[0].running()
    assert _gone(started[0].pid)


def test_failed_lists_processes_that_exited_with_an_error(tmp_path: Path) -> None:
    with ProcessSet() as processes:
        bad = processes.start(
            "bad", [PYTHON, "-c", "import sys; print('oops'); sys.exit(3)"], tmp_path / "b.log"
        )
        bad.popen.wait(timeout=10)
        assert processes.failed() == [bad]
        assert "oops" in bad.log_tail()


def test_sigterm_to_the_harness_becomes_an_exception() -> None:
    previous = signal.getsignal(signal.SIGTERM)

    def run() -> None:
        with signals_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)

    with pytest.raises(Interrupted, match="SIGTERM"):
        run()
    assert signal.getsignal(signal.SIGTERM) is previous
