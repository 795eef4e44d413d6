"""What the experiments read from a run's summary, the capacity of a sweep, and how two sets of
runs compare.

A sweep's capacity is the highest rate asked at which every run kept up by `CAPACITY_RULE`
(`Rule`): it processed at least 95 % of the rate over the steady window (counted up to what its
clients offered in that window), its clients were held back at most 5 % of the window, and its
end-to-end p50 was at most three times the unloaded p50 (the sweep's lowest rate's). A
configuration with a search (`search.py`) narrows the step at the edge until that rate has at
least five runs. Everything said of a capacity is the median over the runs at that rate. A run
without a rate to keep up with (`movevm` runs as fast as it can) is its own capacity: the median
of what its runs delivered.

Two sets of runs are compared by their spans (`compare`): the range of what their runs gave, or
for a capacity the rates it lies between (the capacity and the next rate asked, which did not
hold). They are apart when the spans do not overlap, overlapping when they do, and not settled
when either has too few runs or a capacity lies at the top of its sweep where the other might
reach it. Pages write their verdicts from that, never above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean, median

from ..analysis.run_summary import Summary
from ..analysis.throughput import at_most_offered

Measure = Callable[[Summary], float | None]

# The capacity rule: a run kept up when (a) it processed at least `KEEPS_UP` of the rate asked,
# (b) its clients were held back at most `HELD_BACK_AT_MOST` of the window, and (c) its
# end-to-end p50 was at most `P50_AT_MOST` times the unloaded p50.
KEEPS_UP = 0.95
HELD_BACK_AT_MOST = 0.05
# 3x: an open queue's wait is three times its service time at two thirds of its capacity, so
# a p50 past 3x is queueing, not service; 2x sits inside this machine's run-to-run noise (the
# same hotcrypto sweep's p50 moves 75 -> 151 ms from 960 to 24,000 tx/s with nothing queued).
P50_AT_MOST = 3.0
CAPACITY_RULE = (
    "A run kept up with the rate asked when (a) it delivered at least 95 % of it over the steady"
    " window, counting no more than its clients offered in that window (a backlog from before"
    " the window is not its throughput); (b) its clients were held back at most 5 % of the"
    " window (the bursts they skipped because their node had not yet taken the one before; the"
    " mempools' back-pressure share for runs whose clients did not count them); and (c) its"
    " end-to-end p50 was at most 3x the unloaded p50, the median p50 of the runs at the"
    " sweep's lowest rate. A sweep's capacity is the highest rate asked at which every run"
    " kept up; the peak mean delivered (the report's metric) is the highest mean delivered of"
    " any rate of the sweep."
)


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
    """End-to-end tx/s (executed; committed in `hotstuff`) over the steady window, counted up to
    what the clients offered in it (`throughput.at_most_offered`)."""
    return at_most_offered(summary.end_to_end.tps, summary.clients)


def processed(summary: Summary) -> float:
    """Tx/s the pipeline got through: the executor stage's, which counts the transactions it ran
    to an abort (a SmallBank payment without the funds) as delivered tx/s does not; delivered
    where nothing executes. Counted up to what the clients offered in the window."""
    row = summary.stage("executor")
    if row is not None and row.throughput is not None:
        return at_most_offered(row.throughput, summary.clients)
    return delivered(summary)


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


def mempools_held_back(summary: Summary) -> float | None:
    """Share of the window the mempools held their clients back: their bytes sealed but not yet
    committed were at the bound (`--max-uncommitted-bytes`)."""
    return summary.rounds.backpressure_share if summary.rounds else None


def held_back(summary: Summary) -> float | None:
    """Share of the window the clients were held back, as the capacity rule counts it: the
    bursts they skipped because their node had not taken the one before, whatever held it (the
    mempools' bound, a full queue from the clients' port, a node short of CPU); the mempools'
    share for clients that did not count skipped bursts."""
    clients = summary.clients.held_back_share if summary.clients else None
    return clients if clients is not None else mempools_held_back(summary)


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


def valid_asked(summary: Summary) -> int | None:
    """The rate of valid transactions a run was asked for: the rate, less the share its clients
    forged (`--invalid-share`)."""
    rate = asked(summary)
    share = summary.config.get("invalid_share")
    if rate is None or not isinstance(share, int | float):
        return rate
    return round(rate * (1 - share))


@dataclass(frozen=True)
class Rule:
    """`CAPACITY_RULE` for one sweep: the unloaded p50 its runs' latency is held to."""

    # The median end-to-end p50 of the runs at the sweep's lowest rate, and that rate.
    unloaded_p50: float | None = None
    unloaded_rate: int | None = None

    @classmethod
    def of(cls, summaries: Sequence[Summary]) -> Rule:
        rates = {r: runs for r, runs in by_rate(summaries).items() if r > 0}
        if not rates:
            return cls()
        lowest = min(rates)
        p50 = median_of([e2e_p50(s) for s in rates[lowest]])
        # A p50 at or below zero says the processes' clocks disagree (a sample's send and commit
        # are stamped by different processes): no latency to hold the sweep to.
        return cls(p50 if p50 is not None and p50 > 0 else None, lowest)

    def failed(self, summary: Summary, rate: int | None = None) -> list[str]:
        """The conditions of the rule (`a`, `b`, `c`) the run did not meet at `rate` (by default
        the valid transactions it was asked for: a forged one is never delivered); empty when it
        kept up."""
        rate = rate if rate is not None else valid_asked(summary)
        if rate is None:
            return []
        failed = []
        if processed(summary) < KEEPS_UP * rate:
            failed.append("a")
        held = held_back(summary)
        if held is not None and held > HELD_BACK_AT_MOST:
            failed.append("b")
        p50 = e2e_p50(summary)
        if self.unloaded_p50 is not None and (p50 is None or p50 > P50_AT_MOST * self.unloaded_p50):
            failed.append("c")
        return failed

    def kept_up(self, summary: Summary, rate: int | None = None) -> bool:
        return not self.failed(summary, rate)

    def describe(self) -> str:
        """The unloaded p50 the sweep was held to, as a page prints it."""
        if self.unloaded_p50 is None or self.unloaded_rate is None:
            return "no unloaded p50 (no usable latency samples at the lowest rate): (c) not applied"
        return (
            f"unloaded p50 {fmt(self.unloaded_p50)} ms (at {fmt(self.unloaded_rate)} tx/s, the"
            f" lowest rate), so (c) is p50 ≤ {fmt(P50_AT_MOST * self.unloaded_p50)} ms"
        )


@dataclass(frozen=True)
class Capacity:
    # The highest rate kept up; None for runs that saturate on their own (`movevm`).
    rate: int | None
    # The runs at that rate.
    runs: tuple[Summary, ...]
    # The highest rate the sweep asked: a capacity equal to it may lie higher.
    top: int | None
    # The rule the runs were held to, and the lowest rate asked above the capacity (which did
    # not hold: the capacity lies below it).
    rule: Rule = Rule()
    above: int | None = None

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


def kept_up_at(runs: Sequence[Summary], rate: int, rule: Rule | None = None) -> bool:
    """Every run at `rate` kept up by `rule` (that of `runs` alone when not given)."""
    rule = rule or Rule.of(runs)
    return bool(runs) and all(rule.kept_up(s, rate) for s in runs)


def capacity(summaries: Sequence[Summary]) -> Capacity | None:
    """The sweep's capacity; None without runs, or when no rate asked was kept up."""
    if not summaries:
        return None
    if any(asked(s) is None for s in summaries):
        return Capacity(rate=None, runs=tuple(summaries), top=None)
    rule = Rule.of(summaries)
    rates = by_rate(summaries)
    kept = [rate for rate, runs in rates.items() if kept_up_at(runs, rate, rule)]
    if not kept:
        return None
    rate = max(kept)
    above = min((r for r in rates if r > rate), default=None)
    return Capacity(rate=rate, runs=tuple(rates[rate]), top=max(rates), rule=rule, above=above)


def peak_mean(summaries: Sequence[Summary]) -> tuple[int | None, float] | None:
    """The report's metric: the highest mean delivered of any rate of the sweep, with that
    rate (None for runs without one, `movevm`); None without runs."""
    rates: dict[int | None, list[float]] = {}
    for summary in summaries:
        rates.setdefault(asked(summary), []).append(delivered(summary))
    if not rates:
        return None
    rate = max(rates, key=lambda r: fmean(rates[r]))
    return rate, fmean(rates[rate])


def common_rate(*sweeps: Sequence[Summary]) -> int | None:
    """The highest rate asked in every sweep and kept up in each: where they carry the same
    load."""
    kept: set[int] | None = None
    for summaries in sweeps:
        rule = Rule.of(summaries)
        rates = {r for r, runs in by_rate(summaries).items() if r > 0 and kept_up_at(runs, r, rule)}
        kept = rates if kept is None else kept & rates
    return max(kept) if kept else None


def at_rate(summaries: Sequence[Summary], rate: int) -> list[Summary]:
    return by_rate(summaries).get(rate, [])


# -- Comparing two sets of runs ------------------------------------------------------------------

APART = "apart"
OVERLAPPING = "overlapping"
NOT_SETTLED = "not settled"
# Fewer runs than this on either side settle nothing.
SETTLING_RUNS = 3


@dataclass(frozen=True)
class Span:
    """Where a figure lies by a set of runs: between `low` and `high` (`high` None: open above,
    a capacity at its sweep's highest rate), `high` itself excluded for a capacity (the next
    rate asked, which did not hold)."""

    low: float
    high: float | None
    runs: int
    high_excluded: bool = False

    def text(self) -> str:
        if self.high is None:
            return f"≥ {fmt(self.low)}"
        if self.high_excluded:
            return f"{fmt(self.low)} to below {fmt(self.high)}"
        return f"{fmt(self.low)}-{fmt(self.high)}"

    def below(self, other: Span) -> bool:
        """Every value this span allows is under every value `other` allows."""
        if self.high is None:
            return False
        return self.high <= other.low if self.high_excluded else self.high < other.low


def runs_span(values: Sequence[float | None]) -> Span | None:
    """The range of what the runs gave; None when none gave a figure."""
    present = [v for v in values if v is not None]
    return Span(min(present), max(present), len(present)) if present else None


def capacity_span(summaries: Sequence[Summary]) -> Span | None:
    """Where a sweep's capacity lies: from the capacity to the next rate asked above it (open
    when it is the sweep's highest), or below the lowest rate asked when none kept up; None
    without runs or for runs without a rate."""
    rates = by_rate(summaries)
    if not rates or any(asked(s) is None for s in summaries):
        return None
    found = capacity(summaries)
    if found is None or found.rate is None:
        lowest = min(rates)
        return Span(0, lowest, len(rates[lowest]), high_excluded=True)
    return Span(found.rate, found.above, len(found.runs), high_excluded=True)


@dataclass(frozen=True)
class Comparison:
    verdict: str
    # With APART, which of the two (0 or 1) is the higher; None otherwise.
    higher: int | None = None
    why: str = ""


def compare(a: Span | None, b: Span | None) -> Comparison:
    """Whether two sets of runs are apart, overlapping, or not settled (see the module's
    description)."""
    if a is None or b is None:
        return Comparison(NOT_SETTLED, why="one side has no runs")
    if min(a.runs, b.runs) < SETTLING_RUNS:
        return Comparison(NOT_SETTLED, why=f"fewer than {SETTLING_RUNS} runs on a side")
    if a.below(b):
        return Comparison(APART, higher=1)
    if b.below(a):
        return Comparison(APART, higher=0)
    if a.high is None or b.high is None:
        return Comparison(NOT_SETTLED, why="a capacity at its sweep's highest rate may lie higher")
    return Comparison(OVERLAPPING, why="their ranges overlap")
