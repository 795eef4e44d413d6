"""A fault schedule in the local runner, with the stand-in binaries: scheduled deaths do not abort
the run and a restart appends to the node's log; an unscheduled death still aborts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.config import BenchParameters
from benchmark.faults.events import FaultLog
from benchmark.faults.schedule import schedule_from_flags
from benchmark.runners.local import BenchError
from benchmark.runners.local_session import killed_by
from benchmark.runners.plan import RunPlan

from .conftest import standin_bench, standins_with


def _local(tmp_path: Path, binaries: Path, crashes: list[str]) -> RunPlan:
    return RunPlan(standin_bench(tmp_path, binaries), schedule_from_flags(crashes, None))


def test_a_scheduled_crash_and_restart(tmp_path: Path, standins: Path) -> None:
    local = _local(tmp_path, standins, ["1@1:2", "2@1.5"])
    bench = BenchParameters(mode="hotcrypto", nodes=4, rate=1_000, duration=3, accounts=40)
    [summary] = local.run(bench)
    log_dir = Path(summary.config["logs"])
    faults = FaultLog.load(log_dir)
    assert [(e.kind, e.node) for e in faults.events] == [
        ("crash", 1),
        ("crash", 2),
        ("restart", 1),
    ]
    assert faults.down_at_end() == {2}
    [node] = [p for p in load_run(log_dir).nodes if p.source == "node-1.log"]
    assert any(r["time_ms"] < faults.events[0].time_ms for r in node.records)
    assert any(r["time_ms"] > faults.events[2].time_ms for r in node.records)
    assert "AUDIT:" in local.transport.out.getvalue()  # type: ignore[attr-defined]


def test_an_unscheduled_death_still_aborts(tmp_path: Path, standins: Path) -> None:
    # Node 2 dies by itself a second into the run; node 1's crash is scheduled.
    dying = (
        'case "$*" in run*node-2.json*) '
        f'{standins / "node"} "$@" & sleep 1.5; echo "panic: gone" >&2; exit 7;; esac\n'
    )
    local = _local(tmp_path, standins_with(tmp_path, "node", dying), ["1@0.5"])
    bench = BenchParameters(mode="hotcrypto", nodes=4, rate=1_000, duration=4, accounts=40)
    with pytest.raises(BenchError, match=r"node-2 exited early with code 7[\s\S]*gone"):
        local.run(bench)


def test_a_node_killed_by_no_one_here_is_named_out_of_memory() -> None:
    assert "out-of-memory killer" in killed_by(-9)
    assert killed_by(7) == ""
    assert killed_by(-15) == ""
    assert killed_by(None) == ""
