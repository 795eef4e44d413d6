"""The stage table: one row per stage of the pipeline, averaged over nodes, in the order the
node describes (throughput, busy and blocked shares, queues, counts, CPU)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ...json_path import number
from ..counters import Window, consecutive, in_window, last_number, rate
from ..metrics import ProcessMetrics, Record
from ..stats import maximum, mean
from .cpu import stage_cpu
from .paths import CONSENSUS, SECTION_STAGES, input_channel, output_channel, stages_in


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


def _delta(before: Record, after: Record, path: Sequence[str]) -> float | None:
    start, end = number(before, path), number(after, path)
    return None if start is None or end is None else end - start


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else round(value)


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
