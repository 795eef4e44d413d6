"""What the clients sent and the mempools held, summed over a run's processes: the totals the
audit's sample and accounting checks hold the nodes' counters to (`checks.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...faults.events import FaultLog
from ...json_path import lookup, number
from ..metrics import ProcessMetrics, Record
from ..node_lives import NodeLives, index_of

# Transactions sent this close to the end of sending (or to their node's crash) may still be
# queued (batch maker, consensus) when the run stops: a few batch delays and rounds.
QUEUE_WINDOW_S = 2.0


@dataclass(frozen=True)
class ClientTotals:
    sent: float
    invalid_sent: float
    unreported: float  # sends a dead client may not have reported (one interval)
    queue_allowance: float  # sent in the last QUEUE_WINDOW_S seconds (or of the crash)
    # Of `queue_allowance`: sent in the last QUEUE_WINDOW_S seconds of clients whose node did not
    # crash under them, which nodes that count `unread_txs` account for exactly.
    end_window: float
    samples: dict[str, float]  # sample id -> send time (ms)
    late_samples: set[str]  # sent in the last window of their client (or before its crash)
    crashed_origin: set[str]  # sent to a node that crashed during the run


def last_value(records: list[Record], path: tuple[str, ...]) -> float:
    for record in reversed(records):
        value = number(record, path)
        if value is not None:
            return value
    return 0.0


def _sent_at(records: list[Record], time_ms: float) -> float:
    value = 0.0
    for record in records:
        if float(record["time_ms"]) <= time_ms:
            value = number(record, ("sent",)) or value
    return value


def _failover_windows(records: list[Record]) -> list[tuple[float, float]]:
    """(from, to) in ms around each failover of a client: its node went away between the line
    before the `failovers` counter moved and the line that shows it, and may have taken what the
    client sent in the QUEUE_WINDOW_S seconds before (the client resends 5 s of it, but a node
    still holds what it received until it is committed)."""
    windows = []
    before, previous_ms = 0.0, None
    for record in records:
        failovers = number(record, ("failovers",)) or 0.0
        time_ms = float(record["time_ms"])
        if failovers > before:
            start = previous_ms if previous_ms is not None else time_ms
            windows.append((start - QUEUE_WINDOW_S * 1000.0, time_ms))
        before, previous_ms = max(before, failovers), time_ms
    return windows


def client_totals(clients: list[ProcessMetrics], faults: FaultLog) -> ClientTotals:
    crash_ms: dict[int, float] = {}
    for event in faults.events:
        if event.kind == "crash":
            crash_ms.setdefault(event.node, event.time_ms)
    sent = invalid = unreported = allowance = end_window = 0.0
    samples: dict[str, float] = {}
    late: set[str] = set()
    crashed_origin: set[str] = set()
    for client in clients:
        records = client.records
        if not records:
            continue
        index = index_of(client)
        total = last_value(records, ("sent",))
        sent += total
        invalid += last_value(records, ("invalid_sent",))
        end_ms = float(records[-1]["time_ms"])
        if not client.has_final:
            unreported += last_value(records, ("rate",))
        window_from = end_ms - QUEUE_WINDOW_S * 1000.0
        lost = _failover_windows(records)
        if index is not None and index in crash_ms and not lost:
            # Its node crashed and it never moved (a client that dies with its connection):
            # everything from shortly before the crash on.
            window_from = min(window_from, crash_ms[index] - QUEUE_WINDOW_S * 1000.0)
        else:
            end_window += total - _sent_at(records, window_from)
        allowance += total - _sent_at(records, window_from)
        allowance += sum(_sent_at(records, to) - _sent_at(records, frm) for frm, to in lost)
        for record in records:
            for sample in lookup(record, ("samples",)) or []:
                if isinstance(sample, dict) and "id" in sample:
                    t_ms = float(sample.get("t_ms", record["time_ms"]))
                    samples[str(sample["id"])] = t_ms
                    if t_ms >= window_from:
                        late.add(str(sample["id"]))
                    in_lost = any(frm <= t_ms <= to for frm, to in lost)
                    if in_lost or (index is not None and index in crash_ms and not lost):
                        crashed_origin.add(str(sample["id"]))
    return ClientTotals(
        sent,
        invalid,
        unreported,
        allowance + unreported,
        end_window,
        samples,
        late,
        crashed_origin,
    )


def queued_at_stop(record: Record, mempools: MempoolTotals, event: str) -> float:
    """Transactions the node still had on the way when it stopped: unread in a client
    connection, in a mempool, sealed by some node but not committed, and (when it executes)
    committed but not yet through the verifier and executor."""
    committed = number(record, ("consensus", "committed_txs")) or 0.0
    queued = (
        (mempools.unread or 0.0)
        + max(0.0, mempools.received - mempools.sealed)
        + max(0.0, mempools.sealed - committed)
    )
    if event == "execute":
        handled = sum(
            number(record, ("stages", *path)) or 0.0
            for path in (
                ("verifier", "invalid"),
                ("executor", "executed"),
                ("executor", "failed"),
                ("executor", "dropped"),
            )
        )
        queued += max(0.0, committed - handled)
    return queued


@dataclass(frozen=True)
class MempoolTotals:
    """What every node's mempool took in and sealed, every life of it included."""

    # Transactions read from clients (`consensus.received_txs`; 0 in logs from before it).
    received: float
    sealed: float
    # Transactions the nodes found in their client connections when they stopped and never
    # handed to a batch maker (`consensus.unread_txs`); None in logs from before the count.
    unread: float | None = None
    # Of `received`, the invalid ones the nodes' ingress checks dropped before sealing
    # (`consensus.ingress_invalid_txs`; 0 in logs from before the check).
    dropped: float = 0.0


def _reports(records: list[Record], path: tuple[str, ...]) -> bool:
    return any(number(record, path) is not None for record in records)


def mempool_totals(nodes: list[NodeLives]) -> MempoolTotals:
    lives = [life for n in nodes for life in n.lives if life]
    unread = ("consensus", "unread_txs")
    return MempoolTotals(
        received=sum(last_value(life, ("consensus", "received_txs")) for life in lives),
        sealed=sum(last_value(life, ("consensus", "sealed_txs")) for life in lives),
        dropped=sum(last_value(life, ("consensus", "ingress_invalid_txs")) for life in lives),
        unread=(
            sum(last_value(life, unread) for life in lives)
            if any(_reports(life, unread) for life in lives)
            else None
        ),
    )
