"""Capacity projection: the throughput one node with K cores would sustain, from the CPU each
stage costs per transaction in the measured run.

Assumptions (they are what makes the arithmetic simple, and what to keep in mind reading it):

* each sequential stage (consensus with its mempool and network, the executor; in movevm the
  decoder) gets a core of its own, the verifier's pool gets the remaining cores, at least one;
* a stage on c cores handles c · 1e6 / (µs per transaction) transactions per second: its cost
  per transaction stays what it was measured at (no contention, caches or frequency changes),
  and the pool scales linearly;
* the load generator (movevm's `generator`) is not part of a node and is left out; clients run
  elsewhere.

The projected throughput is the minimum over stages, and that stage would then limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PROJECT_CORES = 4
POOLED_STAGES: tuple[str, ...] = ("verifier",)
NOT_IN_A_NODE: tuple[str, ...] = ("generator",)


@dataclass(frozen=True)
class StageCapacity:
    stage: str
    cores: int
    us_per_tx: float
    tps: float


@dataclass(frozen=True)
class Projection:
    cores: int
    tps: float
    limiting_stage: str
    stages: tuple[StageCapacity, ...]


def project(us_per_tx: Mapping[str, float], cores: int) -> Projection | None:
    """`us_per_tx`: CPU per transaction of each stage of one node. None without any cost."""
    if cores < 1:
        raise ValueError(f"a node needs at least one core, got {cores}")
    costs = {s: c for s, c in us_per_tx.items() if s not in NOT_IN_A_NODE and c > 0}
    if not costs:
        return None
    sequential = [s for s in costs if s not in POOLED_STAGES]
    pool_cores = max(1, cores - len(sequential))
    stages = tuple(
        StageCapacity(
            stage=stage,
            cores=pool_cores if stage in POOLED_STAGES else 1,
            us_per_tx=cost,
            tps=(pool_cores if stage in POOLED_STAGES else 1) * 1e6 / cost,
        )
        for stage, cost in costs.items()
    )
    limit = min(stages, key=lambda s: (s.tps, s.stage))
    return Projection(cores=cores, tps=limit.tps, limiting_stage=limit.stage, stages=stages)
