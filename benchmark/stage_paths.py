"""Where a stage's numbers are in a node's METRICS record.

Consensus is not in `stages`: its items are the committed transactions and its CPU is that of
the tokio runtime (consensus, mempool, network). Channels are named `producer->consumer`, so a
stage's input channel ends with its name and its output channel starts with it.
"""

from __future__ import annotations

from collections.abc import Iterable

CONSENSUS = "consensus"


def items_path(stage: str) -> tuple[str, ...]:
    """The cumulative count of transactions the stage has handled."""
    if stage == CONSENSUS:
        return (CONSENSUS, "committed_txs")
    return ("stages", stage, "items")


def cpu_path(stage: str) -> tuple[str, ...]:
    """The cumulative CPU time (ms, user + system) of the stage's threads."""
    if stage == CONSENSUS:
        return (CONSENSUS, "cpu_ms")
    return ("stages", stage, "cpu_ms")


def input_channel(stage: str, channels: Iterable[str]) -> str | None:
    found = sorted(c for c in channels if c.split("->")[-1] == stage)
    return found[0] if found else None


def output_channel(stage: str, channels: Iterable[str]) -> str | None:
    found = sorted(c for c in channels if c.split("->")[0] == stage)
    return found[0] if found else None
