"""The audit on synthetic METRICS series: a healthy run passes; a digest mismatch, a change of
supply, a sample executed twice and an unexplained loss each fail; a crashed and restarted node
is held only to what it reported; and the catch-up time of the timeline."""

from __future__ import annotations

from typing import Any

from benchmark.analysis.audit.checks import audit, render_audit
from benchmark.analysis.metrics import ProcessMetrics, Record, RunMetrics
from benchmark.analysis.timelines import build_commits_timeline
from benchmark.faults.events import CRASH, HEAL, PARTITION, RESTART, FaultEvent, FaultLog

from .conftest import described

T0 = 1_000_000.0  # ms
SUPPLY = 10_000
SENT_PER_S = 1_000  # per client
SECONDS = 5
SAMPLES = [f"s{i}" for i in range(SECONDS)]


def node_record(t: int, executed: float, **changes: Any) -> Record:
    """Node line at second t: it committed, verified and executed `executed` transactions."""
    executor = {
        "items": executed,
        "executed": executed,
        "failed": 0,
        "dropped": 0,
        "dropped_by_reason": {"stale_nonce": 0},
        "backlog": 0,
        "state_executed": executed,
        "state_digest": f"d{int(executed)}",
        "total_supply": str(SUPPLY),
    }
    executor.update(changes.pop("executor", {}))
    record: Record = {
        "role": "node",
        "name": changes.pop("name", "n"),
        "time_ms": T0 + 1000 * t,
        "consensus": {
            "round": 10 * t,
            "committed_blocks": 10 * t,
            "committed_txs": executed,
            "sealed_txs": changes.pop("sealed", executed / 2),
        },
        "stages": {"verifier": {"items": executed, "invalid": 0}, "executor": executor},
        "samples": [{"id": s, "event": "execute", "t_ms": 0} for s in changes.pop("samples", [])],
    }
    return record


def client_record(t: int, index: int) -> Record:
    samples = [{"id": SAMPLES[t - 1], "t_ms": T0 + 1000 * t - 900}] if index == 0 and t else []
    return {
        "role": "client",
        "name": f"client-{index}",
        "time_ms": T0 + 1000 * t,
        "sent": SENT_PER_S * t,
        "invalid_sent": 0,
        "rate": SENT_PER_S,
        "samples": samples,
        "final": t == SECONDS,
    }


def healthy_node(index: int) -> ProcessMetrics:
    records = [
        node_record(t, 2 * SENT_PER_S * t, name=f"n{index}", samples=SAMPLES[t - 1 : t])
        for t in range(1, SECONDS + 1)
    ]
    return ProcessMetrics("node", f"n{index}", f"node-{index}.log", records)


def healthy_run() -> RunMetrics:
    clients = [
        ProcessMetrics(
            "client",
            f"client-{i}",
            f"client-{i}.log",
            [client_record(t, i) for t in range(SECONDS + 1)],
        )
        for i in range(2)
    ]
    return RunMetrics(nodes=[healthy_node(0), healthy_node(1)], clients=clients)


def failed_names(run: RunMetrics, faults: FaultLog | None = None) -> list[str]:
    report = audit(run, faults or FaultLog(start_ms=T0), described("hotcrypto"), SUPPLY)
    return [check.name for check in report.failures]


def test_a_healthy_run_passes() -> None:
    report = audit(healthy_run(), FaultLog(start_ms=T0), described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    assert render_audit(report).startswith(f"AUDIT: ok ({len(report.checks)} checks)")
    digests = next(c for c in report.checks if c.name == "state digests agree")
    assert digests.detail.startswith(f"{SECONDS} common executed heights")


def test_a_digest_mismatch_fails() -> None:
    run = healthy_run()
    run.nodes[1].records[2]["stages"]["executor"]["state_digest"] = "forked"
    assert failed_names(run) == ["state digests agree"]


def test_a_supply_change_fails() -> None:
    run = healthy_run()
    run.nodes[0].records[3]["stages"]["executor"]["total_supply"] = str(SUPPLY + 1)
    assert failed_names(run) == ["total supply conserved"]


def test_a_workload_invariant_violated_fails() -> None:
    run = healthy_run()
    for node in run.nodes:
        node.records[-1]["stages"]["executor"]["failed_by_reason"] = {"insufficient_funds": 3}
    report = audit(run, FaultLog(start_ms=T0), described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    assert "workload invariants held" in [c.name for c in report.checks]
    run.nodes[1].records[-1]["stages"]["executor"]["failed_by_reason"]["invariant_violated"] = 1
    assert failed_names(run) == ["workload invariants held"]


def test_movevm_is_held_to_its_supply_and_invariants() -> None:
    records = [node_record(t, 1_000 * t) for t in range(1, 4)]
    for record in records:
        record["role"] = "movevm"
        record["stages"]["executor"]["failed_by_reason"] = {}
    run = RunMetrics(movevm=[ProcessMetrics("movevm", "movevm", "movevm.log", records)])
    report = audit(run, FaultLog(start_ms=T0), described("movevm"), SUPPLY)
    assert report.ok, render_audit(report)
    assert len(report.checks) == 2, render_audit(report)
    records[1]["stages"]["executor"]["total_supply"] = str(SUPPLY - 1)
    records[2]["stages"]["executor"]["failed_by_reason"] = {"invariant_violated": 2}
    report = audit(run, FaultLog(start_ms=T0), described("movevm"), SUPPLY)
    assert [c.name for c in report.failures] == [
        "total supply conserved",
        "workload invariants held",
    ]


def test_a_sample_executed_twice_fails() -> None:
    run = healthy_run()
    run.nodes[0].records[4]["samples"].append({"id": SAMPLES[0], "event": "execute", "t_ms": 0})
    assert failed_names(run) == ["samples executed at most once"]


def test_a_sample_never_executed_fails() -> None:
    run = healthy_run()
    run.nodes[1].records[0]["samples"] = []
    assert failed_names(run) == ["samples executed exactly once"]


def test_an_unexplained_loss_fails() -> None:
    run = healthy_run()
    # Node 1 executed 500 fewer than it committed, verified and handed to its executor.
    last = run.nodes[1].records[-1]["stages"]["executor"]
    last["executed"] -= 500
    last["state_executed"] = None
    assert failed_names(run) == ["node-1 accounting"]
    report = audit(run, FaultLog(start_ms=T0), described("hotcrypto"), SUPPLY)
    assert "500 unexplained" in report.failures[0].detail


def test_counted_drops_and_backlog_explain_a_gap() -> None:
    run = healthy_run()
    last = run.nodes[1].records[-1]["stages"]["executor"]
    last["executed"] -= 500
    last["state_executed"] = None
    last["dropped_by_reason"] = {"stale_nonce": 300}
    last["backlog"] = 200
    assert failed_names(run) == []


def test_drops_counted_after_the_last_by_reason_update_are_explained() -> None:
    """The executor counts `dropped` after every batch but publishes its reasons on a timer: the
    final line can hold drops its `dropped_by_reason` does not show yet."""
    run = healthy_run()
    last = run.nodes[1].records[-1]["stages"]["executor"]
    last["executed"] -= 300
    last["state_executed"] = None
    last["dropped"] = 300
    assert last["dropped_by_reason"] == {"stale_nonce": 0}
    assert failed_names(run) == []


def lost_with_a_node(run: RunMetrics, lost: int) -> None:
    """`lost` transactions never reached a batch (they went down with a node): no node sealed,
    committed or executed them."""
    for node in run.nodes:
        last = node.records[-1]
        last["consensus"]["sealed_txs"] -= lost / 2
        last["consensus"]["committed_txs"] -= lost
        last["stages"]["verifier"]["items"] -= lost
        executor = last["stages"]["executor"]
        executor["items"] -= lost
        executor["executed"] -= lost
        executor["state_executed"] = None


def test_what_a_client_sent_before_it_failed_over_may_be_lost() -> None:
    """Client 0's node went away between its lines of 2 s and 3 s, and it moved to another node:
    what it sent in the 2 s before may have gone down with the node. The same loss without a
    failover is unexplained."""
    run = healthy_run()
    lost_with_a_node(run, 5_000)
    assert failed_names(run) == ["node-0 accounting", "node-1 accounting"]
    for record in run.clients[0].records:
        record["failovers"] = 1 if record["time_ms"] >= T0 + 3000 else 0
    assert failed_names(run) == []
    # More than it sent around the failover (and at the end) stays unexplained.
    run = healthy_run()
    for record in run.clients[0].records:
        record["failovers"] = 1 if record["time_ms"] >= T0 + 3000 else 0
    lost_with_a_node(run, 8_000)
    assert failed_names(run) == ["node-0 accounting", "node-1 accounting"]


def test_more_executed_than_sent_fails() -> None:
    run = healthy_run()
    run.nodes[0].records[-1]["stages"]["executor"]["executed"] += 5_000
    run.nodes[0].records[-1]["stages"]["executor"]["state_executed"] = None
    assert failed_names(run) == ["node-0 accounting"]


def crashed_run() -> tuple[RunMetrics, FaultLog]:
    """Node 1 crashes after second 2 and restarts at 3.5 s from genesis (in-memory store): it
    re-executes 4,000 and 8,000 in its second life, with the digests of those heights."""
    run = healthy_run()
    node = run.nodes[1]
    first_life = node.records[:2]
    second_life = [
        node_record(t, 4_000 * (t - 3), name="n1", samples=[SAMPLES[0]] if t == 5 else [])
        for t in (4, 5)
    ]
    run.nodes[1] = ProcessMetrics("node", "n1", "node-1.log", first_life + second_life)
    faults = FaultLog(
        start_ms=T0,
        events=[
            FaultEvent(CRASH, 1, 2.5, T0 + 2500, "schedule"),
            FaultEvent(RESTART, 1, 3.5, T0 + 3500, "schedule"),
        ],
    )
    return run, faults


def test_a_restarted_node_is_audited_per_life() -> None:
    run, faults = crashed_run()
    report = audit(run, faults, described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    accounting = next(c for c in report.checks if c.name == "node-1 accounting")
    assert "missed while down" in accounting.detail


def test_a_restarted_node_behind_only_by_its_own_queues_did_not_miss_anything_while_down() -> None:
    """Node 1 ends 2,000 behind node 0, but it has committed and verified those 2,000 and they
    wait for its executor, as on any node at the stop: its shortfall is its queue, not the time
    it was down (CI: a caught-up node was reported as having missed 259 while down)."""
    run, faults = crashed_run()
    last = run.nodes[1].records[-1]
    last["consensus"]["committed_txs"] = 2 * SENT_PER_S * SECONDS
    last["stages"]["verifier"]["items"] = 2 * SENT_PER_S * SECONDS
    report = audit(run, faults, described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    accounting = next(c for c in report.checks if c.name == "node-1 accounting")
    assert "verified, queued for the executor" in accounting.detail
    assert "missed while down" not in accounting.detail


def test_a_restarted_node_that_forks_still_fails() -> None:
    run, faults = crashed_run()
    run.nodes[1].records[-1]["stages"]["executor"]["state_digest"] = "other"
    assert failed_names(run, faults) == ["state digests agree"]


def test_a_node_restored_from_a_checkpoint_is_noted_and_checked_at_common_heights() -> None:
    """Node 1's second life starts from a checkpoint at height 6,000 (state sync): its counters
    go on from there, its digests are compared with node 0's at the same heights, and the report
    says it was restored."""
    run, faults = crashed_run()
    node = run.nodes[1]
    first_life = node.records[:2]
    second_life = [
        node_record(t, 2 * SENT_PER_S * t, name="n1", samples=[SAMPLES[t - 1]]) for t in (4, 5)
    ]
    for record in second_life:
        record["consensus"].update(checkpoints_adopted=1, checkpoint_round=30)
        record["stages"]["executor"].update(restored_round=30, restored_height=6_000)
    run.nodes[1] = ProcessMetrics("node", "n1", "node-1.log", first_life + second_life)
    report = audit(run, faults, described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    assert "node-1 (life 2) restored from a checkpoint of round 30 at executed height 6,000" in (
        report.notes
    )
    # A restored state that differs from the others' at a common height fails as any other.
    run.nodes[1].records[-1]["stages"]["executor"]["state_digest"] = "other"
    assert failed_names(run, faults) == ["state digests agree"]


def test_catch_up_time_or_none() -> None:
    run, faults = crashed_run()
    [catch_up] = build_commits_timeline(run, faults, described("hotcrypto")).catch_ups
    # When node 1 restarted (3.5 s) node 0 had executed 6,000 (its line at 3 s).
    assert catch_up.target == 6_000
    assert catch_up.caught_up_after == 1.5  # 8,000 at 5 s
    run.nodes[1].records[-1]["stages"]["executor"]["executed"] = 5_000
    [late] = build_commits_timeline(run, faults, described("hotcrypto")).catch_ups
    assert late.caught_up_after is None
    assert late.reached == 5_000


def healthy_hotstuff_run() -> RunMetrics:
    """The healthy run in `hotstuff` mode: nothing after consensus, samples committed."""
    run = healthy_run()
    for node in run.nodes:
        for record in node.records:
            del record["stages"]
            for sample in record["samples"]:
                sample["event"] = "commit"
    return run


def test_hotstuff_checks_commits() -> None:
    run = healthy_hotstuff_run()
    report = audit(run, FaultLog(start_ms=T0), described("hotstuff"), None)
    assert report.ok, render_audit(report)
    assert {c.name for c in report.checks} >= {
        "samples committed exactly once",
        "node-0 accounting",
    }
    # Consensus committing more than the clients sent: a batch committed twice.
    run.nodes[0].records[-1]["consensus"]["committed_txs"] = 14_000
    assert failed_names_hotstuff(run) == ["node-0 accounting"]


def behind_hotstuff_run(received: bool) -> RunMetrics:
    """A hotstuff run whose nodes fell behind the load: at the stop they had committed 4,000 of
    the 10,000 sent, sealed 5,000 between them, and (with `received`) read all 10,000 from the
    clients: 5,000 wait in the mempools, more than the clients sent in their last 2 s (4,000)."""
    run = healthy_hotstuff_run()
    for node in run.nodes:
        last = node.records[-1]["consensus"]
        last["committed_txs"] = 4_000
        last["sealed_txs"] = 2_500
        if received:
            last["received_txs"] = 5_000
    return run


def test_a_mempool_backlog_counted_by_the_nodes_explains_a_run_that_fell_behind() -> None:
    report = audit(
        behind_hotstuff_run(received=True), FaultLog(start_ms=T0), described("hotstuff"), None
    )
    assert report.ok, render_audit(report)
    accounting = next(c for c in report.checks if c.name == "node-0 accounting")
    assert "5,000 received, not sealed by the stop" in accounting.detail
    assert "1,000 sealed, not committed by the stop" in accounting.detail
    # Without the nodes' count (older logs) only the last seconds' sends can be queued.
    report = audit(
        behind_hotstuff_run(received=False), FaultLog(start_ms=T0), described("hotstuff"), None
    )
    assert "1,000 unexplained" in report.failures[0].detail


def unread_hotstuff_run(unread: float | None) -> RunMetrics:
    """A hotstuff run that fell behind the load: the clients sent 10,000, 2,000 of them in their
    last 2 s; the nodes read 6,000 and committed them all. The rest waited in the clients'
    connections when the nodes stopped: the nodes report `unread` of them (None: logs from
    before the count)."""
    run = healthy_hotstuff_run()
    for client in run.clients:
        # 4,000 by 3 s, 1,000 in the last 2 s.
        client.records[3]["sent"] = 4_000
        client.records[4]["sent"] = 4_500
    for node in run.nodes:
        last = node.records[-1]["consensus"]
        last["committed_txs"] = 6_000
        last["sealed_txs"] = 3_000
        last["received_txs"] = 3_000
        if unread is not None:
            last["unread_txs"] = unread / 2
    return run


def test_what_the_nodes_left_unread_in_the_connections_explains_a_run_that_fell_behind() -> None:
    # Without the count only the last 2 s of sends can be on the way.
    report = audit(unread_hotstuff_run(None), FaultLog(start_ms=T0), described("hotstuff"), None)
    assert [c.name for c in report.failures] == ["node-0 accounting", "node-1 accounting"]
    assert report.failures[0].detail.endswith("; 2,000 unexplained"), render_audit(report)
    report = audit(unread_hotstuff_run(4_000), FaultLog(start_ms=T0), described("hotstuff"), None)
    assert report.ok, render_audit(report)
    accounting = next(c for c in report.checks if c.name == "node-0 accounting")
    assert "4,000 sent, unread in a node's connection at the stop" in accounting.detail
    # The nodes read to the end of every connection: what they did not count is missing, and
    # the last seconds' sends no longer cover it.
    report = audit(unread_hotstuff_run(3_000), FaultLog(start_ms=T0), described("hotstuff"), None)
    assert [c.name for c in report.failures] == ["node-0 accounting", "node-1 accounting"]
    assert report.failures[0].detail.endswith("; 1,000 unexplained"), render_audit(report)


def failed_names_hotstuff(run: RunMetrics) -> list[str]:
    return [c.name for c in audit(run, FaultLog(start_ms=T0), described("hotstuff"), None).failures]


def partitioned_run(healed_in_time: bool) -> tuple[RunMetrics, FaultLog]:
    """Node 1 is cut off from 1.5 s to 3.5 s: it executes nothing meanwhile, then catches up
    (or is still behind at the stop)."""
    run = healthy_run()
    executed = [2_000, 2_000, 2_000, 8_000, 10_000] if healed_in_time else [2_000] * 3 + [4_000] * 2
    node = run.nodes[1]
    for record, count in zip(node.records, executed, strict=True):
        stages = record["stages"]
        stages["verifier"]["items"] = count
        stages["executor"].update(
            items=count, executed=count, state_executed=count, state_digest=f"d{count}"
        )
        record["consensus"]["committed_txs"] = count
        record["consensus"]["sealed_txs"] = count / 2
        record["samples"] = []
    seen = SAMPLES if healed_in_time else SAMPLES[:2]
    node.records[-1]["samples"] = [{"id": s, "event": "execute", "t_ms": 0} for s in seen]
    faults = FaultLog(
        start_ms=T0,
        events=[
            FaultEvent(PARTITION, 1, 1.5, T0 + 1500, "schedule"),
            FaultEvent(HEAL, 1, 3.5, T0 + 3500, "schedule"),
        ],
    )
    return run, faults


def test_a_partitioned_node_that_caught_up_passes_and_its_catch_up_is_timed() -> None:
    run, faults = partitioned_run(healed_in_time=True)
    report = audit(run, faults, described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    [catch_up] = build_commits_timeline(run, faults, described("hotcrypto")).catch_ups
    assert catch_up.after == "heal"
    # At the heal node 0 had executed 6,000 (its line at 3 s); node 1 had 8,000 at 4 s.
    assert (catch_up.target, catch_up.caught_up_after) == (6_000, 0.5)


def test_a_partitioned_node_still_behind_at_the_stop_is_explained() -> None:
    run, faults = partitioned_run(healed_in_time=False)
    report = audit(run, faults, described("hotcrypto"), SUPPLY)
    assert report.ok, render_audit(report)
    accounting = next(c for c in report.checks if c.name == "node-1 accounting")
    assert "behind after its partition" in accounting.detail


def test_forgeries_dropped_at_ingress_do_not_explain_a_lost_valid_transaction() -> None:
    """The nodes fell behind with 5,000 received between them, 1,000 of which were forgeries
    their ingress checks dropped: only 4,000 valid ones can wait in the mempools, which leaves
    1,000 of the valid sends unexplained."""
    run = behind_hotstuff_run(received=True)
    report = audit(run, FaultLog(start_ms=T0), described("hotstuff"), None)
    assert report.ok, render_audit(report)
    for node in run.nodes:
        node.records[-1]["consensus"]["ingress_invalid_txs"] = 500
    report = audit(run, FaultLog(start_ms=T0), described("hotstuff"), None)
    assert [c.name for c in report.failures] == ["node-0 accounting", "node-1 accounting"]
    assert "4,000 received, not sealed by the stop" in report.failures[0].detail
    assert report.failures[0].detail.endswith("; 1,000 unexplained"), render_audit(report)
