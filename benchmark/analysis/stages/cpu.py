"""CPU a stage used over the steady window: cores (CPU time per wall time) and microseconds of
CPU per transaction it handled.

Wall-clock busy time misleads when processes share cores: a stage waiting for a core looks
busy. CPU time counts only what its threads ran, so cores used and µs/tx say what the stage
costs whatever else runs on the machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..counters import Window, increase
from ..metrics import Record
from .paths import cpu_path, items_path


@dataclass(frozen=True)
class StageCpu:
    cores: float | None
    us_per_tx: float | None


def stage_cpu(records: Sequence[Record], stage: str, window: Window) -> StageCpu:
    """None where the records carry no CPU counter (binaries from before it) or, for µs/tx,
    when the stage handled no transaction in the window (an idle stage has no cost per tx)."""
    cpu_ms = increase(records, cpu_path(stage), window)
    items = increase(records, items_path(stage), window)
    cores = None if cpu_ms is None or window.seconds <= 0 else cpu_ms / 1000.0 / window.seconds
    us_per_tx = None if cpu_ms is None or not items or items <= 0 else cpu_ms * 1000.0 / items
    return StageCpu(cores, us_per_tx)
