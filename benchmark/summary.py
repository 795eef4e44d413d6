"""The arithmetic of a run: throughput, latency, the stage table and the limiting stage.

Everything is computed from METRICS records (see `metrics.py`):

* The steady window. Clients define the load: the window runs from the moment every client has
  reported (the latest first record) to the moment the first one stops (the earliest last
  record), minus a warm-up of `warmup_fraction` (default 1/10) of that span at the start. In the
  `movevm` mode the single process defines it; without clients the nodes do.
* Rates come from cumulative counters: the counter is interpolated linearly between records at
  both ends of the window, and the difference is divided by the window's length. A lost line
  therefore loses no transactions.
* Consensus latency: the `batch_latencies_ms` (seal to commit) reported after the warm-up.
* End-to-end latency: sample transactions joined by id; the client's send time against the
  earliest node event for that id at which the pipeline is done (its `done`, as `node describe`
  says: `commit` where nothing executes, `execute` otherwise), for samples sent inside the window.
* End-to-end throughput: the executor's executed transactions where the pipeline executes;
  where it does not (hotstuff), end-to-end means committed, so it equals consensus throughput.

* CPU per stage (`stage_cpu.py`): cores used and µs of CPU per transaction, beside the wall-clock
  busy share; the machine-aware verdict (`cpu_bound.py`) reads them with the CPU of every process
  (`resources.py`).
* Also per run: per-hop latency of samples (`hops.py`), a capacity projection for a node of
  `project_cores` cores (`projection.py`), the cost per transaction at `instance_price` USD per
  hour per node (`cost.py`) and per-second series per stage (`timeline.py`).

Node-level numbers are averaged over nodes (every honest node processes the same transactions);
queue maxima and invalid/failed/dropped counts take the worst node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from typing import Any

from .bottleneck import KEEPS_UP_RULE, Bottleneck
from .cost import Cost, cost
from .counters import Window, consecutive, in_window, last_number, life_of, rate
from .cpu_bound import cpu_bound
from .errors import HarnessError
from .hops import Hop, hop_latencies
from .json_path import number
from .metrics import ProcessMetrics, Record, RunMetrics
from .pipeline import Pipeline
from .profiles import ProfileSummary
from .projection import DEFAULT_PROJECT_CORES, ONE_PER_CORE, Projection, project
from .resources import Machine, Resources, resources
from .rounds import Rounds, rounds_of
from .samples import first_sends, sample_events
from .stage_cpu import stage_cpu
from .stage_paths import CONSENSUS, SECTION_STAGES, input_channel, output_channel, stages_in
from .stats import LatencyStats, maximum, mean
from .timeline import stage_timelines

WARMUP_FRACTION = 0.1
# Rule thresholds of `find_bottleneck` (shares of the window's wall time or of a rate).
BLOCKED_THRESHOLD = 0.05
FALLS_BEHIND = 0.95
SATURATED_BUSY = 0.8
CLIENT_SHORTFALL = 0.9
KEEPS_UP = 0.95
# Share of the window the mempools held their clients back past which the clients' shortfall is
# the system's back-pressure, not the load generator's limit.
HELD_BACK = 0.05
# Share of rounds that timed out past which a run that kept up pays for it in latency.
TIMED_OUT = 0.01
# Seal-to-commit p50 past which a run that did not keep up was in the collapsed state (batches
# waited longer than the default round timeout).
COLLAPSED_MS = 1000.0
# Processes write a METRICS line a second: a line this close to an end of the window is at it.
LINE_SLACK_MS = 1500.0


class SummaryError(HarnessError):
    """The logs hold too little to summarise a run."""


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


@dataclass(frozen=True)
class StageRow:
    """One stage of the pipeline, averaged over nodes.

    `blocked_share` is the share of the window this stage spent blocked on its full *output*
    channel; `input_blocked_share` is that of its producer on this stage's *input* channel.
    Queue lengths are those of the input channel.
    """

    name: str
    throughput: float | None
    busy_share: float | None
    blocked_share: float | None
    input_channel: str | None
    input_blocked_share: float | None
    input_full: int | None
    queue_mean: float | None
    queue_max: int | None
    batch_size: float | None
    invalid: int | None
    failed: int | None
    dropped: int | None
    # CPU of the stage's threads: cores used, and µs per transaction per node (mean over nodes)
    # and summed over nodes (what one transaction costs the whole committee).
    cpu_cores: float | None = None
    us_per_tx: float | None = None
    us_per_tx_sum: float | None = None


@dataclass(frozen=True)
class Summary:
    config: dict[str, Any]
    # What the node said the run's mode runs (`node describe`).
    pipeline: Pipeline
    window: Window
    consensus: Throughput | None
    end_to_end: Throughput
    clients: ClientStats | None
    stages: tuple[StageRow, ...]
    bottleneck: Bottleneck
    batch_sizes: dict[str, list[float]] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)
    hops: tuple[Hop, ...] = ()
    resources: Resources | None = None
    projection: Projection | None = None
    cost: Cost | None = None
    # Per-second series per stage (see timeline.py).
    timeline: dict[str, Any] = field(default_factory=dict)
    # Filled in from the profile files after the run (see profiles.py), not from METRICS.
    profile: ProfileSummary | None = None
    # Rounds, timeouts and back-pressure over the window (see rounds.py); None without nodes.
    rounds: Rounds | None = None

    @property
    def mode(self) -> str:
        return str(self.config.get("mode", "unknown"))

    def stage(self, name: str) -> StageRow | None:
        return next((row for row in self.stages if row.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["window"]["seconds"] = self.window.seconds
        return data


# ---------------------------------------------------------------------------------------------
# Helpers over records.


def _delta(before: Record, after: Record, path: Sequence[str]) -> float | None:
    start, end = number(before, path), number(after, path)
    return None if start is None or end is None else end - start


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else round(value)


# ---------------------------------------------------------------------------------------------
# The window, throughput and latency.


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
    )


# ---------------------------------------------------------------------------------------------
# The stage table.


def _names(records: Sequence[Record], key: str) -> set[str]:
    names: set[str] = set()
    for record in records:
        value = record.get(key)
        if isinstance(value, dict):
            names.update(str(k) for k in value)
    return names


def _stage_key(order: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    """Stages in the pipeline's order; any it did not describe after them, by name."""

    def key(name: str) -> tuple[int, str]:
        return (order.index(name), name) if name in order else (len(order), name)

    return key


def _stage_of(process: ProcessMetrics, stage: str, channels: set[str], window: Window) -> StageRow:
    records = process.records
    steady = in_window(records, window)
    into = input_channel(stage, channels)
    out = output_channel(stage, channels)

    def channel_share(channel: str | None) -> float | None:
        if channel is None:
            return None
        blocked = rate(records, ("channels", channel, "blocked_ms"), window)
        return None if blocked is None else blocked / 1000.0

    if stage in SECTION_STAGES:
        throughput = rate(records, (CONSENSUS, "committed_txs"), window)
        batches = rate(records, (CONSENSUS, "committed_batches"), window)
        batch_size = (
            throughput / batches
            if stage == CONSENSUS and throughput is not None and batches
            else None
        )
        busy = None
        counts: list[float | None] = [None, None, None]
    else:
        path = ("stages", stage)
        throughput = rate(records, (*path, "items"), window)
        busy_ms = rate(records, (*path, "busy_ms"), window)
        # A multi-threaded stage may report the sum over its threads; `threads` normalises it.
        threads = last_number(records, (*path, "threads")) or 1.0
        busy = None if busy_ms is None else busy_ms / 1000.0 / threads
        batch_size = mean(
            v for r in steady if (v := number(r, (*path, "batch_size_mean"))) is not None and v > 0
        )
        counts = [last_number(records, (*path, key)) for key in ("invalid", "failed", "dropped")]
    queue_mean = None
    queue_max = None
    input_full = None
    if into is not None:
        queue_mean = mean(number(r, ("channels", into, "mean_len")) for r in steady)
        queue_max = maximum(number(r, ("channels", into, "max_len")) for r in steady)
        input_full = last_number(records, ("channels", into, "full"))
    cpu = stage_cpu(records, stage, window)
    return StageRow(
        name=stage,
        throughput=throughput,
        busy_share=busy,
        blocked_share=channel_share(out),
        input_channel=into,
        input_blocked_share=channel_share(into),
        input_full=_int_or_none(input_full),
        queue_mean=queue_mean,
        queue_max=_int_or_none(queue_max),
        batch_size=batch_size,
        invalid=_int_or_none(counts[0]),
        failed=_int_or_none(counts[1]),
        dropped=_int_or_none(counts[2]),
        cpu_cores=cpu.cores,
        us_per_tx=cpu.us_per_tx,
        us_per_tx_sum=cpu.us_per_tx,
    )


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def stage_table(
    processes: Sequence[ProcessMetrics], window: Window, order: Sequence[str]
) -> tuple[StageRow, ...]:
    """One row per stage, averaged over processes, in the pipeline's `order`."""
    per_stage: dict[str, list[StageRow]] = {}
    for process in processes:
        channels = _names(process.records, "channels")
        for stage in stages_in(process.records):
            per_stage.setdefault(stage, []).append(_stage_of(process, stage, channels, window))
    rows = []
    for stage in sorted(per_stage, key=_stage_key(order)):
        items = per_stage[stage]
        rows.append(
            StageRow(
                name=stage,
                throughput=mean(r.throughput for r in items),
                busy_share=mean(r.busy_share for r in items),
                blocked_share=mean(r.blocked_share for r in items),
                input_channel=items[0].input_channel,
                input_blocked_share=mean(r.input_blocked_share for r in items),
                input_full=_int_or_none(maximum(r.input_full for r in items)),
                queue_mean=mean(r.queue_mean for r in items),
                queue_max=_int_or_none(maximum(r.queue_max for r in items)),
                batch_size=mean(r.batch_size for r in items),
                invalid=_int_or_none(maximum(r.invalid for r in items)),
                failed=_int_or_none(maximum(r.failed for r in items)),
                dropped=_int_or_none(maximum(r.dropped for r in items)),
                cpu_cores=mean(r.cpu_cores for r in items),
                us_per_tx=mean(r.us_per_tx for r in items),
                us_per_tx_sum=_sum(r.us_per_tx for r in items),
            )
        )
    return tuple(rows)


def batch_size_series(
    processes: Sequence[ProcessMetrics], window: Window
) -> dict[str, list[float]]:
    """Per-interval batch sizes (transactions per batch) for the batch-size histogram."""
    series: dict[str, list[float]] = {}
    for process in processes:
        steady = in_window(process.records, window)
        for before, after in consecutive(steady):
            txs = _delta(before, after, ("consensus", "committed_txs"))
            batches = _delta(before, after, ("consensus", "committed_batches"))
            if txs is not None and batches:
                series.setdefault("consensus", []).append(txs / batches)
        for record in steady:
            stages = record.get("stages")
            if not isinstance(stages, dict):
                continue
            for stage in stages:
                value = number(record, ("stages", stage, "batch_size_mean"))
                if value is not None and value > 0:
                    series.setdefault(stage, []).append(value)
    return series


# ---------------------------------------------------------------------------------------------
# The limiting stage.


def find_bottleneck(
    stages: Sequence[StageRow],
    end_to_end: Throughput,
    clients: ClientStats | None,
    consensus: Throughput | None,
    machines: Sequence[Machine] = (),
    *,
    rounds: Rounds | None = None,
) -> Bottleneck:
    """Name the component that limited the run, with the numbers that show it.

    The rules, first match wins:

    0. CPU. When a machine's processes used at least 90 % of its cores and the system did not
       keep up (rule 3), the run is CPU-bound, and the stage costing the most CPU per
       transaction (summed over nodes) is named, with a second line for any stage within 10 %
       of it (`cpu_bound.py`). On shared cores the rules below cannot tell a slow stage from one
       waiting for a core. Logs without CPU counters skip this rule.
    1. Back-pressure. Stages are joined by bounded channels that record the time their producer
       spent blocked because the channel was full. A stage whose producer was blocked on its input
       for at least BLOCKED_THRESHOLD (5 %) of the window could not keep up with its input. A slow
       stage fills its input, which blocks its producer, whose own input then fills, and so on
       upstream, so when several channels are blocked the *most downstream* such stage is the
       cause; the others are victims.
    2. The load generator. If the clients sent less than CLIENT_SHORTFALL (90 %) of their target
       rate, they could not generate the load (e.g. CPU shared with the nodes): the system was not
       pushed to the requested rate and the clients are the limit, but only if the system kept up
       with what they did send (rule 3). If it did not, something inside limits the run even at
       the lower rate: the rules below name it, and a note says the clients fell short too.
       Clients the nodes held back (their mempools at their bound for at least HELD_BACK, 5 %, of
       the window) did not fall short on their own: the system pushed back, so it is held to the
       rate asked, and the rules inside name what limited it.
    3. The offered load. If end-to-end throughput reached KEEPS_UP (95 %) of what the clients
       sent, the system kept up: nothing inside it limited the run; raise the rate. Unless at
       least TIMED_OUT (1 %) of the rounds timed out: the load went through, but late, and the
       verdict names the timeouts and whose rounds they were (latency is the symptom).
    4. Falling behind. Input channels are deep (the consensus output holds `channel_capacity`
       whole batches), so a slow stage can fall behind for a whole run without ever filling its
       input. The first stage, in pipeline order, whose throughput is below FALLS_BEHIND (95 %)
       of the stage before it while its input queue holds work is the limit: everything it did
       not process is still waiting in front of it. Its busy share tells whether it was short of
       work time (busy near 100 %) or of CPU (busy lower: threads waiting for a core that other
       processes on the machine hold).
    5. Saturation without back-pressure. The stage with the highest busy share, if it is at least
       SATURATED_BUSY (80 %), is working almost all the time and limits the run (its input is not
       bounded by a measured channel, or it is the last stage).
    6. Consensus. Otherwise every measured stage has slack and no channel backs up, yet the
       system does not keep up with the load: ordering and dissemination (HotStuff, mempool,
       network) limit the rate at which transactions reach the pipeline.
    """
    held_back = rounds is not None and (rounds.backpressure_share or 0.0) >= HELD_BACK
    verdict = _inside_the_system(
        stages, end_to_end, clients, consensus, machines, held_back=held_back
    )
    if verdict.kept_up and rounds is not None and rounds.timeout_share >= TIMED_OUT:
        verdict = _timeouts(rounds, end_to_end, verdict)
    notes = list(verdict.notes)
    shortfall = _client_shortfall(clients)
    if shortfall is not None and held_back and rounds is not None:
        notes.append(
            f"the mempools held their clients back {rounds.backpressure_share:.0%} of the window:"
            " the committee ran at its capacity, and the clients' shortfall is its back-pressure."
        )
    elif shortfall is not None and verdict.stage != "client":
        notes.append(shortfall)
    collapsed = _collapsed(verdict, consensus, rounds, held_back)
    if collapsed is not None:
        notes.append(collapsed)
    return replace(verdict, notes=tuple(notes))


def _timeouts(rounds: Rounds, end_to_end: Throughput, kept_up: Bottleneck) -> Bottleneck:
    """Rule 3's exception: the load went through, but timed-out rounds delayed it."""
    blamed = ", ".join(f"{leader} x{n}" for leader, n in rounds.timed_out_leaders.items())
    p50 = end_to_end.latency.p50_ms if end_to_end.latency.count else None
    return Bottleneck(
        stage="consensus",
        rule="timeouts",
        explanation=(
            f"it kept up with the load ({kept_up.explanation.split(':')[0]}), but "
            f"{rounds.timeouts:,.0f} of {rounds.rounds:,.0f} rounds timed out "
            f"({rounds.timeout_share:.1%}"
            + (f"; leaders {blamed}" if blamed else "")
            + "): latency is the symptom"
            + (f" (end-to-end p50 {p50:,.0f} ms)." if p50 is not None else ".")
        ),
        evidence={
            **kept_up.evidence,
            "timed_out_share": rounds.timeout_share,
            "rounds_per_s": rounds.rounds_per_second,
        },
    )


def _collapsed(
    verdict: Bottleneck, consensus: Throughput | None, rounds: Rounds | None, held_back: bool
) -> str | None:
    """The note on a run that did not keep up and let its batches queue: the collapsed state
    the back-pressure exists to prevent (latency grows with the queue, and the queue with it)."""
    if verdict.kept_up or held_back or consensus is None or consensus.latency.count == 0:
        return None
    p50 = consensus.latency.p50_ms
    if p50 is None or p50 < COLLAPSED_MS:
        return None
    pace = f" at {rounds.rounds_per_second:,.1f} rounds/s" if rounds is not None else ""
    return (
        f"collapsed: batches waited p50 {p50 / 1000:,.1f} s from seal to commit{pace}, longer"
        " than a round's timeout, and the mempools did not hold the clients back: the queue grew."
    )


def _inside_the_system(
    stages: Sequence[StageRow],
    end_to_end: Throughput,
    clients: ClientStats | None,
    consensus: Throughput | None,
    machines: Sequence[Machine],
    *,
    held_back: bool,
) -> Bottleneck:
    """`find_bottleneck`'s rules, before the notes."""
    offered = _offered_load(end_to_end, clients, held_back)
    first = (
        _cpu_rule(stages, offered, machines)
        or _back_pressure(stages)
        or offered
        or _falls_behind(stages)
    )
    if first is not None:
        return first
    busy = [row for row in stages if row.busy_share is not None]
    if busy:
        row = max(busy, key=lambda r: r.busy_share or 0.0)
        if (row.busy_share or 0.0) >= SATURATED_BUSY:
            return Bottleneck(
                stage=row.name,
                rule="saturated",
                explanation=f"{row.name} was busy {row.busy_share:.0%} of the time.",
                evidence={
                    f"{row.name}_busy_share": row.busy_share or 0.0,
                    f"{row.name}_tps": row.throughput or 0.0,
                },
            )
    if consensus is None:
        # No consensus (movevm): the busiest stage is the best candidate even below saturation.
        row = max(busy, key=lambda r: r.busy_share or 0.0) if busy else None
        return Bottleneck(
            stage=row.name if row else "unknown",
            rule="busiest",
            explanation=(
                f"{row.name} was the busiest stage ({row.busy_share:.0%})."
                if row
                else "no stage reported its busy time."
            ),
            evidence={f"{row.name}_busy_share": row.busy_share or 0.0} if row else {},
        )
    evidence = {
        f"{row.name}_busy_share": row.busy_share for row in busy if row.busy_share is not None
    }
    evidence["consensus_tps"] = consensus.tps
    if clients is not None:
        evidence["sent_tps"] = clients.sent_tps
    slack = ", ".join(f"{r.name} busy {r.busy_share:.0%}" for r in busy if r.busy_share is not None)
    return Bottleneck(
        stage="consensus",
        rule="ordering",
        explanation=(
            "no channel backs up and no stage is saturated"
            + (f" ({slack})" if slack else "")
            + ", yet the system does not keep up with the load: "
            "ordering and dissemination limit it."
        ),
        evidence=evidence,
    )


# ---------------------------------------------------------------------------------------------


def _cpu_rule(
    stages: Sequence[StageRow], offered: Bottleneck | None, machines: Sequence[Machine]
) -> Bottleneck | None:
    """Rule 0 of `find_bottleneck`: a saturated machine, unless the system kept up."""
    if offered is not None and offered.kept_up:
        return None
    costs = {r.name: r.us_per_tx_sum for r in stages if r.us_per_tx_sum is not None}
    return cpu_bound(costs, machines)


def _back_pressure(stages: Sequence[StageRow]) -> Bottleneck | None:
    """Rule 1 of `find_bottleneck`: the most downstream stage whose producer was blocked."""
    blocked = [
        row
        for row in stages
        if row.input_blocked_share is not None and row.input_blocked_share >= BLOCKED_THRESHOLD
    ]
    if blocked:
        row = blocked[-1]
        producer = row.input_channel.split("->")[0] if row.input_channel else "producer"
        evidence = {f"{producer}_blocked_share": row.input_blocked_share or 0.0}
        if row.busy_share is not None:
            evidence[f"{row.name}_busy_share"] = row.busy_share
        if row.throughput is not None:
            evidence[f"{row.name}_tps"] = row.throughput
        if row.queue_mean is not None:
            evidence[f"{row.name}_queue_mean"] = row.queue_mean
        busy = "" if row.busy_share is None else f" while {row.name} was busy {row.busy_share:.0%}"
        return Bottleneck(
            stage=row.name,
            rule="back-pressure",
            explanation=(
                f"{producer} was blocked on the full {row.input_channel} channel "
                f"{row.input_blocked_share:.0%} of the time{busy}: {row.name} cannot keep up "
                "with its input."
            ),
            evidence=evidence,
        )
    return None


def _offered_load(
    end_to_end: Throughput, clients: ClientStats | None, held_back: bool = False
) -> Bottleneck | None:
    """Rules 2 and 3 of `find_bottleneck`: the clients fell short, or the system kept up."""
    if clients is None or clients.target_tps <= 0:
        return None
    # Held back by the nodes, the clients sent what the system took: only the rate asked tells
    # whether it kept up.
    if held_back and end_to_end.tps < KEEPS_UP * clients.target_tps:
        return None
    kept_up = end_to_end.tps >= KEEPS_UP * clients.sent_tps
    # Clients that fell short limit the run only if the system took all they sent: when it did
    # not, it would not have taken more either (a committee that falls behind what the clients
    # send is the limit, however far the clients fell short of the rate asked).
    if clients.sent_tps < CLIENT_SHORTFALL * clients.target_tps and kept_up:
        return Bottleneck(
            stage="client",
            rule="load generator",
            explanation=(
                f"the clients sent {clients.sent_tps:,.0f} tx/s of the "
                f"{clients.target_tps:,.0f} tx/s asked ({clients.missed_bursts} late bursts): "
                "the load generator is the limit."
            ),
            evidence={
                "sent_tps": clients.sent_tps,
                "target_tps": clients.target_tps,
                "missed_bursts": float(clients.missed_bursts),
            },
        )
    if kept_up:
        return Bottleneck(
            stage="offered load",
            rule=KEEPS_UP_RULE,
            explanation=(
                f"end-to-end {end_to_end.tps:,.0f} tx/s matches the "
                f"{clients.sent_tps:,.0f} tx/s sent: nothing inside limited the run; "
                "raise --rate to find the limit."
            ),
            evidence={"e2e_tps": end_to_end.tps, "sent_tps": clients.sent_tps},
        )
    return None


def _client_shortfall(clients: ClientStats | None) -> str | None:
    """The note added to a verdict inside the system when the clients fell short as well."""
    if clients is None or clients.target_tps <= 0:
        return None
    if clients.sent_tps >= CLIENT_SHORTFALL * clients.target_tps:
        return None
    return (
        f"the clients also fell short: they sent {clients.sent_tps:,.0f} tx/s of the "
        f"{clients.target_tps:,.0f} tx/s asked ({clients.missed_bursts} late bursts), but the "
        "system did not keep up even with that."
    )


def _falls_behind(stages: Sequence[StageRow]) -> Bottleneck | None:
    """Rule 4 of `find_bottleneck`: the first stage that processes less than its input."""
    for upstream, row in pairwise(stages):
        if upstream.throughput is None or row.throughput is None or upstream.throughput <= 0:
            continue
        if row.throughput < FALLS_BEHIND * upstream.throughput and (row.queue_mean or 0.0) >= 1.0:
            busy_note = (
                "" if row.busy_share is None else f"; it was busy {row.busy_share:.0%} of the time"
            )
            evidence = {
                f"{upstream.name}_tps": upstream.throughput,
                f"{row.name}_tps": row.throughput,
                f"{row.name}_queue_mean": row.queue_mean or 0.0,
            }
            if row.busy_share is not None:
                evidence[f"{row.name}_busy_share"] = row.busy_share
            return Bottleneck(
                stage=row.name,
                rule="falls behind",
                explanation=(
                    f"{row.name} processed {row.throughput:,.0f} tx/s of the "
                    f"{upstream.throughput:,.0f} tx/s {upstream.name} gave it, and its input queue "
                    f"held {row.queue_mean:.1f} batches on average{busy_note}."
                ),
                evidence=evidence,
            )
    return None


def summarize(
    run: RunMetrics, config: dict[str, Any], warmup_fraction: float = WARMUP_FRACTION
) -> Summary:
    pipeline = run.described()
    mode = str(config.get("mode") or pipeline.mode)
    if mode != pipeline.mode:
        raise SummaryError(f"the run is of mode {mode}, but its pipeline is {pipeline.mode}'s")
    window = steady_window(run, warmup_fraction)
    clients_stats: ClientStats | None = None
    consensus: Throughput | None = None
    counted: Sequence[ProcessMetrics] = ()
    processes = run.pipeline_processes()
    if not processes:
        raise SummaryError(f"no {pipeline.process} METRICS records in the logs")
    if not pipeline.consensus:
        tps = mean(executed_rate(p, window) for p in processes) or 0.0
        end_to_end = Throughput(tps=tps, bps=None, latency=LatencyStats.of([]))
    else:
        counted, up = rate_nodes(processes, window)
        consensus = replace(
            consensus_throughput(processes, counted, window),
            nodes_counted=up,
            nodes=len(processes),
        )
        latencies, sent = sample_latencies(run.clients, run.nodes, pipeline.done, window)
        if not pipeline.executes:
            end_to_end = replace(consensus, latency=LatencyStats.of(latencies))
        else:
            tps = mean(executed_rate(p, window) for p in counted) or 0.0
            size = bytes_per_tx(processes)
            bps = tps * size if size is not None else None
            end_to_end = replace(consensus, tps=tps, bps=bps, latency=LatencyStats.of(latencies))
        if run.clients:
            clients_stats = client_stats(run.clients, window, len(latencies), sent)
    stages = stage_table(processes, window, pipeline.stages)
    used = resources(run, window, _local_cores(config), _hosts(config))
    rounds = rounds_of(run.nodes, counted, window) if consensus is not None else None
    project_cores = int(config.get("project_cores") or DEFAULT_PROJECT_CORES)
    price = config.get("instance_price")
    instances = int(config.get("nodes") or len(run.nodes) or 1) if pipeline.consensus else 1
    return Summary(
        config={**config, "mode": mode},
        pipeline=pipeline,
        window=window,
        consensus=consensus,
        end_to_end=end_to_end,
        clients=clients_stats,
        stages=stages,
        bottleneck=find_bottleneck(
            stages, end_to_end, clients_stats, consensus, used.machines, rounds=rounds
        ),
        rounds=rounds,
        hops=hop_latencies(run.clients, run.nodes, window, pipeline.done) if run.nodes else (),
        resources=used,
        projection=_with_caveat(
            project(
                {r.name: r.us_per_tx for r in stages if r.us_per_tx is not None},
                project_cores,
                _verifier_threads(config),
                _executor_threads(config),
            ),
            config,
            len(run.nodes),
        ),
        cost=None if price is None else cost(float(price), instances, end_to_end.tps),
        timeline=stage_timelines(processes, window.load_start_ms),
        batch_sizes=batch_size_series(processes, window),
        processes={
            "nodes": len(run.nodes),
            "clients": len(run.clients),
            "movevm": len(run.movevm),
            "malformed_lines": run.malformed_lines,
        },
    )


def _local_cores(config: dict[str, Any]) -> int | None:
    """The cores of the machine a local run used (the runner reads them: `os.cpu_count()`)."""
    cores = config.get("cores")
    return int(cores) if isinstance(cores, int | float) and cores > 0 else None


def _with_caveat(
    projection: Projection | None, config: dict[str, Any], nodes: int
) -> Projection | None:
    """Says so when the costs were measured with several nodes on one machine's cores."""
    cores = _local_cores(config)
    if projection is None or config.get("where") != "local" or nodes < 2 or cores is None:
        return projection
    caveat = (
        f"µs/tx measured with {nodes} nodes sharing {cores} cores include the cost of sharing"
        " them: the projection errs low"
    )
    return replace(projection, caveat=caveat)


def _verifier_threads(config: dict[str, Any]) -> int | None:
    """The verifier threads the run fixed (`--verifier-threads`), else None (one per core)."""
    threads = config.get("verifier_threads")
    return int(threads) if isinstance(threads, int | float) and threads > 0 else None


def _executor_threads(config: dict[str, Any]) -> int:
    """The executor's threads: 1 when it runs sequentially, else `--exec-threads`, or one per
    core when the run did not fix them."""
    if config.get("exec") in (None, "sequential"):
        return 1
    threads = config.get("exec_threads")
    return int(threads) if isinstance(threads, int | float) and threads > 0 else ONE_PER_CORE


def _hosts(config: dict[str, Any]) -> list[str]:
    hosts = config.get("hosts")
    return [str(h) for h in hosts] if isinstance(hosts, list) else []
