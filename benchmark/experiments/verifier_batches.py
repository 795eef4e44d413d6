"""The mechanism behind the report's Fig 1.11, measured: small batches slow the verifier. The report
found its verifier slower per transaction with 146 transactions a batch than with 1,201; the links
page's batch sweep runs `hotstuff`, which verifies nothing, so it cannot show it.

`hotcrypto`, 4 nodes, one rate every batch size keeps up with (so each carries the same load),
batches of `BATCH_BYTES` (about 100 to 1,500 signed transfers of 148 bytes and a 4-byte prefix
each) sealed full: the batch delay is long enough that no batch times out first. Per batch size:
the transactions a committed batch carried as the verifier got it, and the verifier's CPU per
transaction (all its pool's threads; `stages/cpu.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt

from ..analysis.run_summary import Summary
from .experiment import Configuration, Outcome
from .measures import delivered, e2e_p50, fmt, median_of, spread, stage_us_per_tx
from .page import Page

# Bytes a signed transfer takes in a batch: 148 encoded, a 4-byte length before it.
TX_BYTES = 152
# Transactions a batch is sized for: from the report's small batches to past its large ones.
BATCH_TXS = (100, 250, 500, 1_000, 1_500)
BATCH_BYTES = tuple(n * TX_BYTES for n in BATCH_TXS)
QUICK_BATCH_BYTES = (BATCH_BYTES[0], BATCH_BYTES[2])
# Below hotcrypto's capacity at every batch size; a node's quarter fills the largest batch in
# half a second, well inside the delay.
RATE = "12000"
QUICK_RATE = "2000"
BATCH_DELAY_MS = "1000"

verifier_us = stage_us_per_tx("verifier")


def label_of(size: int) -> str:
    return f"verifier: hotcrypto, {size:,} B"


def configurations(quick: bool) -> list[Configuration]:
    runs = {"runs": "1", "duration": "5"} if quick else {"runs": "3", "duration": "20"}
    return [
        Configuration(
            label_of(size),
            {
                "mode": "hotcrypto",
                "rate": QUICK_RATE if quick else RATE,
                "batch_size": str(size),
                "batch_delay": BATCH_DELAY_MS,
                **runs,
            },
        )
        for size in (QUICK_BATCH_BYTES if quick else BATCH_BYTES)
    ]


def txs_per_batch(summary: Summary) -> float | None:
    """Transactions per batch as the verifier got them (the consensus stage's where the verifier
    reported none)."""
    for stage in ("verifier", "consensus"):
        row = summary.stage(stage)
        if row is not None and row.batch_size:
            return row.batch_size
    return None


def rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    found = []
    for size in BATCH_BYTES:
        runs = _runs(outcomes, label_of(size))
        if not runs:
            continue
        found.append(
            [
                f"{size:,}",
                fmt(median_of([txs_per_batch(s) for s in runs])),
                spread([verifier_us(s) for s in runs], 1),
                spread([delivered(s) for s in runs]),
                fmt(median_of([e2e_p50(s) for s in runs])),
            ]
        )
    return found


def comparison(outcomes: Sequence[Outcome]) -> list[str]:
    """The smallest batches against the largest: the verifier's cost per transaction, and
    whether the runs' ranges are apart (every run of one cost more than every run of the other)
    or overlap; not settled with a single run on a side."""
    ran = [(size, runs) for size in BATCH_BYTES if (runs := _runs(outcomes, label_of(size)))]
    costs = [
        (size, runs, values)
        for size, runs in ran
        if (values := [v for s in runs if (v := verifier_us(s)) is not None])
    ]
    if len(costs) < 2:
        return []
    (_, small_runs, small), (_, large_runs, large) = costs[0], costs[-1]
    small_txs = median_of([txs_per_batch(s) for s in small_runs])
    large_txs = median_of([txs_per_batch(s) for s in large_runs])
    small_mid, large_mid = median_of(small), median_of(large)
    if min(len(small), len(large)) < 2:
        verdict = "not settled: a side has a single run"
    elif min(small) > max(large):
        verdict = "apart: every run with the small batches cost more than every run with the large"
    elif max(small) < min(large):
        verdict = "apart: every run with the small batches cost less than every run with the large"
    else:
        verdict = "overlapping: the runs do not tell the two apart"
    ratio = f", {small_mid / large_mid:.2f} times" if small_mid and large_mid else ""
    return [
        f"- At {fmt(small_txs)} transactions a batch the verifier spent {fmt(small_mid, 1)} µs"
        f" per transaction, at {fmt(large_txs)} {fmt(large_mid, 1)} µs{ratio} (medians; the"
        f" report set 146 against 1,201 transactions a batch). The ranges are {verdict}.",
    ]


def _runs(outcomes: Sequence[Outcome], label: str) -> list[Summary]:
    return next((o.summaries for o in outcomes if o.configuration.label == label), [])


def write_section(outcomes: Sequence[Outcome], page: Page) -> None:
    table = rows(outcomes)
    if not table:
        return
    rate = next(
        (
            o.configuration.flags.get("rate")
            for o in outcomes
            if o.configuration.label.startswith("verifier: ")
        ),
        RATE,
    )
    page.section(
        "Small batches slow the verifier (the mechanism behind Fig 1.11)",
        f"`hotcrypto`, 4 nodes, {fmt(float(str(rate)))} tx/s asked at every batch size (a load"
        f" each keeps up with), `--batch-delay={BATCH_DELAY_MS}` so that every batch seals full;"
        " each row the runs' medians (median (min-max) where the spread says something). The"
        " verifier checks a batch's signatures together on its pool: what a batch costs beyond"
        " its signatures (waking the pool, splitting the work, decoding) is spread over fewer"
        " transactions in a small one.",
    )
    page.table(
        [
            "`--batch-size` B",
            "tx per batch",
            "verifier µs/tx",
            "delivered tx/s",
            "end-to-end p50 ms",
        ],
        table,
    )
    page.add("", *comparison(outcomes))
    points = []
    for size in BATCH_BYTES:
        runs = _runs(outcomes, label_of(size))
        txs = median_of([txs_per_batch(s) for s in runs])
        cost = median_of([verifier_us(s) for s in runs])
        if txs is not None and cost is not None:
            points.append((txs, cost))
    if points:
        figure, axes = plt.subplots()
        axes.plot(*zip(*points, strict=True), marker="o")
        axes.set_xscale("log")
        axes.set_xlabel("Transactions per batch")
        axes.set_ylabel("Verifier CPU per transaction (µs), median")
        axes.grid(True, alpha=0.3)
        page.figure(figure, "verifier", "The verifier's CPU per transaction against batch size")
