"""The audit after every run: did the honest nodes agree, and is every transaction accounted for?

Honest nodes are all nodes; a crashed node is held only to what it reported before it went
down, and a restarted one is read per life (`node_lives.py`: with the in-memory store a restart
starts again from genesis). The checks, each a line of the result:

- state digests: wherever two nodes (or two lives) report the same `state_executed`, their
  `state_digest` is the same. The number of heights compared is reported; none is not a failure
  by itself (the report says so).
- total supply: every `total_supply` a node reports (balances, plus the fees the adapter
  collected, plus what SmallBank accounts hold under `--workload=smallbank`) equals the genesis
  total (accounts x balance).
- workload invariants: no transaction failed with `invariant_violated` (`failed_by_reason`), the
  workloads' own checks: CpuHeavy's sorted order, KvStore's values read back as written.
- `movevm` has no nodes: its one process is held to the total supply and the workload invariants.
- samples: within one life a node executes (`hotstuff`: commits) a sample at most once; a node
  that ran to the end without a crash executes every sample the clients sent, except samples that
  may still have been queued when the run stopped (sent in the last `QUEUE_WINDOW_S` seconds, or
  missing on a node that still had transactions on the way: unread in a client connection, in a
  mempool, sealed but not committed, or committed but not executed; each node proposes its own
  batches, so which ones wait is not first-in first-out over the clients) and samples sent to a
  node that crashed and that no node running to the end executed (they went down with that
  node's mempool).
- accounting: per node, valid transactions sent (clients' `sent` - `invalid_sent`) minus those
  executed (`executed` + `failed`; `hotstuff`: sent minus committed) must be explained by counted
  reasons: executor drops (`dropped`, or `dropped_by_reason` if larger: the reasons are published
  every 500 ms, `dropped` after every batch), the executor's `backlog`, verifier rejections
  beyond the forged transactions sent (`invalid_by_reason`), transactions committed but still in
  the pipeline's channels (committed - verifier items - ...), transactions sealed into batches by
  some node (`sealed_txs`, summed over nodes and lives) but not committed by this one when the run
  stopped (queued behind consensus, or held by a node that crashed), transactions read by a
  mempool (`received_txs`, likewise, less the forged ones its ingress check dropped,
  `ingress_invalid_txs`) but not sealed (queued there, however far behind the nodes
  fell, or lost with a mempool that crashed), transactions sent and still in a client connection
  when a node stopped (`unread_txs`: on SIGTERM a node reads each client connection to its end,
  or for at most 1.5 s, and counts what it never handed to its batch maker), transactions sent
  but neither received nor unread (in flight: at most what the clients sent before their node's
  crash or around a failover, what a dead client did not report, and, for nodes from before
  `unread_txs`, what the clients sent in their last `QUEUE_WINDOW_S` seconds; nodes from before
  `received_txs` get only this for sent but not sealed), for a crashed node what the nodes that
  ran to the end executed beyond it (it was down), and for a node cut off by a partition what
  those nodes executed beyond it (it was still catching up when the run stopped). Whatever is
  left is unexplained and fails; so does executing more than was sent. A partitioned node is
  otherwise held to everything a node that ran to the end is: it was up all along, and must end
  with every sample executed once.

A node that came back after its peers deleted what it would need to replay the chain adopts a
checkpoint (state sync: `consensus.checkpoints_adopted`, `checkpoint_round`; the executor's
`restored_round`, `restored_height`): its counters then continue from the checkpoint's height,
so its digests are compared at the same heights as everyone's. The report notes each restore.

A client whose node goes away moves to another node and resends what it sent in the last few
seconds (`client/src/failover.rs`; counters `failovers`, `resent`): what it sent in the
QUEUE_WINDOW_S seconds before each failover may have gone down with the node, and is allowed as
such, as are its samples of then. A client that could not move (no node accepted it) dies and
never writes its final line: up to one interval of its sends (its rate x 1 s) is unreported,
and is allowed as such.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ...faults.events import FaultLog
from ...json_path import lookup, number
from ..metrics import Record, RunMetrics
from ..node_lives import NodeLives, node_lives
from ..pipeline import Pipeline
from .totals import (
    ClientTotals,
    MempoolTotals,
    client_totals,
    last_value,
    mempool_totals,
    queued_at_stop,
)

# The executor's `failed_by_reason` key of a workload's own check failing (executor.rs).
INVARIANT_VIOLATED = "invariant_violated"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class AuditReport:
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(name, ok, detail))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": len(self.checks),
            "failures": [asdict(c) for c in self.failures],
            "passed": [asdict(c) for c in self.checks if c.ok],
            "notes": self.notes,
        }


def _check_digests(report: AuditReport, nodes: list[NodeLives]) -> None:
    seen: dict[int, dict[str, list[str]]] = {}
    for node in nodes:
        for life, records in enumerate(node.lives):
            for record in records:
                height = number(record, ("stages", "executor", "state_executed"))
                digest = lookup(record, ("stages", "executor", "state_digest"))
                if height is None or not isinstance(digest, str):
                    continue
                who = f"node-{node.index}" + (f" (life {life})" if life else "")
                holders = seen.setdefault(int(height), {}).setdefault(digest, [])
                if who not in holders:
                    holders.append(who)
    if not seen:
        report.notes.append("state digests: no node reported state_executed; not compared")
        return
    compared = [h for h, digests in seen.items() if sum(len(w) for w in digests.values()) > 1]
    forks = {h: digests for h, digests in seen.items() if len(digests) > 1}
    if forks:
        height = min(forks)
        detail = "; ".join(f"{d[:16]} at {', '.join(w)}" for d, w in forks[height].items())
        report.add(
            "state digests agree",
            False,
            f"{len(forks)} of {len(compared)} common heights differ; first at {height}: {detail}",
        )
        return
    detail = f"{len(compared)} common executed heights compared"
    if not compared:
        detail = "no two nodes reported the same executed height: nothing compared"
        report.notes.append(detail)
    report.add("state digests agree", True, detail)


def _check_supply(report: AuditReport, nodes: list[NodeLives], genesis_total: int | None) -> None:
    if genesis_total is None:
        report.notes.append("total supply: genesis total unknown; not checked")
        return
    wrong = []
    checked = 0
    for node in nodes:
        for record in node.records:
            value = lookup(record, ("stages", "executor", "total_supply"))
            if value is None:
                continue
            checked += 1
            try:
                supply = int(str(value))
            except ValueError:
                supply = None
            if supply != genesis_total:
                wrong.append(f"node-{node.index} reported {value} at t={record['time_ms']}")
    if checked == 0:
        report.notes.append("total supply: no node reported total_supply; not checked")
        return
    report.add(
        "total supply conserved",
        not wrong,
        f"{checked} values equal the genesis total {genesis_total}"
        if not wrong
        else f"{len(wrong)} of {checked} differ from {genesis_total}: {wrong[0]}",
    )


def _last_failures(records: list[Record]) -> dict[str, Any] | None:
    """The latest `failed_by_reason` of one life (counters are cumulative)."""
    for record in reversed(records):
        by_reason = lookup(record, ("stages", "executor", "failed_by_reason"))
        if isinstance(by_reason, dict):
            return by_reason
    return None


def _check_invariants(report: AuditReport, nodes: list[NodeLives]) -> None:
    violated = []
    checked = 0
    for node in nodes:
        for life in node.lives:
            failures = _last_failures(life)
            if failures is None:
                continue
            checked += 1
            if failures.get(INVARIANT_VIOLATED):
                violated.append(f"node-{node.index}: {failures[INVARIANT_VIOLATED]}")
    if checked == 0:
        report.notes.append("workload invariants: no failed_by_reason reported; not checked")
        return
    report.add(
        "workload invariants held",
        not violated,
        f"no {INVARIANT_VIOLATED} failure in {checked} executor(s)"
        if not violated
        else f"{INVARIANT_VIOLATED} on {', '.join(violated)}",
    )


def _check_samples(
    report: AuditReport,
    nodes: list[NodeLives],
    clients: ClientTotals,
    event: str,
    mempools: MempoolTotals,
) -> None:
    verb = "executed" if event == "execute" else "committed"
    twice = []
    for node in nodes:
        for life, records in enumerate(node.lives):
            counts = Counter(
                str(sample.get("id"))
                for record in records
                for sample in lookup(record, ("samples",)) or []
                if isinstance(sample, dict) and sample.get("event") == event
            )
            twice += [
                f"node-{node.index} life {life}: {i} x{n}" for i, n in counts.items() if n > 1
            ]
    report.add(
        f"samples {verb} at most once",
        not twice,
        "no sample twice within a life" if not twice else f"{len(twice)}: {', '.join(twice[:3])}",
    )
    complete = [node for node in nodes if not node.crashed]
    if not clients.samples or not complete:
        report.notes.append(f"samples {verb} exactly once: no samples or no node ran to the end")
        return
    missing: list[str] = []
    explained = 0
    seen = {node.index: _sample_ids(node, event) for node in complete}
    anywhere = set().union(*seen.values())
    for node in complete:
        got = seen[node.index]
        queued = queued_at_stop(node.last or {}, mempools, event)
        for sample_id in clients.samples:
            if sample_id in got:
                continue
            lost_with_node = sample_id in clients.crashed_origin and sample_id not in anywhere
            if sample_id in clients.late_samples or queued > 0 or lost_with_node:
                explained += 1
            else:
                missing.append(f"{sample_id} on node-{node.index}")
    detail = f"{len(clients.samples)} samples on {len(complete)} node(s) that ran to the end"
    if explained:
        detail += (
            f"; {explained} (node, sample) pairs missing: queued at the stop, or sent to a node"
            " that crashed"
        )
    if missing:
        detail = f"{len(missing)} sample(s) never {verb}: {', '.join(missing[:3])}"
    report.add(f"samples {verb} exactly once", not missing, detail)


def _sample_ids(node: NodeLives, event: str) -> set[str]:
    return {
        str(sample.get("id"))
        for record in node.records
        for sample in lookup(record, ("samples",)) or []
        if isinstance(sample, dict) and sample.get("event") == event
    }


def _queue_reasons(
    committed: float, mempools: MempoolTotals, clients: ClientTotals
) -> dict[str, float]:
    """Valid transactions sent that consensus had not committed at the stop: unread in a node's
    client connection (counted by the nodes as they stopped), otherwise still on their way to a
    node (at most what was sent around a crash or failover, or, for nodes that do not count the
    unread, in the last seconds), in a mempool (received, not sealed: counted by the nodes,
    however far behind they fell), or sealed and not yet committed."""
    sealed = mempools.sealed
    not_committed = {
        "sealed, not committed by the stop (queued, or on a crashed node)": max(
            0.0, sealed - committed
        )
    }
    if mempools.received <= 0:
        # Nodes from before `received_txs`: in flight and in the mempools, only the window.
        return {
            "sent, not sealed by the stop": min(
                max(0.0, clients.sent - sealed), clients.queue_allowance
            ),
            **not_committed,
        }
    # A stopping node reads each client connection to its end and counts what it finds there
    # (`unread_txs`): with that count the last seconds' sends are no longer in flight, and only
    # crashes, failovers and dead clients (connections no node drained) keep their window.
    # `unread` is not capped: no loss can hide behind it. It counts frames a node read after it
    # was told to stop, and each frame once: a frame is either handed to the batch maker (and
    # counted in `received_txs`) or counted here, never both. Transactions a node lost before
    # the stop are counted in neither, and the window no longer covers them; transactions lost
    # after the mempool took them were counted as received, and the reasons after this one
    # treat them as before. (Unread beyond the gap: a client took its last burst back after
    # part of it was written; the excess explains nothing, a reason only covers the gap.)
    unread = mempools.unread or 0.0
    allowance = clients.queue_allowance
    if mempools.unread is not None:
        allowance -= clients.end_window
    return {
        "sent, unread in a node's connection at the stop": unread,
        "sent, not received by a node by the stop (in flight)": min(
            max(0.0, clients.sent - mempools.received - unread), allowance
        ),
        "received, not sealed by the stop (in a mempool, or lost with a crashed one)": max(
            0.0, mempools.received - mempools.dropped - sealed
        ),
        **not_committed,
    }


# The reasons that are transactions this node committed and still holds in its own pipeline.
_PIPELINE_QUEUES = (
    "committed, queued for the verifier",
    "verified, queued for the executor",
    "in the executor's backlog",
)


def _reasons(record: Record, clients: ClientTotals, mempools: MempoolTotals) -> dict[str, float]:
    """The counted reasons, from one node's latest record, why a valid transaction sent was not
    (yet) executed."""
    committed = number(record, ("consensus", "committed_txs")) or 0.0
    verified = number(record, ("stages", "verifier", "items")) or 0.0
    invalid = number(record, ("stages", "verifier", "invalid")) or 0.0
    into_executor = number(record, ("stages", "executor", "items")) or 0.0
    # `dropped` is exact after every batch; its reasons are published on the executor's timer
    # (every 500 ms), so the final line may show fewer of them. Both are cumulative counts of
    # the same drops: the larger is the later.
    by_reason = lookup(record, ("stages", "executor", "dropped_by_reason"))
    dropped = max(
        sum(float(v) for v in by_reason.values() if isinstance(v, int | float))
        if isinstance(by_reason, dict)
        else 0.0,
        number(record, ("stages", "executor", "dropped")) or 0.0,
    )
    return {
        **_queue_reasons(committed, mempools, clients),
        "committed, queued for the verifier": max(0.0, committed - verified),
        "rejected by the verifier beyond the forged ones": max(0.0, invalid - clients.invalid_sent),
        "verified, queued for the executor": max(0.0, verified - invalid - into_executor),
        "dropped by the executor": dropped,
        "in the executor's backlog": number(record, ("stages", "executor", "backlog")) or 0.0,
    }


def _check_accounting(
    report: AuditReport,
    nodes: list[NodeLives],
    clients: ClientTotals,
    pipeline: Pipeline,
    partitioned: set[int] | None = None,
) -> None:
    partitioned = partitioned or set()

    def done(record: Record) -> float:
        count = number(record, pipeline.done_counter) or 0.0
        if pipeline.executes:
            # A transaction the executor ran and failed is done too.
            count += number(record, ("stages", "executor", "failed")) or 0.0
        return count

    verb = pipeline.done_verb
    valid = clients.sent - clients.invalid_sent
    complete = [done(n.last) for n in nodes if not n.crashed and n.last is not None]
    reference = max(complete) if complete else None
    mempools = mempool_totals(nodes)
    for node in nodes:
        record = node.last
        if record is None:
            report.add(f"node-{node.index} accounting", False, "no METRICS line at all")
            continue
        count = done(record)
        gap = valid - count
        if gap < -clients.unreported:
            report.add(
                f"node-{node.index} accounting",
                False,
                f"{verb} {count:,.0f} but only {valid:,.0f} valid transactions were sent",
            )
            continue
        if pipeline.executes:
            reasons = _reasons(record, clients, mempools)
        else:
            reasons = _queue_reasons(count, mempools, clients)
        # A restarted or healed node is behind the reference by what it missed plus what it has
        # committed and still queues, as any node at the stop: only the first is its fault's.
        behind = (
            max(0.0, reference - count - sum(reasons.get(q, 0.0) for q in _PIPELINE_QUEUES))
            if reference is not None
            else 0.0
        )
        if node.crashed and reference is not None:
            reasons = {
                "missed while down (behind the nodes that ran to the end)": behind,
                **reasons,
            }
        elif node.index in partitioned and reference is not None:
            reasons = {
                "behind after its partition (still catching up at the stop)": behind,
                **reasons,
            }
        remaining = max(0.0, gap)
        used = {}
        for reason, amount in reasons.items():
            take = min(remaining, amount)
            if take > 0:
                used[reason] = take
                remaining -= take
        parts = ", ".join(f"{amount:,.0f} {reason}" for reason, amount in used.items())
        detail = f"sent {valid:,.0f} valid, {verb} {count:,.0f}" + (f": {parts}" if parts else "")
        if remaining > 0:
            detail += f"; {remaining:,.0f} unexplained"
        report.add(f"node-{node.index} accounting", remaining <= 0, detail)


def restores(nodes: list[NodeLives]) -> list[str]:
    """One line per life of a node that adopted a checkpoint from its peers."""
    lines = []
    for node in nodes:
        for number_, life in enumerate(node.lives):
            if last_value(life, ("consensus", "checkpoints_adopted")) <= 0:
                continue
            round_ = last_value(life, ("consensus", "checkpoint_round"))
            height = last_value(life, ("stages", "executor", "restored_height"))
            at = f" at executed height {height:,.0f}" if height else ""
            lines.append(
                f"node-{node.index} (life {number_ + 1}) restored from a checkpoint of round "
                f"{round_:,.0f}{at}"
            )
    return lines


def audit(
    run: RunMetrics, faults: FaultLog, pipeline: Pipeline, genesis_total: int | None
) -> AuditReport:
    report = AuditReport()
    if not pipeline.consensus:
        # One process, no consensus: what it can be held to is its executor's state.
        executors = [
            NodeLives(i, p.name, [p.records], False)
            for i, p in enumerate(run.processes_of(pipeline.process))
        ]
        if not executors:
            report.notes.append(f"no {pipeline.process} process: nothing to audit")
            return report
        _check_supply(report, executors, genesis_total)
        _check_invariants(report, executors)
        return report
    if not run.nodes:
        report.notes.append("no nodes: nothing to audit")
        return report
    nodes = node_lives(run, faults)
    report.notes.extend(restores(nodes))
    clients = client_totals(run.clients, faults)
    if pipeline.executes:
        _check_digests(report, nodes)
        _check_supply(report, nodes, genesis_total)
        _check_invariants(report, nodes)
    _check_samples(report, nodes, clients, pipeline.done, mempool_totals(nodes))
    _check_accounting(report, nodes, clients, pipeline, faults.partitioned())
    return report


def genesis_total(config: dict[str, Any]) -> int | None:
    """The genesis supply: `node genesis` gives each of `accounts` accounts `balance`."""
    accounts, balance = config.get("accounts"), config.get("balance")
    if isinstance(accounts, int) and isinstance(balance, int):
        return accounts * balance
    return None


def render_audit(report: AuditReport) -> str:
    lines = []
    if report.ok:
        lines.append(f"AUDIT: ok ({len(report.checks)} checks)")
    else:
        lines.append(f"AUDIT: FAILED ({len(report.failures)} of {len(report.checks)} checks)")
        lines += [f"   FAIL {c.name}: {c.detail}" for c in report.failures]
    lines += [f"   {c.name}: {c.detail}" for c in report.checks if c.ok]
    lines += [f"   note: {note}" for note in report.notes]
    return "\n".join(lines) + "\n"
