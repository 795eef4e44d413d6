"""Where a stage's numbers are in a node's METRICS record.

Consensus is not in `stages`: its items are the committed transactions and its CPU is that of
the tokio runtime (consensus, mempool, network). Nor is the store of a node run with `--store`:
its CPU is that of its writer threads (`store-<column>`), which write every batch and block the
node receives and sync its safety state, so its items are the committed transactions too.
Channels are named `producer->consumer`, so a stage's input channel ends with its name and its
output channel starts with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CONSENSUS = "consensus"
STORE = "store"
# Stages with a section of their own in a node's record, beside `stages`.
SECTION_STAGES = (CONSENSUS, STORE)


def items_path(stage: str) -> tuple[str, ...]:
    """The cumulative count of transactions the stage has handled."""
    if stage in SECTION_STAGES:
        return (CONSENSUS, "committed_txs")
    return ("stages", stage, "items")


def cpu_path(stage: str) -> tuple[str, ...]:
    """The cumulative CPU time (ms, user + system) of the stage's threads."""
    if stage in SECTION_STAGES:
        return (stage, "cpu_ms")
    return ("stages", stage, "cpu_ms")


def stages_in(records: Iterable[Mapping[str, object]]) -> set[str]:
    """The stages a process's records report: those under `stages`, and consensus and the
    store where they have a section."""
    names: set[str] = set()
    for record in records:
        stages = record.get("stages")
        if isinstance(stages, dict):
            names.update(str(name) for name in stages)
        names.update(stage for stage in SECTION_STAGES if stage in record)
    return names


def input_channel(stage: str, channels: Iterable[str]) -> str | None:
    found = sorted(c for c in channels if c.split("->")[-1] == stage)
    return found[0] if found else None


def output_channel(stage: str, channels: Iterable[str]) -> str | None:
    found = sorted(c for c in channels if c.split("->")[0] == stage)
    return found[0] if found else None
