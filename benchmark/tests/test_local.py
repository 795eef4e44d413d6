"""The local runner with stand-in binaries (the real ones are exercised by test_e2e.py).

The stand-ins in `standins/` have the real CLI and print valid METRICS lines, so these tests
cover everything `fab local` does except building and running the Rust code: config files,
process start and stop, port checks, progress, parsing, the summary and the saved result.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import psutil
import pytest

from benchmark.config import BenchParameters
from benchmark.flags import sweep_from_flags
from benchmark.runners.local import BenchError, remove_stores
from benchmark.runners.plan import RunPlan

from .conftest import REPO_ROOT, standin_bench, standins_with
from .sshhosts import COMMITTEE_PORTS, free_port


def _bench(**kwargs: object) -> BenchParameters:
    return BenchParameters(**kwargs)  # type: ignore[arg-type]


def _no_stand_in_left(root: Path) -> bool:
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(str(root) in part for part in process.info["cmdline"] or []):
                return False
        except psutil.Error:
            continue
    return True


def test_hotcrypto_with_a_fault(tmp_path: Path, standins: Path) -> None:
    local = standin_bench(tmp_path)
    [summary] = RunPlan(local).run(
        _bench(mode="hotcrypto", nodes=4, faults=1, rate=3_000, duration=2, accounts=40)
    )

    logs = Path(summary.config["logs"])
    assert sorted(p.name for p in logs.glob("*.log")) == [
        "client-0.log", "client-1.log", "client-2.log", "node-0.log", "node-1.log", "node-2.log",
    ]  # fmt: skip
    assert summary.processes["nodes"] == 3
    assert summary.end_to_end.tps > 0
    assert summary.clients is not None
    assert summary.clients.target_tps == 3_000
    assert [row.name for row in summary.stages] == ["consensus", "verifier", "executor"]
    assert summary.bottleneck.stage == "executor"

    committee = json.loads(next((tmp_path / ".bench").glob("*/committee.json")).read_text())
    assert len(committee["authorities"]) == 4

    [saved] = (tmp_path / "results").glob("*.json")
    assert json.loads(saved.read_text())["config"]["faults"] == 1
    output = local.out.getvalue()  # type: ignore[attr-defined]
    assert "committed" in output
    assert "LIMITING STAGE: executor" in output
    assert _no_stand_in_left(standins)


def test_a_runs_stores_are_deleted_and_its_logs_kept(tmp_path: Path) -> None:
    for node in range(2):
        (tmp_path / f"node-{node}.log").write_text("METRICS {}\n")
        (tmp_path / f"store-node-{node}.redb").write_bytes(b"x" * 1_000_000)
        (tmp_path / f"store-node-{node}.redb.safety").write_bytes(b"s" * 131_072)
        for log in ("batches", "blocks"):
            segments = tmp_path / f"store-node-{node}.redb.{log}"
            segments.mkdir()
            (segments / "000000000000.segment").write_bytes(b"b" * 2_000_000)
    out = StringIO()
    remove_stores(tmp_path, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node-0.log", "node-1.log"]
    assert out.getvalue() == "Deleted the nodes' stores (10 MB); --keep-stores keeps them\n"
    # Nothing to delete: nothing said.
    out = StringIO()
    remove_stores(tmp_path, out)
    assert out.getvalue() == ""


def test_hotstuff_runs_repeat(tmp_path: Path) -> None:
    local = standin_bench(tmp_path)
    summaries = RunPlan(local).run(_bench(mode="hotstuff", nodes=1, rate=1_000, duration=1, runs=2))
    assert [s.config["run"] for s in summaries] == [0, 1]
    assert all(s.end_to_end.tps > 0 for s in summaries)
    assert all([row.name for row in s.stages] == ["consensus"] for s in summaries)
    assert len(list((tmp_path / "results").glob("*.json"))) == 2


def test_movevm_runs_one_process(tmp_path: Path) -> None:
    [summary] = RunPlan(standin_bench(tmp_path)).run(_bench(mode="movevm", duration=1))
    assert summary.end_to_end.tps > 0
    assert [row.name for row in summary.stages] == ["generator", "executor"]
    assert (Path(summary.config["logs"]) / "movevm.log").exists()


def test_a_crashing_node_fails_the_run_and_stops_the_rest(tmp_path: Path, standins: Path) -> None:
    # The first node crashes while booting; `keys` and `genesis` still work.
    crashing = 'case "$*" in run*node-0.json*) echo "panic: cannot bind" >&2; exit 101;; esac\n'
    local = standin_bench(tmp_path, standins_with(tmp_path, "node", crashing))
    bench = _bench(mode="hotcrypto", nodes=4, rate=1_000, duration=5, accounts=40)
    with pytest.raises(BenchError, match=r"node-0 exited with code 101[\s\S]*cannot bind"):
        RunPlan(local).run(bench)
    assert _no_stand_in_left(standins)


def test_ctrl_c_leaves_no_process(tmp_path: Path, standins: Path) -> None:
    base_port = free_port(COMMITTEE_PORTS)
    # Ctrl-C as a terminal delivers it: whatever the disposition pytest inherited (a job started
    # in the background by a non-interactive shell ignores SIGINT, and so would the harness), the
    # harness turns SIGINT into KeyboardInterrupt. On SIGUSR1 it prints its threads' stacks, so
    # a harness that does not stop says where it is.
    script = (
        "import faulthandler, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        "from pathlib import Path\n"
        "from benchmark.config import BenchParameters\n"
        "from benchmark.runners.local import LocalBench\n"
        "from benchmark.runners.plan import RunPlan\n"
        f"bench = BenchParameters(mode='hotstuff', nodes=4, rate=1000, duration=60)\n"
        f"RunPlan(LocalBench(repo_root=Path({str(tmp_path)!r}), base_port={base_port},\n"
        f"           binaries=Path({str(standins)!r}), grace=2.0)).run(bench)\n"
    )
    harness = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        deadline = time.monotonic() + 20
        children: list[psutil.Process] = []
        while len(children) < 8:  # four nodes and four clients
            assert harness.poll() is None, harness.stdout.read() if harness.stdout else ""
            assert time.monotonic() < deadline, "the harness never started its processes"
            children = psutil.Process(harness.pid).children()
            time.sleep(0.05)
        harness.send_signal(signal.SIGINT)
        try:
            harness.wait(timeout=20)
        except subprocess.TimeoutExpired:
            harness.send_signal(signal.SIGUSR1)
            time.sleep(1)
            harness.kill()
            output = harness.communicate()[0].decode(errors="replace")
            pytest.fail(f"the harness did not stop 20 s after SIGINT:\n{output[-6000:]}")
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert _no_stand_in_left(standins)


@pytest.mark.parametrize(
    ("flags", "written"),
    [({}, {}), ({"batch_delay": "50"}, {"max_batch_delay": 50})],
)
def test_the_parameters_file_of_a_run_holds_only_the_flags_given(
    tmp_path: Path, flags: dict[str, str], written: dict[str, int]
) -> None:
    local = standin_bench(tmp_path)
    local.work_dir = tmp_path / "work"
    [point] = sweep_from_flags({"mode": "hotstuff", "nodes": "1", "duration": "1", **flags})
    RunPlan(local).run(point)
    [parameters] = (tmp_path / "work").glob("*/parameters.json")
    assert json.loads(parameters.read_text()) == written


def _slow_starting_client(tmp_path: Path, delay: str) -> Path:
    """Binaries whose client waits `delay` (a `sleep` argument) before it starts, as a crypto
    client signing its load on a busy machine does."""
    return standins_with(tmp_path, "client", f"sleep {delay}\n")


def test_the_exit_margin_counts_from_the_first_metrics_line(
    tmp_path: Path, standins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Duration and margin (1 + 3 s) end long before the client starts sending (after 8 s): a
    # deadline counted from the start would fail the run.
    monkeypatch.setattr("benchmark.runners.local_session.EXIT_MARGIN", 3.0)
    local = standin_bench(tmp_path, _slow_starting_client(tmp_path, "8"))
    [summary] = RunPlan(local).run(
        _bench(mode="hotcrypto", nodes=4, rate=1_000, duration=1, accounts=40)
    )
    assert summary.processes["clients"] == 4
    assert _no_stand_in_left(standins)


def test_a_client_that_never_sends_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("benchmark.runners.local_session.LOAD_START_TIMEOUT", 1.0)
    local = standin_bench(tmp_path, _slow_starting_client(tmp_path, "600"))
    bench = _bench(mode="hotcrypto", nodes=4, rate=1_000, duration=1, accounts=40)
    with pytest.raises(BenchError, match=r"client-\d sent nothing within 1 s"):
        RunPlan(local).run(bench)
    assert _no_stand_in_left(tmp_path / "bin")
