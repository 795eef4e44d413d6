"""The arithmetic of a run put together: throughput and latency (`throughput.py`), the stage
table (`stages/table.py`) and the limiting stage (`stages/verdict.py`), over the pipeline the node
described (`pipeline.py`).

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

* CPU per stage (`stages/cpu.py`): cores used and µs of CPU per transaction, beside the
  wall-clock busy share; the machine-aware verdict (`stages/cpu_bound.py`) reads them with the
  CPU of every process (`resources/usage.py`).
* Committee traffic (`resources/traffic.py`): bytes and frames each node sent and received, and
  the signatures of consensus messages it checked, per second of the window.
* Also per run: per-hop latency of samples (`consensus/hops.py`), a capacity projection for a
  node of `project_cores` cores (`stages/projection.py`; with `node_cpus`, it says the costs were
  measured at that budget per node), the cost per transaction at `instance_price` USD per hour
  per node (`resources/cost.py`) and per-second series per stage (`timelines.py`).
* With `node_cpus` (`fab local --node-cpus`), every node is judged against its CPU budget too
  (`resources/usage.py`, `stages/cpu_bound.py`).
* A dilated run (`fab local --dilation=K --vcpus=V`) needs no rescaling here: its processes'
  clocks ran K times slower, so their timestamps, and every rate, latency and window computed
  from them, are in dilated time already, and a second of CPU time is a second of a virtual CPU.
  The machine is then K times its cores of virtual CPUs, and every node is judged against its
  V (`dilation`, `node_cpus`).

Node-level numbers are averaged over nodes (every honest node processes the same transactions);
queue maxima and invalid/failed/dropped counts take the worst node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .consensus.hops import Hop, hop_latencies
from .consensus.rounds import Rounds, rounds_of
from .counters import Window
from .metrics import ProcessMetrics, RunMetrics
from .pipeline import Pipeline
from .resources.cost import Cost, cost, instances
from .resources.energy import Energy
from .resources.profiles import ProfileSummary
from .resources.traffic import Traffic, traffic_of
from .resources.usage import Resources, resources
from .stages.bottleneck import Bottleneck
from .stages.projection import DEFAULT_PROJECT_CORES, ONE_PER_CORE, Projection, project
from .stages.table import StageRow, batch_size_series, stage_table
from .stages.verdict import find_bottleneck
from .stats import LatencyStats, mean
from .throughput import (
    WARMUP_FRACTION,
    ClientStats,
    SummaryError,
    Throughput,
    bytes_per_tx,
    client_stats,
    consensus_throughput,
    executed_rate,
    ingress_invalid,
    rate_nodes,
    sample_latencies,
    steady_window,
)
from .timelines import stage_timelines


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
    # Per-second series per stage (see timelines.py).
    timeline: dict[str, Any] = field(default_factory=dict)
    # Filled in from the profile files after the run (see resources/profiles.py), not from METRICS.
    profile: ProfileSummary | None = None
    # Rounds, timeouts and back-pressure over the window (see consensus/rounds.py); None
    # without nodes.
    rounds: Rounds | None = None
    # Committee traffic and consensus signature checks over the window (see resources/traffic.py).
    traffic: Traffic | None = None
    # Energy per transaction, measured (RAPL) or modelled (see resources/energy.py); from the log
    # directory, filled in after the run like the profile.
    energy: Energy | None = None
    # What an experiment's page read from the run's logs beyond this summary (`Experiment.
    # read_logs`), kept with it so that the page can be written again where the logs are not.
    readings: dict[str, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return str(self.config.get("mode", "unknown"))

    def stage(self, name: str) -> StageRow | None:
        return next((row for row in self.stages if row.name == name), None)

    def projected(self, cores: float) -> Projection | None:
        """The capacity projection of this run's costs for a node of `cores` cores (the run's
        own projection is for `--project-cores`)."""
        return _project(self.stages, self.config, cores)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["window"]["seconds"] = self.window.seconds
        return data


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
            clients_stats = replace(
                client_stats(run.clients, window, len(latencies), sent),
                ingress_invalid=ingress_invalid(processes),
            )
    stages = stage_table(processes, window, pipeline.stages)
    used = resources(
        run,
        window,
        _local_cores(config),
        _hosts(config),
        node_cpus=node_cpus(config),
        dilation=dilation(config),
        virtual=config.get("vcpus") is not None,
    )
    rounds = rounds_of(run.nodes, counted, window) if consensus is not None else None
    project_cores = int(config.get("project_cores") or DEFAULT_PROJECT_CORES)
    price = config.get("instance_price")
    rented = instances(int(config.get("nodes") or len(run.nodes) or 1), pipeline.consensus)
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
        traffic=traffic_of(counted, window) if consensus is not None else None,
        hops=hop_latencies(run.clients, run.nodes, window, pipeline.done) if run.nodes else (),
        resources=used,
        projection=_with_caveat(
            _project(stages, config, project_cores, _fitted_cores(used, config)),
            config,
            len(run.nodes),
        ),
        cost=None if price is None else cost(float(price), rented, end_to_end.tps),
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
    """The cores of the machine a local run used (the runner reads them: `os.cpu_count()`), in
    virtual CPUs when it was dilated (each a 1/K share of a core, K times as many)."""
    cores = config.get("cores")
    if not isinstance(cores, int | float) or cores <= 0:
        return None
    return int(cores) * dilation(config)


def dilation(config: dict[str, Any]) -> int:
    """K of a dilated run (`--dilation`), 1 for a run in real time."""
    factor = config.get("dilation")
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 1:
        return 1
    return int(factor)


def _project(
    stages: tuple[StageRow, ...],
    config: dict[str, Any],
    cores: float,
    fitted_cores: float | None = None,
) -> Projection | None:
    """The stages' measured costs projected to a node of `cores` cores, with the verifier and
    executor threads the run's configuration gave them: the cost model (`stages/model.py`) as one
    run fits it, with the stages' costs as its cost per transaction and no fixed cost per second,
    measured at `fitted_cores` per node."""
    projection = project(
        {r.name: r.us_per_tx for r in stages if r.us_per_tx is not None},
        cores,
        _verifier_threads(config),
        _executor_threads(config),
    )
    return None if projection is None else replace(projection, fitted_cores=fitted_cores)


def _fitted_cores(used: Resources, config: dict[str, Any]) -> float | None:
    """The cores per node the run's costs were measured at: its budget, else what a node used."""
    return node_cpus(config) or used.nodes.cpu_cores


def node_cpus(config: dict[str, Any]) -> float | None:
    """The CPU budget of every node of a local run (`--node-cpus`, or `--vcpus` virtual CPUs),
    None without one."""
    cores = config.get("vcpus")
    if cores is None:
        cores = config.get("node_cpus")
    if isinstance(cores, bool) or not isinstance(cores, int | float) or cores <= 0:
        return None
    return float(cores)


def _with_caveat(
    projection: Projection | None, config: dict[str, Any], nodes: int
) -> Projection | None:
    """Says so when the costs were measured with several nodes on one machine's cores, and at
    which budget per node when they had one."""
    cores = _local_cores(config)
    if projection is None or config.get("where") != "local" or cores is None:
        return projection
    budget = node_cpus(config)
    if budget is not None and config.get("vcpus") is not None:
        factor = dilation(config)
        caveat = (
            f"µs/tx measured on nodes of {budget:g} virtual CPUs (--vcpus, dilated ×{factor}:"
            f" CFS quotas of 1/{factor} of a core per thread, {nodes}"
            f" node{'s' if nodes > 1 else ''} and the clients on {cores // factor} shared"
            " cores): caches, memory bandwidth and the kernel's own work were shared, so the"
            " projection may err low"
        )
        return replace(projection, caveat=caveat, measured_cores=budget)
    if budget is not None:
        # Each node had its own share of CPU time, but not cores of its own.
        caveat = (
            f"µs/tx measured at {budget:g} cores per node (--node-cpus: a CFS quota each,"
            f" {nodes} node{'s' if nodes > 1 else ''} and the clients on {cores} shared cores):"
            " a quota caps CPU time without giving a node cores of its own, so caches and SMT"
            " siblings were still shared and the projection may err low"
        )
        return replace(projection, caveat=caveat, measured_cores=budget)
    if nodes < 2:
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
