"""The summary arithmetic on fixture logs whose numbers were chosen to be checked by hand.

hotcrypto fixture (2 nodes, 2 clients, records every second from T0+1 s): clients report at
1..10 s, so the steady window is [1.9 s, 10 s] (a warm-up of 1/10 of 9 s). Each node commits
1,800 tx/s in 9 batches/s of 200-byte transactions and executes 1,700 tx/s; the verifier is
blocked on the verifier->executor channel 50 % / 30 % of the time and the executor is busy
95 % / 93 %. Sample (client k, second s) is sent at T0+s-0.5 s and executed by node 0 after
200+100k+10s ms (node 1 is 50 ms later; node 0 commits it 100 ms earlier, which must not count).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.analysis.counters import Window, rate, value_at
from benchmark.analysis.metrics import load_run
from benchmark.analysis.run_summary import (
    Bottleneck,
    ClientStats,
    StageRow,
    Throughput,
    find_bottleneck,
    summarize,
)
from benchmark.analysis.stats import LatencyStats, percentile
from benchmark.report.text import render_summary

T0 = 1_700_000_000_000


def test_percentile_interpolates_linearly() -> None:
    assert percentile([1.0], 99) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 20.0], 99) == pytest.approx(19.9)


def test_counters_interpolate_and_clamp() -> None:
    records = [{"time_ms": 1000, "c": 10}, {"time_ms": 2000, "c": 30}, {"time_ms": 3000}]
    assert value_at(records, ("c",), 1500) == 20
    assert value_at(records, ("c",), 0) == 10
    assert value_at(records, ("c",), 9000) == 30
    assert rate(records, ("c",), Window(1000, 2000, 1000)) == 20
    assert value_at(records, ("missing",), 1500) is None


def test_hotcrypto_fixture(fixtures: Path) -> None:
    summary = summarize(load_run(fixtures / "hotcrypto"), {"mode": "hotcrypto", "nodes": 2})

    assert summary.window.start_ms == T0 + 1900
    assert summary.window.end_ms == T0 + 10_000
    assert summary.window.seconds == pytest.approx(8.1)

    assert summary.consensus is not None
    assert summary.consensus.tps == pytest.approx(1800)
    assert summary.consensus.bps == pytest.approx(360_000)
    # Batch latencies reported after the warm-up (node 1's last record is truncated).
    node0 = [100.0 + s for s in range(2, 12)] + [300.0 + s for s in range(2, 12)]
    node1 = [200.0 + s for s in range(2, 11)]
    expected = sorted(node0 + node1)
    assert summary.consensus.latency.count == len(expected)
    assert summary.consensus.latency.mean_ms == pytest.approx(sum(expected) / len(expected))
    assert summary.consensus.latency.p50_ms == pytest.approx(percentile(expected, 50))

    assert summary.end_to_end.tps == pytest.approx(1700)
    assert summary.end_to_end.bps == pytest.approx(1700 * 200)
    latency = summary.end_to_end.latency
    # Samples sent in the window: s = 3..10 for both clients; the earliest execute wins.
    assert latency.count == 16
    assert latency.mean_ms == pytest.approx(315)
    assert latency.p50_ms == pytest.approx(315)
    assert latency.p99_ms == pytest.approx(398.5)

    assert summary.clients == ClientStats(
        clients=2,
        target_tps=2000,
        sent_tps=pytest.approx(2000),
        missed_bursts=0,
        invalid_sent=0,
        samples_sent=16,
        samples_matched=16,
    )
    assert summary.processes["malformed_lines"] == 2


def test_hotcrypto_stage_table(fixtures: Path) -> None:
    summary = summarize(load_run(fixtures / "hotcrypto"), {"mode": "hotcrypto"})
    assert [row.name for row in summary.stages] == ["consensus", "verifier", "executor"]

    consensus = summary.stage("consensus")
    assert consensus is not None
    assert consensus.throughput == pytest.approx(1800)
    assert consensus.batch_size == pytest.approx(200)
    assert consensus.blocked_share == pytest.approx(0)
    assert consensus.busy_share is None

    verifier = summary.stage("verifier")
    assert verifier is not None
    assert verifier.throughput == pytest.approx(1800)
    assert verifier.busy_share == pytest.approx(0.4)
    assert verifier.blocked_share == pytest.approx(0.4)  # mean of 50 % and 30 %
    assert verifier.input_channel == "consensus->verifier"
    assert verifier.queue_mean == pytest.approx(2)
    assert verifier.queue_max == 4
    assert verifier.batch_size == pytest.approx(105)
    assert verifier.invalid == 22  # worst node: node 0's final record at 11 s

    executor = summary.stage("executor")
    assert executor is not None
    assert executor.throughput == pytest.approx(1700)
    assert executor.busy_share == pytest.approx(0.94)
    assert executor.blocked_share is None
    assert executor.input_blocked_share == pytest.approx(0.4)
    assert executor.queue_mean == pytest.approx(700)
    assert executor.queue_max == 1000
    assert executor.input_full == 33
    assert executor.failed == 11

    assert summary.bottleneck.stage == "executor"
    assert summary.bottleneck.rule == "back-pressure"
    assert summary.bottleneck.evidence["verifier_blocked_share"] == pytest.approx(0.4)
    assert summary.bottleneck.evidence["executor_busy_share"] == pytest.approx(0.94)

    assert summary.batch_sizes["consensus"] == [pytest.approx(200)] * 16
    assert len(summary.batch_sizes["verifier"]) == 18


def test_hotstuff_fixture_end_to_end_is_commit(fixtures: Path) -> None:
    summary = summarize(load_run(fixtures / "hotstuff"), {"mode": "hotstuff"})
    assert summary.window == Window(T0 + 1400, T0 + 5000, T0 + 1000)
    assert summary.consensus is not None
    assert summary.consensus.tps == pytest.approx(1000)
    assert summary.end_to_end.tps == summary.consensus.tps
    assert summary.end_to_end.bps == pytest.approx(512_000)
    assert summary.end_to_end.latency == LatencyStats(4, 150, 150, 150)
    assert [row.name for row in summary.stages] == ["consensus"]
    assert summary.bottleneck.stage == "offered load"


def test_movevm_fixture(fixtures: Path) -> None:
    summary = summarize(load_run(fixtures / "movevm"), {"mode": "movevm"})
    assert summary.consensus is None
    assert summary.clients is None
    assert summary.end_to_end.tps == pytest.approx(5000)
    assert [row.name for row in summary.stages] == ["generator", "executor"]
    assert summary.bottleneck.stage == "executor"
    assert summary.bottleneck.evidence["generator_blocked_share"] == pytest.approx(0.7)


def test_mode_comes_from_records_when_unknown(fixtures: Path) -> None:
    assert summarize(load_run(fixtures / "movevm"), {}).mode == "movevm"


def test_summary_is_json_and_renders(fixtures: Path) -> None:
    summary = summarize(load_run(fixtures / "hotcrypto"), {"mode": "hotcrypto", "nodes": 2})
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["end_to_end"]["tps"] == pytest.approx(1700)
    assert data["window"]["seconds"] == pytest.approx(8.1)
    text = render_summary(summary)
    for expected in ("CONSENSUS", "END-TO-END", "p99", "verifier", "executor", "LIMITING STAGE"):
        assert expected in text
    # Node parameters left to the node are reported as such, set ones with their value.
    assert "Batch size: node default, max batch delay: node default" in text
    set_delay = replace(summary, config={**summary.config, "max_batch_delay": 20})
    assert "Batch size: node default, max batch delay: 20 ms" in render_summary(set_delay)
    assert "Emulated links" not in text
    links = replace(summary, config={**summary.config, "delay_ms": 50, "bandwidth_mbit": 2.5})
    assert "Emulated links: 50 ms one way, 2.5 Mbit/s each way" in render_summary(links)


def _row(name: str, busy: float | None = None, input_blocked: float | None = None) -> StageRow:
    return StageRow(
        name=name,
        throughput=1000.0,
        busy_share=busy,
        blocked_share=None,
        input_channel=None if name == "consensus" else f"x->{name}",
        input_blocked_share=input_blocked,
        input_full=0,
        queue_mean=0.0,
        queue_max=0,
        batch_size=None,
        invalid=0,
        failed=0,
        dropped=0,
    )


def _clients(target: float, sent: float) -> ClientStats:
    return ClientStats(1, target, sent, 3, 0, 0, 0)


def _bottleneck(rows: list[StageRow], e2e: float, clients: ClientStats | None) -> Bottleneck:
    through = Throughput(e2e, None, LatencyStats.of([]))
    return find_bottleneck(rows, through, clients, through)


def test_bottleneck_most_downstream_blocked_stage_wins() -> None:
    rows = [_row("consensus"), _row("verifier", 0.9, 0.6), _row("executor", 0.99, 0.5)]
    assert _bottleneck(rows, 100, _clients(1000, 1000)).stage == "executor"


def test_bottleneck_rules_in_order() -> None:
    idle = [_row("consensus"), _row("verifier", 0.2, 0.0), _row("executor", 0.3, 0.01)]
    assert _bottleneck(idle, 590, _clients(1000, 600)).stage == "client"
    assert _bottleneck(idle, 990, _clients(1000, 1000)).stage == "offered load"
    assert _bottleneck(idle, 500, _clients(1000, 1000)).stage == "consensus"
    busy = [_row("consensus"), _row("verifier", 0.2, 0.0), _row("executor", 0.85, 0.0)]
    result = _bottleneck(busy, 500, _clients(1000, 1000))
    assert (result.stage, result.rule) == ("executor", "saturated")


def test_clients_that_fell_short_are_not_the_limit_when_the_system_lagged_behind_them() -> None:
    """hotstuff at 700,000 tx/s asked: the clients sent 373,000, consensus committed 258,000.
    The clients are not what limits that run: the system did not take even what they sent."""
    clients = _clients(700_000, 373_000)
    result = _bottleneck([], 258_000, clients)
    assert (result.stage, result.rule) == ("consensus", "ordering")
    assert any("clients also fell short" in note and "373,000" in note for note in result.notes)
    # Had consensus taken what they sent, the clients would be the limit.
    assert _bottleneck([], 370_000, clients).stage == "client"
    assert not _bottleneck([], 370_000, clients).notes


def test_bottleneck_stage_that_falls_behind_its_input() -> None:
    """A deep input channel never fills, but the stage processes less than it receives."""
    consensus = _row("consensus")
    verifier = replace(_row("verifier", 0.5, 0.0), throughput=680.0, queue_mean=48.9)
    executor = replace(_row("executor", 0.03, 0.0), throughput=680.0)
    result = _bottleneck([consensus, verifier, executor], 680, _clients(1000, 1000))
    assert (result.stage, result.rule) == ("verifier", "falls behind")
    assert result.evidence["verifier_queue_mean"] == pytest.approx(48.9)
    # The same shortfall with an empty queue is not a backlog: the stage had nothing to do.
    verifier = replace(verifier, queue_mean=0.0)
    assert _bottleneck([consensus, verifier, executor], 680, _clients(1000, 1000)).stage != (
        "verifier"
    )


def test_forged_transactions_and_those_the_nodes_dropped_at_ingress_are_shown(
    fixtures: Path,
) -> None:
    summary = summarize(load_run(fixtures / "hotcrypto"), {"mode": "hotcrypto", "nodes": 2})
    assert summary.clients is not None
    assert "Forged" not in render_summary(summary)
    clients = replace(summary.clients, invalid_sent=1_200, ingress_invalid=1_190)
    text = render_summary(replace(summary, clients=clients))
    assert "   Forged: 1,200 sent, 1,190 dropped by the nodes' ingress checks" in text
    clients = replace(summary.clients, invalid_sent=1_200)
    assert "   Forged: 1,200 sent\n" in render_summary(replace(summary, clients=clients))
