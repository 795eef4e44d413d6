"""What the experiments read from a run's summary, and the capacity of a sweep.

A sweep's capacity is the highest rate asked whose runs kept up: every one of them processed
(delivered, and run to an abort) at least `KEEPS_UP` of the rate. A configuration with a search
(`search.py`) narrows the step at the edge until that rate has at least five runs. Everything
said of a capacity is the median over the runs at that rate. A run without a rate to keep up with
(`movevm` runs as fast as it can) is its own capacity: the median of what its runs delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

from ..analysis.run_summary import Summary

Measure = Callable[[Summary], float | None]

# A run keeps up when it delivered at least this share of the rate asked.
KEEPS_UP = 0.95


def by_rate(summaries: Sequence[Summary]) -> dict[int, list[Summary]]:
    rates: dict[int, list[Summary]] = {}
    for summary in summaries:
        rates.setdefault(int(summary.config.get("rate") or 0), []).append(summary)
    return dict(sorted(rates.items()))


def median_of(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def fmt(value: float | None, digits: int = 0, suffix: str = "") -> str:
    """A figure as the pages print it; `-` for one the runs did not give."""
    return "-" if value is None else f"{value:,.{digits}f}{suffix}"


def spread(values: Sequence[float | None], digits: int = 0) -> str:
    """`median (min-max)` of the figures the runs gave; `-` when none gave one."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    low, mid, high = (fmt(v, digits) for v in (min(present), median(present), max(present)))
    return f"{mid} ({low}-{high})"


def over_runs(values: Sequence[float | None], digits: int = 0, suffix: str = "") -> str:
    """One run's figure as it is; several runs' as `median (min-max)`, so a page that repeats
    its runs shows their spread."""
    present = [v for v in values if v is not None]
    if len(present) <= 1:
        return fmt(present[0] if present else None, digits, suffix)
    return spread(present, digits) + suffix


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def ratio(ours: float | None, theirs: float | None, digits: int = 2) -> str:
    return "-" if ours is None or not theirs else f"{ours / theirs:.{digits}f}"


# -- Measures of one run -------------------------------------------------------------------------


def delivered(summary: Summary) -> float:
    """End-to-end tx/s (executed; committed in `hotstuff`)."""
    return summary.end_to_end.tps


def processed(summary: Summary) -> float:
    """Tx/s the pipeline got through: the executor stage's, which counts the transactions it ran
    to an abort (a SmallBank payment without the funds) as delivered tx/s does not; delivered
    where nothing executes."""
    row = summary.stage("executor")
    if row is not None and row.throughput is not None:
        return row.throughput
    return summary.end_to_end.tps


def projection_tps(summary: Summary) -> float | None:
    """The capacity projection for a node of `project_cores` cores
    (`analysis/stages/projection.py`)."""
    return summary.projection.tps if summary.projection is not None else None


def projection_cores(summary: Summary) -> int | None:
    return summary.projection.cores if summary.projection is not None else None


def node_us_per_tx(summary: Summary) -> float | None:
    """CPU of one node (all its threads) per transaction it delivered, in µs."""
    used = summary.resources.nodes.cpu_cores if summary.resources else None
    tps = summary.end_to_end.tps
    return None if used is None or tps <= 0 else used * 1e6 / tps


def stage_us_per_tx(stage: str) -> Measure:
    def measure(summary: Summary) -> float | None:
        row = summary.stage(stage)
        return row.us_per_tx if row is not None else None

    return measure


def rounds_per_second(summary: Summary) -> float | None:
    return summary.rounds.rounds_per_second if summary.rounds is not None else None


def txs_per_round(summary: Summary) -> float | None:
    """Transactions ordered per round."""
    rounds = rounds_per_second(summary)
    if not rounds or summary.consensus is None:
        return None
    return summary.consensus.tps / rounds


def sent_per_tx(summary: Summary) -> float | None:
    """Bytes a node sent to the committee per transaction ordered."""
    traffic, consensus = summary.traffic, summary.consensus
    if traffic is None or consensus is None or consensus.tps <= 0:
        return None
    return traffic.sent_bytes_per_s / consensus.tps


def txs_per_batch(summary: Summary) -> float | None:
    """Transactions per committed batch (the consensus stage's batch size)."""
    row = summary.stage("consensus")
    return row.batch_size if row is not None else None


def batch_bytes(summary: Summary) -> float | None:
    """Bytes per committed batch: transactions per batch times bytes per transaction."""
    txs, consensus = txs_per_batch(summary), summary.consensus
    if txs is None or consensus is None or consensus.bps is None or consensus.tps <= 0:
        return None
    return txs * consensus.bps / consensus.tps


def batch_fill(summary: Summary) -> float | None:
    """Share of the batch size limit a committed batch filled; None unless the run set
    `batch_size` (the node's default is not in the run's configuration)."""
    limit = summary.config.get("batch_size")
    size = batch_bytes(summary)
    if size is None or not isinstance(limit, int | float) or limit <= 0:
        return None
    return size / float(limit)


def batches_per_round(summary: Summary) -> float | None:
    txs, rounds = txs_per_batch(summary), rounds_per_second(summary)
    consensus = summary.consensus
    if not txs or not rounds or consensus is None:
        return None
    return consensus.tps / txs / rounds


def e2e_p50(summary: Summary) -> float | None:
    return summary.end_to_end.latency.p50_ms


def e2e_p99(summary: Summary) -> float | None:
    return summary.end_to_end.latency.p99_ms


def held_back(summary: Summary) -> float | None:
    """Share of the run the mempools held their clients back: their bytes sealed but not yet
    committed were at the bound (`--max-uncommitted-bytes`)."""
    return summary.rounds.backpressure_share if summary.rounds else None


def consensus_p50(summary: Summary) -> float | None:
    return summary.consensus.latency.p50_ms if summary.consensus is not None else None


def consensus_p99(summary: Summary) -> float | None:
    return summary.consensus.latency.p99_ms if summary.consensus is not None else None


# -- The capacity of a sweep ---------------------------------------------------------------------


def asked(summary: Summary) -> int | None:
    """The rate a run was asked for; None where nothing offers a rate (`movevm`)."""
    if not summary.pipeline.consensus:
        return None
    rate = summary.config.get("rate")
    return int(rate) if isinstance(rate, int | float) and rate > 0 else None


@dataclass(frozen=True)
class Capacity:
    # The highest rate kept up; None for runs that saturate on their own (`movevm`).
    rate: int | None
    # The runs at that rate.
    runs: tuple[Summary, ...]
    # The highest rate the sweep asked: a capacity equal to it may lie higher.
    top: int | None

    @property
    def delivered(self) -> float:
        return median(delivered(s) for s in self.runs)

    @property
    def at_top(self) -> bool:
        return self.rate is not None and self.rate == self.top

    def median(self, measure: Measure) -> float | None:
        return median_of([measure(s) for s in self.runs])

    def describe(self) -> str:
        """The capacity as a page prints it: the rate, `≥` when the sweep stopped there."""
        if self.rate is None:
            return fmt(self.delivered)
        return ("≥ " if self.at_top else "") + fmt(self.rate)


def kept_up_at(runs: Sequence[Summary], rate: int) -> bool:
    """Every run at `rate` processed at least `KEEPS_UP` of it."""
    return bool(runs) and all(processed(s) >= KEEPS_UP * rate for s in runs)


def capacity(summaries: Sequence[Summary]) -> Capacity | None:
    """The sweep's capacity; None without runs, or when no rate asked was kept up."""
    if not summaries:
        return None
    if any(asked(s) is None for s in summaries):
        return Capacity(rate=None, runs=tuple(summaries), top=None)
    rates = by_rate(summaries)
    kept = [rate for rate, runs in rates.items() if kept_up_at(runs, rate)]
    if not kept:
        return None
    rate = max(kept)
    return Capacity(rate=rate, runs=tuple(rates[rate]), top=max(rates))


def common_rate(*sweeps: Sequence[Summary]) -> int | None:
    """The highest rate asked in every sweep and kept up in each: where they carry the same
    load."""
    kept: set[int] | None = None
    for summaries in sweeps:
        rates = {r for r, runs in by_rate(summaries).items() if r > 0 and kept_up_at(runs, r)}
        kept = rates if kept is None else kept & rates
    return max(kept) if kept else None


def at_rate(summaries: Sequence[Summary], rate: int) -> list[Summary]:
    return by_rate(summaries).get(rate, [])
