"""Capacity projection: the throughput one node with K cores would sustain, from the CPU each
stage costs per transaction in the measured run.

The model. A node's stages are threads that the kernel runs on whichever core is free, so the
K cores are not reserved per stage: at a throughput of T tx/s, a stage that costs c µs of CPU
per transaction keeps T · c / 10⁶ cores busy, and the node fits on K cores while

* (all stages together) T · Σc ≤ K · 10⁶: the cores are shared in proportion to each stage's
  cost per transaction, and
* (each stage alone) T · c ≤ p · 10⁶, where p is the cores the stage can use at once: one for a
  stage that is one thread (the executor under `--exec=sequential`; movevm's decoder) and for
  consensus (the tokio runtime has a thread per core, but its heaviest work, sealing batches and
  the consensus core, is one task each); one for the store of a node run with `--store` (a
  writer thread per column, and the batches' thread does nearly all of its work); the verifier's
  pool, min(its threads, K) (a node starts one pool thread per core unless `--verifier-threads`
  says otherwise); the executor under `--exec=waves|blockstm`, min(its threads, K) the same way
  (one per core unless `--exec-threads` says otherwise).

The projected throughput is the largest T that meets both, min(K · 10⁶ / Σc, min over stages of
p · 10⁶ / c). Either the K cores are full ("CPU-bound"; the stage that costs the most per
transaction is named, as cutting its cost would help most) or one stage is at its own ceiling
(a sequential stage on a full core, or the pool on all its threads) while cores sit idle: that
stage limits. With small K the first bound is the one that matters: reserving a whole core for
a stage that needs a tenth of one, as an earlier version did, left the pool K - 2 cores and
projected 0.57 of what one hotcrypto node on two cores delivered.

Assumptions, and which way each one errs:

* The cost per transaction stays what it was measured at, whatever the throughput. Errs low
  when the measurement shared its cores with other nodes (`fab local`: 4 nodes on 2 cores):
  there a stage's threads also pay for context switches, caches another node's threads
  evicted, and pool threads spinning while their partner waits for a core, all counted as the
  stage's CPU. A CPU budget per node (`--node-cpus`) caps each node's CPU time but removes
  none of these costs: a quota gives a node no core of its own. Errs low too when the projected
  rate is higher than the measured one: batches get larger (up to the batch size limit) and a
  batch of signatures verifies cheaper per signature. Errs high if a larger node pays for more
  coordination than it measured.
* CPU outside the stages (the main thread, the METRICS line, Prometheus) is left out: under 1 %
  of a hotcrypto node's CPU in the runs measured (`resources` shows the whole process).
* A parallel executor's cost per transaction is what it measured with its threads, re-executions
  and idle spinning included; its ceiling assumes its threads keep that cost whatever their
  number. Errs high where transactions conflict: there the threads wait for one another (or
  redo work), and execution gains little from more of them (see `docs/results/parallel.md`).
* The load generator (movevm's `generator`) is not part of a node, and clients run elsewhere.
  A one-node `fab local` run keeps its client on the same cores: compare with that in mind.
* Consensus costs what it measured for the committee that was run: a node of a larger committee
  receives and acknowledges more batches per transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PROJECT_CORES = 4
POOLED_STAGES: tuple[str, ...] = ("verifier",)
# The stage a parallel execution scheme (`--exec=waves|blockstm`) runs on a pool.
EXECUTOR = "executor"
# `executor_threads` of a parallel executor with a thread per core (no `--exec-threads`).
ONE_PER_CORE = 0
NOT_IN_A_NODE: tuple[str, ...] = ("generator",)
# What limits when the K cores are full, rather than one stage's own ceiling.
CPU_BOUND = "cpu"


@dataclass(frozen=True)
class StageCapacity:
    stage: str
    # The cores the stage can use at once: 1 for a thread, the pool's threads for the pool (never
    # more than the node's cores).
    max_cores: float
    us_per_tx: float
    # The stage's own ceiling: max_cores · 10⁶ / µs per transaction.
    tps: float
    # The cores it keeps busy at the projected throughput.
    cores_used: float


@dataclass(frozen=True)
class Projection:
    cores: float
    tps: float
    # The stage to cut the cost of: the one at its own ceiling, or, when the K cores are full,
    # the one that costs the most CPU per transaction.
    limiting_stage: str
    # CPU_BOUND when the K cores are the limit, else the limiting stage's name.
    bound: str
    # The throughput the K cores allow, all stages sharing them: K · 10⁶ / Σ µs per transaction.
    cpu_tps: float
    us_per_tx_total: float
    stages: tuple[StageCapacity, ...]
    # How the run measured the costs, when that makes the projection err (see the assumptions).
    caveat: str | None = None
    # The CPU budget of each node the costs were measured under (`fab local --node-cpus`); None:
    # the nodes shared what the machine had.
    measured_cores: float | None = None
    # The cores per node of the run the costs come from (its budget, else what a node used): how
    # far the projection extrapolates is `cores / fitted_cores`.
    fitted_cores: float | None = None

    @property
    def extrapolation(self) -> float | None:
        return None if not self.fitted_cores else self.cores / self.fitted_cores

    @property
    def cpu_bound(self) -> bool:
        return self.bound == CPU_BOUND


def project(
    us_per_tx: Mapping[str, float],
    cores: float,
    pool_threads: int | None = None,
    executor_threads: int = 1,
) -> Projection | None:
    """`us_per_tx`: CPU per transaction of each stage of one node; `pool_threads`: the verifier
    pool's threads when the run fixed them (else one per core); `executor_threads`: the
    executor's threads, 1 when it runs sequentially, ONE_PER_CORE for a parallel scheme with a
    thread per core. `cores` may be a fraction (a CPU budget, `--node-cpus`): no stage then gets
    more than it. None without any cost."""
    if cores <= 0:
        raise ValueError(f"a node needs some CPU, got {cores} cores")
    if pool_threads is not None and pool_threads < 1:
        raise ValueError(f"a pool needs at least one thread, got {pool_threads}")
    if executor_threads < 0:
        raise ValueError(f"the executor needs threads, got {executor_threads}")
    costs = {s: c for s, c in us_per_tx.items() if s not in NOT_IN_A_NODE and c > 0}
    if not costs:
        return None
    pool = cores if pool_threads is None else min(cores, pool_threads)
    executor = cores if executor_threads == ONE_PER_CORE else min(cores, executor_threads)
    ceilings = {
        s: min(cores, pool if s in POOLED_STAGES else executor if s == EXECUTOR else 1)
        for s in costs
    }
    total = sum(costs.values())
    cpu_tps = cores * 1e6 / total
    own = {s: ceilings[s] * 1e6 / c for s, c in costs.items()}
    slowest = min(own, key=lambda s: (own[s], s))
    if own[slowest] < cpu_tps:
        tps, bound, limiting = own[slowest], slowest, slowest
    else:
        # Ties go to the cores: with every core full, no stage ceiling is what binds alone.
        tps, bound = cpu_tps, CPU_BOUND
        limiting = max(costs, key=lambda s: (costs[s], s))
    stages = tuple(
        StageCapacity(
            stage=stage,
            max_cores=ceilings[stage],
            us_per_tx=cost,
            tps=own[stage],
            cores_used=tps * cost / 1e6,
        )
        for stage, cost in costs.items()
    )
    return Projection(
        cores=cores,
        tps=tps,
        limiting_stage=limiting,
        bound=bound,
        cpu_tps=cpu_tps,
        us_per_tx_total=total,
        stages=stages,
    )
