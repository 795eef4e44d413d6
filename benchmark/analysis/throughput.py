"""The window of a run and what went through it: the steady window, throughput and latency
(consensus and end to end), and what the clients sent. How they are computed is in
`run_summary.py`'s description."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import HarnessError
from .counters import Window, increase, last_number, life_of, rate
from .metrics import ProcessMetrics, RunMetrics
from .samples import first_sends, sample_events
from .stats import LatencyStats, mean

WARMUP_FRACTION = 0.1
# What was delivered over a window and what the clients sent in it differ by the latency at its
# two ends and the interpolation of counters reported a second apart; beyond this share, the
# window delivered a backlog built before it (it is not a steady state).
WINDOW_NOISE = 0.02
# Processes write a METRICS line a second: a line this close to an end of the window is at it.
LINE_SLACK_MS = 1500.0


@dataclass(frozen=True)
class Throughput:
    tps: float
    bps: float | None
    latency: LatencyStats
    # The rates are the mean over the `nodes_counted` of `nodes` up through the whole window
    # (`rate_nodes`); 0 when none was, so every node counts, read within each life. None: over
    # every process (movevm).
    nodes_counted: int | None = None
    nodes: int | None = None


@dataclass(frozen=True)
class ClientStats:
    clients: int
    target_tps: float
    sent_tps: float
    missed_bursts: int
    invalid_sent: int
    samples_sent: int
    samples_matched: int
    # Share of the bursts due in the window that the clients skipped: their time came while the
    # node held the write of the one before back. None for clients that do not count them.
    held_back_share: float | None = None
    # Of the transactions the clients sent, those the nodes' ingress checks dropped before
    # sealing them (`consensus.ingress_invalid_txs`, summed over nodes); None in logs from
    # before the check.
    ingress_invalid: int | None = None


class SummaryError(HarnessError):
    """The logs hold too little to summarise a run."""


def steady_window(run: RunMetrics, warmup_fraction: float = WARMUP_FRACTION) -> Window:
    load = [p for p in (run.clients or run.movevm or run.nodes) if p.records]
    if not load:
        raise SummaryError("no METRICS records in the logs")
    firsts = [float(p.records[0]["time_ms"]) for p in load]
    lasts = [float(p.records[-1]["time_ms"]) for p in load]
    begin, end = max(firsts), min(lasts)
    if end <= begin:
        # The processes never all ran together; fall back to the span of any of them.
        begin, end = min(firsts), max(lasts)
    if end <= begin:
        raise SummaryError("the run is too short: fewer than two METRICS records")
    return Window(start_ms=begin + warmup_fraction * (end - begin), end_ms=end, load_start_ms=begin)


def sample_latencies(
    clients: Sequence[ProcessMetrics],
    nodes: Sequence[ProcessMetrics],
    event: str,
    window: Window,
) -> tuple[list[float], int]:
    """End-to-end latencies of the samples sent in the window, and how many were sent."""
    sent = {key: t_ms for key, t_ms in first_sends(clients).items() if window.contains(t_ms)}
    seen: dict[str, float] = {}
    for node in nodes:
        for key, t_ms in sample_events(node, event):
            if key not in seen or t_ms < seen[key]:
                seen[key] = t_ms
    latencies = [seen[key] - t_ms for key, t_ms in sent.items() if key in seen]
    return latencies, len(sent)


def up_through(process: ProcessMetrics, window: Window) -> bool:
    """The process reported from the window's start to its end (a line a second), all in one
    life: it was not crashed, restarted or still to be restarted in the window."""
    around = [
        r
        for r in process.records
        if window.start_ms - LINE_SLACK_MS <= float(r["time_ms"]) <= window.end_ms + LINE_SLACK_MS
    ]
    return (
        bool(around)
        and len({life_of(r) for r in around}) == 1
        and float(around[0]["time_ms"]) <= window.start_ms + LINE_SLACK_MS
        and float(around[-1]["time_ms"]) >= window.end_ms - LINE_SLACK_MS
    )


def rate_nodes(
    nodes: Sequence[ProcessMetrics], window: Window
) -> tuple[Sequence[ProcessMetrics], int]:
    """The nodes the headline rates are the mean of, and how many of them were up through the
    window. A node down for part of the window commits nothing meanwhile, and a restarted one
    commits or executes again, in a burst, what it had before its crash (replaying the chain) or
    jumps to a checkpoint's height: neither is the committee's throughput. So when the schedule
    stopped some nodes, the rates are those of the nodes up through the window; when it stopped
    every node (leader kills), of all of them, read within each life (0 up through: the report
    says so)."""
    steady = [n for n in nodes if up_through(n, window)]
    return (steady, len(steady)) if steady else (nodes, 0)


def consensus_throughput(
    nodes: Sequence[ProcessMetrics], counted: Sequence[ProcessMetrics], window: Window
) -> Throughput:
    """Rates over the `counted` nodes (`rate_nodes`), batch latencies over every node."""
    tps = mean(rate(n.records, ("consensus", "committed_txs"), window) for n in counted)
    bps = mean(rate(n.records, ("consensus", "committed_bytes"), window) for n in counted)
    latencies = [
        float(value)
        for n in nodes
        for r in n.records
        if r["time_ms"] > window.start_ms
        for value in (r.get("batch_latencies_ms") or [])
        if isinstance(value, int | float)
    ]
    return Throughput(tps=tps or 0.0, bps=bps, latency=LatencyStats.of(latencies))


def bytes_per_tx(nodes: Sequence[ProcessMetrics]) -> float | None:
    txs = sum(last_number(n.records, ("consensus", "committed_txs")) or 0.0 for n in nodes)
    size = sum(last_number(n.records, ("consensus", "committed_bytes")) or 0.0 for n in nodes)
    return size / txs if txs > 0 else None


def executed_rate(process: ProcessMetrics, window: Window) -> float | None:
    executed = rate(process.records, ("stages", "executor", "executed"), window)
    if executed is None:
        executed = rate(process.records, ("stages", "executor", "items"), window)
    return executed


def ingress_invalid(nodes: Sequence[ProcessMetrics]) -> int | None:
    """Client transactions the nodes' ingress checks dropped, over every node (each counts its
    own clients'); None if no node reports the count."""
    counts = [last_number(n.records, ("consensus", "ingress_invalid_txs")) for n in nodes]
    if all(count is None for count in counts):
        return None
    return round(sum(count or 0.0 for count in counts))


def client_stats(
    clients: Sequence[ProcessMetrics], window: Window, matched: int, sent: int
) -> ClientStats:
    return ClientStats(
        clients=len(clients),
        target_tps=sum(last_number(c.records, ("rate",)) or 0.0 for c in clients),
        sent_tps=sum(rate(c.records, ("sent",), window) or 0.0 for c in clients),
        missed_bursts=round(
            sum(last_number(c.records, ("missed_bursts",)) or 0.0 for c in clients)
        ),
        invalid_sent=round(sum(last_number(c.records, ("invalid_sent",)) or 0.0 for c in clients)),
        samples_sent=sent,
        samples_matched=matched,
        held_back_share=held_back_share(clients, window),
    )


def at_most_offered(tps: float, clients: ClientStats | None) -> float:
    """`tps` delivered over the window, counted up to what the clients sent in it (give or take
    `WINDOW_NOISE`): a steady window delivers what it is offered, and a backlog from before it
    (batches queued in the warm-up, bursts the clients made up after a hold) is not its
    throughput. Unchanged without clients (`movevm`)."""
    if clients is None or clients.clients == 0:
        return tps
    return min(tps, clients.sent_tps * (1 + WINDOW_NOISE))


def beyond_offered(tps: float, clients: ClientStats | None) -> float | None:
    """How far `tps` exceeded what the clients sent in the window, as a share of it, when that
    is more than `WINDOW_NOISE`; None otherwise."""
    if clients is None or clients.sent_tps <= 0:
        return None
    excess = tps / clients.sent_tps - 1
    return excess if excess > WINDOW_NOISE else None


def held_back_share(clients: Sequence[ProcessMetrics], window: Window) -> float | None:
    """Skipped bursts over the bursts due (made and skipped) in the window, over every client."""
    made = [increase(c.records, ("bursts",), window) for c in clients]
    skipped = [increase(c.records, ("skipped_bursts",), window) for c in clients]
    if not clients or any(m is None for m in made) or any(s is None for s in skipped):
        return None
    due = sum(m or 0.0 for m in made) + sum(s or 0.0 for s in skipped)
    return sum(s or 0.0 for s in skipped) / due if due > 0 else None
