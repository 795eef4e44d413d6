"""Rounds, timeouts and back-pressure in the summary, and what they do to the verdict: a run that
kept up at the cost of timed-out rounds says latency is the symptom and whose rounds they were;
clients the nodes held back are not a load generator's shortfall; a run whose batches queued
for seconds says it collapsed. The run is `synthetic.py`'s (two nodes, two clients, 1,000 tx/s
per node and second, steady window 8.1 s)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.report.text import render_summary

from .synthetic import write_run

Edit = Callable[[int, int, dict[str, Any]], None]


def _edit(directory: Path, prefix: str, edit: Edit) -> None:
    """Applies `edit(index, second, record)` to every record of the `prefix-i.log` files."""
    for path in sorted(directory.glob(f"{prefix}-*.log")):
        index = int(path.stem.rsplit("-", 1)[1])
        records = [json.loads(line[len("METRICS ") :]) for line in path.read_text().splitlines()]
        for second, record in enumerate(records, start=1):
            edit(index, second, record)
        path.write_text("".join(f"METRICS {json.dumps(r)}\n" for r in records))


def _summary(directory: Path) -> Summary:
    return summarize(load_run(directory), {"mode": "hotcrypto", "nodes": 2})


def _rounds(*, timeouts_every: int | None = None, paused_ms: float = 0.0) -> Edit:
    """Nodes that make 10 rounds a second; with `timeouts_every`, node 1's round times out once
    every that many seconds (blamed by both nodes); each mempool holds its clients back
    `paused_ms` a second."""

    def edit(_index: int, second: int, record: dict[str, Any]) -> None:
        consensus = record["consensus"]
        consensus["round"] = 10 * second
        timeouts = second // timeouts_every if timeouts_every else 0
        consensus["timeouts"] = timeouts
        consensus["timed_out_leaders"] = {f"{1:064x}": timeouts} if timeouts else {}
        consensus["backpressure_ms"] = paused_ms * second
        consensus["withheld_proposals"] = 0
        # Every node takes all that both clients send (2,000 tx/s), and no stage holds the run
        # back: the rounds decide.
        consensus["committed_txs"] = 2000 * second
        for stage in record["stages"].values():
            stage["items"] = 2000 * second
            stage["busy_ms"] = 500.0 * second
        record["stages"]["executor"]["executed"] = 2000 * second
        for channel in record["channels"].values():
            channel["blocked_ms"] = 0.0

    return edit


def test_a_healthy_run_reports_its_rounds_and_keeps_up(tmp_path: Path) -> None:
    logs = write_run(tmp_path)
    _edit(logs, "node", _rounds())
    summary = _summary(logs)
    assert summary.rounds is not None
    assert round(summary.rounds.rounds) == 81
    assert summary.rounds.timeouts == 0
    assert summary.bottleneck.kept_up
    text = render_summary(summary)
    assert "ROUNDS: 81 in the window (10.0/s), 0 timed out (0.0%)" in text
    assert "held their clients back 0% of the window" in text


def test_timeouts_that_delay_a_run_that_kept_up_are_named(tmp_path: Path) -> None:
    logs = write_run(tmp_path)
    # A timeout every 2 s on each node: 4 in the window each, about 5 % of the rounds.
    _edit(logs, "node", _rounds(timeouts_every=2))
    summary = _summary(logs)
    verdict = summary.bottleneck
    assert (verdict.stage, verdict.rule) == ("consensus", "timeouts")
    assert "latency is the symptom" in verdict.explanation
    assert summary.rounds is not None
    assert summary.rounds.timed_out_leaders == {"node-1": 8}
    assert "node-1 x8" in render_summary(summary)


def test_clients_the_nodes_held_back_are_not_the_limit(tmp_path: Path) -> None:
    logs = write_run(tmp_path)
    # The clients were asked for twice what they sent, because the nodes held them back 300 ms
    # of every second.
    _edit(logs, "node", _rounds(paused_ms=300.0))
    _edit(logs, "client", lambda _i, _s, record: record.update(rate=2000))
    summary = _summary(logs)
    verdict = summary.bottleneck
    assert verdict.stage != "client"
    assert not verdict.kept_up
    assert any("held their clients back 30%" in note for note in verdict.notes)
    # The same shortfall without back-pressure is the load generator's.
    plain = write_run(tmp_path / "plain")
    _edit(plain, "node", _rounds())
    _edit(plain, "client", lambda _i, _s, record: record.update(rate=2000))
    assert _summary(plain).bottleneck.stage == "client"


def test_a_run_whose_batches_queued_for_seconds_says_it_collapsed(tmp_path: Path) -> None:
    logs = write_run(tmp_path)
    _edit(logs, "node", _rounds())

    def slow(_index: int, second: int, record: dict[str, Any]) -> None:
        # Half of what was sent commits, each batch 4 s after its seal.
        record["consensus"]["committed_txs"] = 1000 * second
        record["stages"]["executor"]["executed"] = 1000 * second
        record["batch_latencies_ms"] = [4000.0] * 5

    _edit(logs, "node", slow)
    verdict = _summary(logs).bottleneck
    assert not verdict.kept_up
    assert any(note.startswith("collapsed: batches waited p50 4.0 s") for note in verdict.notes)


def test_a_run_that_kept_up_through_timeouts_did_not_collapse(tmp_path: Path) -> None:
    """An outage: everything sent went through, batches waited over a second while rounds timed
    out. Latency is the symptom; nothing queued for good."""
    logs = write_run(tmp_path)
    _edit(logs, "node", _rounds(timeouts_every=2))
    _edit(logs, "node", lambda _i, _s, record: record.update(batch_latencies_ms=[1100.0] * 5))
    verdict = _summary(logs).bottleneck
    assert verdict.rule == "timeouts"
    assert not any(note.startswith("collapsed") for note in verdict.notes), verdict.notes


def test_logs_without_rounds_have_no_rounds_section(tmp_path: Path) -> None:
    summary = _summary(write_run(tmp_path))
    assert summary.rounds is None
    assert "ROUNDS" not in render_summary(summary)


def test_traffic_is_read_per_second_and_per_round_from_the_nodes_counters(tmp_path: Path) -> None:
    write_run(tmp_path)

    def edit(index: int, second: int, record: dict[str, Any]) -> None:
        _rounds()(index, second, record)
        # Node 0 sends 1 MB and 100 frames a second, node 1 twice that; each receives the other's.
        scale = 1 + index
        record["network"] = {
            "sent_bytes": 1_000_000 * scale * second,
            "sent_frames": 100 * scale * second,
            "received_bytes": 1_000_000 * (3 - scale) * second,
            "received_frames": 100 * (3 - scale) * second,
        }
        record["consensus"]["signatures_checked"] = 30 * second

    _edit(tmp_path, "node", edit)
    summary = _summary(tmp_path)
    traffic = summary.traffic
    assert traffic is not None
    # Means over the two nodes.
    assert traffic.sent_bytes_per_s == pytest.approx(1_500_000)
    assert traffic.received_frames_per_s == pytest.approx(150)
    assert traffic.frames_per_s == pytest.approx(300)
    assert traffic.signatures_per_s == pytest.approx(30)
    assert traffic.megabits_per_s == pytest.approx(12.0)
    assert summary.rounds is not None
    assert traffic.signatures_per_s / summary.rounds.rounds_per_second == pytest.approx(3)


def test_a_node_that_reports_no_traffic_leaves_it_out(tmp_path: Path) -> None:
    write_run(tmp_path)
    assert _summary(tmp_path).traffic is None
