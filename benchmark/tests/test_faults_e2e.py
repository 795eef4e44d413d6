"""Fault schedules on the real binaries (marked `e2e`): each test runs `fab local` with faults and
asserts on what the nodes committed and executed (the saved timeline and audit), never on timing.

The binaries come from the `built_binaries` fixture (conftest.py).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_fab_local
from .test_parameters import rust_defaults

pytestmark = pytest.mark.e2e


def fab_local(binaries: Path, tmp_path: Path, *flags: str) -> tuple[dict[str, Any], str]:
    """Run `fab local` with `flags`; the saved result and the printed output."""
    result, output = run_fab_local(tmp_path, *flags, f"--binaries={binaries}", timeout=300)
    assert "AUDIT: ok" in output
    return result, output


def points(result: dict[str, Any], node: int) -> list[dict[str, Any]]:
    return result["commits_timeline"]["nodes"][str(node)]


def blocks_at(result: dict[str, Any], node: int, t: float) -> float:
    """Node's committed blocks in its latest line at or before t (0 before any)."""
    value = 0.0
    for point in points(result, node):
        if point["t"] <= t:
            value = point["committed_blocks"] or value
    return value


def commit_steps(result: dict[str, Any], node: int) -> int:
    """How many of the node's METRICS lines show more committed blocks than the one before."""
    blocks = [p["committed_blocks"] or 0.0 for p in points(result, node)]
    return sum(1 for before, after in itertools.pairwise(blocks) if after > before)


def final(result: dict[str, Any], node: int, key: str) -> float:
    return points(result, node)[-1][key] or 0.0


def check_agreement(result: dict[str, Any]) -> None:
    audit = result["audit"]
    assert audit["ok"], audit["failures"]
    names = {check["name"] for check in audit["passed"]}
    assert {"state digests agree", "total supply conserved"} <= names


def test_one_of_four_down_from_the_start(built_binaries: Path, tmp_path: Path) -> None:
    result, _ = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--faults=1", "--rate=3000", "--duration=6"
    )
    assert sorted(result["commits_timeline"]["nodes"]) == ["0", "1", "2"]
    for node in range(3):
        # Every fourth round's leader is down (a timeout each time), yet commits go on.
        assert commit_steps(result, node) >= 2
        assert final(result, node, "executed") > 0
    check_agreement(result)


def test_two_of_seven_down_from_the_start(built_binaries: Path, tmp_path: Path) -> None:
    result, _ = fab_local(
        built_binaries,
        tmp_path,
        "--mode=hotcrypto",
        "--nodes=7",
        "--faults=2",
        "--rate=1500",
        # Round-robin: each turn of seven rounds ends in two timeouts of a second, so commits
        # come in bursts about 2 s apart; 6 s of run held two of them only some of the time.
        "--duration=10",
    )
    assert len(result["commits_timeline"]["nodes"]) == 5
    for node in range(5):
        assert commit_steps(result, node) >= 2
        assert final(result, node, "executed") > 0
    check_agreement(result)


def check_caught_up(result: dict[str, Any], node: int) -> None:
    """`node` caught up after its restart and stayed with the others to the end: the audit,
    which checked the digests, finds it missed nothing while down beyond what it still queued
    at the stop like any node (its METRICS line is not one atomic snapshot: 1 % of slack)."""
    [catch_up] = result["commits_timeline"]["catch_ups"]
    assert catch_up["node"] == node
    assert catch_up["caught_up_after"] is not None, catch_up
    sent, _ = accounting(result, node)
    detail = accounting_detail(result, node)
    missed = re.search(r"([\d,]+) missed while down", detail)
    assert missed is None or int(missed.group(1).replace(",", "")) <= 0.01 * sent, detail


def test_crash_and_restart_in_hotcrypto(built_binaries: Path, tmp_path: Path) -> None:
    result, output = fab_local(
        built_binaries,
        tmp_path,
        "--mode=hotcrypto",
        "--rate=3000",
        "--duration=16",
        "--crash=1@4:10",
    )
    print(output[output.find(" + FAULTS") :])
    kinds = [(e["kind"], e["node"]) for e in result["faults"]["events"]]
    assert kinds == [("crash", 1), ("restart", 1)]
    check_agreement(result)
    check_caught_up(result, 1)
    # Node 1's client moved to another node and kept sending: had it died with its connection,
    # a quarter of the load would have stopped at 4 s of 16 (81 % of 3,000 x 16 sent).
    sent, executed = accounting(result, 0)
    assert sent >= 0.9 * 3_000 * 16, sent
    # And it resent what node 1 took down with it: a lost nonce would have held every later
    # transaction of its sender in the backlog, a quarter of the load from 4 s on.
    assert executed >= 0.9 * sent, (sent, executed)


def accounting_detail(result: dict[str, Any], node: int) -> str:
    [detail] = [
        check["detail"]
        for check in result["audit"]["passed"]
        if check["name"] == f"node-{node} accounting"
    ]
    return str(detail)


def accounting(result: dict[str, Any], node: int) -> tuple[int, int]:
    """(valid sent, executed) of `node`, from its accounting line in the audit."""
    detail = accounting_detail(result, node)
    found = re.search(r"sent ([\d,]+) valid, (?:executed|committed) ([\d,]+)", detail)
    assert found, detail
    sent, executed = (int(found.group(i).replace(",", "")) for i in (1, 2))
    return sent, executed


def test_restart_after_the_gc_window_rejoins_from_a_checkpoint(
    built_binaries: Path, tmp_path: Path
) -> None:
    """Down from 3 s to 13 s: more than `--gc-retention-ms` (5 s here) and, under reputation
    (which stops electing the crashed node, so the three others run rounds at full speed), far
    more than `gc_depth` (50) rounds. The others have deleted what the node would need to replay
    the chain; it adopts a checkpoint f+1 of them report and ends with their executed count and
    digests."""
    result, output = fab_local(
        built_binaries,
        tmp_path,
        "--mode=hotcrypto",
        "--rate=2000",
        "--duration=20",
        "--leader=reputation",
        "--gc-retention-ms=5000",
        "--crash=1@3:13",
    )
    print(output[output.find(" + FAULTS") :])
    check_agreement(result)
    check_caught_up(result, 1)
    assert any("node-1 (life 2) restored from a checkpoint" in n for n in result["audit"]["notes"])
    [log] = (tmp_path / "logs").glob("*/node-1.log")
    text = log.read_text()
    assert "adopting the checkpoint" in text
    assert "restored the state after round" in text


def test_crash_and_restart_on_a_durable_store(built_binaries: Path, tmp_path: Path) -> None:
    result, output = fab_local(
        built_binaries,
        tmp_path,
        "--mode=hotcrypto",
        "--rate=3000",
        "--duration=14",
        "--store",
        "--crash=1@4:8",
    )
    print(output[output.find(" + FAULTS") :])
    assert result["config"]["store"] is True
    check_agreement(result)
    # The restarted node read back its safety state (so it cannot vote twice in the round it
    # crashed in), and caught up.
    [log] = (tmp_path / "logs").glob("*/node-1.log")
    assert "resuming from the stored safety state" in log.read_text()
    check_caught_up(result, 1)
    # The stores served the run; they do not outlive it (the logs do).
    assert "Deleted the nodes' stores" in output
    assert not list(log.parent.glob("store-node-*"))


def first_line_after(result: dict[str, Any], node: int, t: float) -> dict[str, Any] | None:
    return next((p for p in points(result, node) if p["t"] >= t), None)


def up_at(events: list[dict[str, Any]], t: float, nodes: int) -> set[int]:
    """The nodes up just after time t (events at t included)."""
    up = set(range(nodes))
    for event in sorted(events, key=lambda e: e["t"]):
        if event["t"] > t:
            break
        (up.discard if event["kind"] == "crash" else up.add)(event["node"])
    return up


def test_leader_killed_every_five_seconds(built_binaries: Path, tmp_path: Path) -> None:
    # Past `--gc-retention-ms` (10 s here, 30 s by default) a restarted node can no longer
    # replay the chain from genesis and must rejoin from a checkpoint, or the next kill leaves
    # no quorum (one node killed, one stranded): most of the kills come after it.
    result, output = fab_local(
        built_binaries,
        tmp_path,
        "--mode=hotcrypto",
        "--rate=3000",
        "--duration=30",
        "--gc-retention-ms=10000",
        "--kill-leader-every=5",
    )
    print(output[output.find(" + FAULTS") :])
    events = result["faults"]["events"]
    crashes = [e for e in events if e["kind"] == "crash"]
    # Due every 5 s from 5 to 25 s; none at the end of the run (no time left to see commits
    # resume).
    assert len(crashes) == 5
    assert all(e["cause"] == "leader" and e["round"] is not None for e in crashes)
    timeout = rust_defaults()["timeout_delay"] / 1000.0
    for crash in crashes:
        # Commits resume within two timeouts: a node up at the kill writes a line at most two
        # timeouts and one line interval (lines come each second) after the kill, and it counts
        # more blocks than the node's last line before the kill.
        deadline = crash["t"] + 2 * timeout + 1.0
        resumed = []
        for node in up_at(events, crash["t"], 4):
            line = first_line_after(result, node, deadline - 1.0)
            if line is not None and line["t"] <= deadline + 0.1:
                resumed.append(line["committed_blocks"] > blocks_at(result, node, crash["t"]))
        assert any(resumed), (crash, deadline)
    check_agreement(result)


def test_more_than_f_down_then_back(built_binaries: Path, tmp_path: Path) -> None:
    result, output = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--rate=2000", "--duration=15",
        "--crash=2@4:9", "--crash=3@4:9",
    )  # fmt: skip
    print(output[output.find(" + FAULTS") :])
    events = {(e["kind"], e["node"]): e["t"] for e in result["faults"]["events"]}
    down, back = max(events[("crash", 2)], events[("crash", 3)]), events[("restart", 2)]
    for node in (0, 1):
        # No quorum: a line written a second after the crash may still count blocks certified
        # before it, none after that.
        assert blocks_at(result, node, back) == blocks_at(result, node, down + 1.5)
    check_agreement(result)
    # Nodes 2 and 3 come back on their stores (a schedule that restarts nodes runs them all with
    # `--store`) and time out of the round they resume in as they start; the survivors, whose
    # round timer has backed off meanwhile, answer that stale timeout with theirs
    # (docs/faults.md). Commits resume within two timeouts of the restart (lines come each
    # second), not after the survivors' backed-off timer.
    timeout = rust_defaults()["timeout_delay"] / 1000.0
    deadline = back + 2 * timeout + 1.0
    for node in (0, 1):
        resumed = blocks_at(result, node, deadline) > blocks_at(result, node, back)
        assert resumed, f"node {node}: no commit within {deadline - back:.1f} s of the restart"


def test_a_partitioned_node_catches_up_after_the_heal(built_binaries: Path, tmp_path: Path) -> None:
    result, output = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--rate=3000", "--duration=24",
        "--partition=3@5-13",
    )  # fmt: skip
    print(output[output.find(" + FAULTS") :])
    events = [(e["kind"], e["node"], e["t"]) for e in result["faults"]["events"]]
    assert events == [("partition", 3, 5.0), ("heal", 3, 13.0)]
    # Cut off, node 3 commits nothing (a line a second after the cut may still count blocks
    # certified before it) while the others go on.
    assert blocks_at(result, 3, 12.5) == blocks_at(result, 3, 6.5)
    for node in (0, 1, 2):
        assert blocks_at(result, node, 12.5) > blocks_at(result, node, 6.5)
    # After the heal it reaches what the others had executed at the heal, and keeps up.
    [catch_up] = result["commits_timeline"]["catch_ups"]
    assert (catch_up["node"], catch_up["after"]) == (3, "heal")
    assert catch_up["caught_up_after"] is not None, catch_up
    end = max(p["t"] for p in points(result, 0))
    assert blocks_at(result, 3, end) > blocks_at(result, 3, 13.0)
    check_agreement(result)


def node_counts(
    tmp_path: Path, node: int, start_ms: float, path: tuple[str, ...]
) -> list[tuple[float, float]]:
    """(seconds from the clients' start, counter at `path`) of every METRICS line of `node`."""
    [log] = (tmp_path / "logs").glob(f"*/node-{node}.log")
    counts = []
    for line in log.read_text().splitlines():
        if not line.startswith("METRICS "):
            continue
        record = json.loads(line[len("METRICS ") :])
        value: Any = record
        for key in path:
            value = value.get(key, {}) if isinstance(value, dict) else {}
        if isinstance(value, int | float):
            counts.append(((record["time_ms"] - start_ms) / 1000.0, float(value)))
    return counts


def test_a_node_that_adopts_a_checkpoint_after_a_partition_serves_its_clients_again(
    built_binaries: Path, tmp_path: Path
) -> None:
    """Under load, node 3 is cut off for far longer than `gc_depth` rounds (under reputation,
    the three others go on at full speed) and the time its peers keep what it misses
    (`--gc-retention-ms`), so once healed it adopts a checkpoint: its own blocks of the stretch
    it skipped are forgotten, whether they committed or not. Their batches must leave its
    mempool's backlog (the bound on a node's own sealed, uncommitted bytes; one batch here), or
    its batch maker stays paused and its clients are never served again. Before, nothing took
    them out (whether a batch of node 3 was in flight at the cut depends on the timing: the
    core's `recovery_a_checkpoint_above_our_own_block_does_not_make_us_propose_it_again` makes
    it so every time)."""
    result, output = fab_local(
        built_binaries, tmp_path, "--mode=hotstuff", "--tx-size=197", "--rate=40000",
        "--duration=26", "--leader=reputation", "--partition=3@4-12", "--gc-retention-ms=1000",
        "--batch-size=20000", "--max-uncommitted-bytes=20000",
    )  # fmt: skip
    print(output[output.find(" + FAULTS") :])
    assert "node-3 (life 1) restored from a checkpoint" in output
    start_ms = result["commits_timeline"]["start_ms"]
    received = node_counts(tmp_path, 3, start_ms, ("consensus", "received_txs"))
    sealed = node_counts(tmp_path, 3, start_ms, ("consensus", "sealed_txs"))

    def at(counts: list[tuple[float, float]], t: float) -> float:
        return max((v for when, v in counts if when <= t), default=0.0)

    end = max(t for t, _ in received)
    # Its clients' transactions are read and sealed again within seconds of the adoption, and
    # to the end.
    for counts in (received, sealed):
        assert at(counts, end) > at(counts, end - 5.0) > at(counts, 17.0), counts
    assert result["audit"]["ok"], result["audit"]["failures"]


def test_fifty_ms_on_every_link(built_binaries: Path, tmp_path: Path) -> None:
    result, _ = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--rate=3000", "--duration=10",
        "--delay=50",
    )  # fmt: skip
    assert result["config"]["delay_ms"] == 50
    for node in range(4):
        assert commit_steps(result, node) >= 2
        assert final(result, node, "executed") > 0
    check_agreement(result)
