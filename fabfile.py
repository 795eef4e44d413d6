"""Fabric tasks of the HotMove benchmark harness. The tasks are thin: the logic is in `benchmark/`.

Bench flags default to None ("not given"): `benchmark/flags.py` fills in the harness's defaults
(`BenchParameters`) and leaves node parameters to the node, so no default is repeated here.

fab local --mode=hotcrypto --nodes=4 --rate=50000 --duration=20 --runs=3
fab local --mode=hotmove --rate=16000,20000,24000 --runs=3     # a sweep: medians, capacity
fab create --nodes=2            # 2 instances per region of settings.json
fab install                     # toolchain, repository, release build on every host
fab remote --mode=hotmove --nodes=4,10 --rate=20000,50000 --runs=3
fab plot --mode=hotmove
fab info | fab stop | fab start | fab kill | fab logs | fab destroy
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fabric import task
from invoke import Context
from invoke.exceptions import Exit

from benchmark.analysis.options import AnalysisOptions
from benchmark.aws.settings import Settings
from benchmark.config import NODE_MODES, REMOTE_DEFAULTS, ConfigError
from benchmark.errors import HarnessError
from benchmark.faults.schedule import FaultSchedule, schedule_from_flags
from benchmark.flags import (
    FlagError,
    default_text,
    either,
    optional_float,
    optional_int,
    positive_int,
    positive_ints,
    sweep_from_flags,
)
from benchmark.runners import sweep
from benchmark.runners.local import DEFAULT_BASE_PORT, LocalBench
from benchmark.runners.local import build as cargo_build
from benchmark.runners.processes import Interrupted
from benchmark.runners.remote import RemoteBench, select_hosts

if TYPE_CHECKING:
    from benchmark.aws.instances import InstanceManager

ROOT = Path(__file__).resolve().parent
T = TypeVar("T")

# What each bench flag does; `_bench_help` appends its default, read from where it is defined.
BENCH_FLAGS = {
    "mode": "hotstuff | hotcrypto | hotmove | movevm",
    "nodes": "committee size; a comma-separated list sweeps them",
    "rate": "total input rate over all clients (tx/s); a comma-separated list sweeps them",
    "faults": "nodes left unbooted (with their clients), at most (n-1)/3",
    "tx_size": "transaction size in bytes (hotstuff mode)",
    "duration": "seconds the clients send",
    "batch_size": "mempool batch size (bytes)",
    "batch_delay": "max batch delay (ms)",
    "leader": "round-robin | reputation: who leads a round (reputation skips members that stopped"
    " taking part)",
    "verifier_threads": "verifier threads per node (the node uses every core unless set)",
    "consensus_threads": "worker threads of a node's consensus runtime (consensus, mempool,"
    " network; every core unless set)",
    "channel_capacity": "capacity of every channel between actors and stages",
    "max_uncommitted_bytes": "back-pressure bound: a node's own sealed, uncommitted bytes past"
    " which its mempool stops reading client transactions",
    "gc_retention_ms": "ms committed blocks and batches are kept for peers that fell behind (with"
    " gc_depth rounds); past both, such a peer adopts a checkpoint",
    "executor_delay_us": "TEST ONLY: the executor busy-spins N µs per transaction (a bottleneck)",
    "no_instrumentation": "TEST ONLY: nodes skip CPU per stage and sample hops (their overhead)",
    "accounts": "genesis accounts (movevm: accounts of the run)",
    "runs": "how many times to repeat each configuration",
    "invalid_share": "share of transactions with a bad signature (crypto modes)",
    "store": "every node keeps blocks, batches and its safety state on disk (node run --store)",
    "delay": "one-way latency (ms) the nodes add to every committee link (WAN emulation)",
    "delay_matrix": "CSV file, N rows of N one-way latencies (ms): row i to column j",
    "node_cpus": "fab local: every node in a cgroup with a CPU quota of X cores (a fraction"
    " too), the clients in another without one; nodes x X must fit in the machine's cores",
    "dilation": "fab local: time dilation K, every node's and client's clock K times slower and"
    " a virtual CPU 1/K of a core, figures in dilated time (with --vcpus)",
    "vcpus": "fab local: every node a machine of V virtual CPUs (each thread at most one), a"
    " cgroup quota of V/K cores (root); nodes x V + --client-vcpus must fit K x the cores",
    "client_vcpus": "fab local, with --vcpus: the clients' virtual CPUs together",
    "bandwidth": "rate (Mbit/s) of every committee link, each direction, emulated by the sending"
    " node as a token bucket (unlimited unless given)",
    "vm": "bare | adapter: the Move VM alone or behind Diem's adapter (hotmove, movevm)",
    "payload": "script | entry: Move calls as a script or an entry function (hotmove, movevm)",
    "workload": "transfer | donothing | cpuheavy | kvstore | smallbank: what Move transactions"
    " call (hotmove, movevm)",
    "workload_arg": "cpuheavy: numbers each transaction sorts; kvstore: keys it writes then reads"
    " (32 bytes each)",
    "dest": "ring | uniform | hot:K: whom transfers and SmallBank's payments pay (the load's"
    " contention; hotcrypto, hotmove, movevm)",
    "exec": "sequential | waves | blockstm: how the executor runs a committed batch (hotmove,"
    " movevm)",
    "exec_threads": "the executor's worker threads under --exec=waves|blockstm",
    "fees": "block | per-tx: the adapter's fees credited per batch, or by every transaction"
    " (the fee account as a hotspot)",
    "verify": "all | attested: every node checks every signature, or each batch's are checked by"
    " f+1 stake of attesters whose matching signed statements the others take (hotcrypto,"
    " hotmove)",
    "misbehave": "TEST ONLY, with --verify=attested: silent-attester | lying-attester, or several"
    " comma-separated: the last live nodes, one per entry, check and state nothing or state"
    " wrong positions (at most f members less --faults)",
}

# The bench flags that are switches (`--store`): False unless given, and then no value.
BENCH_SWITCHES = ("no_instrumentation", "store")

# The fault schedule (benchmark/faults/schedule.py); not bench parameters: no sweep, no default.
FAULT_FLAGS = {
    "crash": "NODE@T or NODE@T:RESTART_T: SIGKILL node NODE T s after the clients start"
    " (and run it again at RESTART_T); repeatable",
    "kill_leader_every": "every S s kill the leader of the current round, restart it S/2 later",
    "partition": "NODES@T1-T2 (e.g. 3@5-25 or 1,2@5-25): cut NODES off from the others from T1 to"
    " T2 s after the clients start; repeatable",
}


# Flags of `fab local` and `fab remote` that change how a run is analysed, not what it runs.
ANALYSIS_FLAGS = {
    "profile": "profile every node (flame graph and folded stacks in the logs; top functions)",
    "project_cores": "cores of the node the capacity projection is for (default 4)",
    "instance_price": "USD per hour of one instance (remote: settings' prices_usd_per_hour)",
}


def _bench_help(defaults: Mapping[str, Any] | None = None) -> dict[str, str]:
    return {flag: f"{text}; {default_text(flag, defaults)}" for flag, text in BENCH_FLAGS.items()}


def _with_bench_flags(body: Callable[..., None]) -> Callable[..., None]:
    """`body(c, bench, ...)` as a task that takes every flag of BENCH_FLAGS beside its own: invoke
    reads a task's flags from its signature, so `local` and `remote` get theirs built here from
    the one list instead of each spelling them out. `bench` receives them by name, as
    `flags.sweep_from_flags` takes them: None where not given, a switch True or None."""
    context, _bench, *own = inspect.signature(body).parameters.values()
    flags = [
        inspect.Parameter(
            name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=False if name in BENCH_SWITCHES else None,
            annotation=bool if name in BENCH_SWITCHES else str | None,
        )
        for name in BENCH_FLAGS
    ]

    @functools.wraps(body)
    def task_body(c: Context, **given: Any) -> None:  # noqa: ANN401 - the flags' values
        bench = {name: given.pop(name, None) or None for name in BENCH_SWITCHES}
        bench.update({name: given.pop(name, None) for name in BENCH_FLAGS if name not in bench})
        body(c, bench, **given)

    task_body.__signature__ = inspect.Signature([context, *flags, *own])  # type: ignore[attr-defined]
    return task_body


def _guard(action: Callable[[], T]) -> T:
    """Turn the harness's errors into a clean message and exit code instead of a traceback; so
    too a file or directory the system refuses (a --logs or --output that cannot be written)."""
    try:
        return action()
    except (HarnessError, OSError) as error:
        raise Exit(f"Error: {error}", code=1) from error
    except (KeyboardInterrupt, Interrupted) as error:
        raise Exit("Interrupted; every process was stopped.", code=130) from error


# Long flags only: local and remote take more flags than there are letters, and invoke's automatic
# short flags then end in an empty one (`--=STRING` in --help).
@task(
    auto_shortflags=False,
    iterable=["crash", "partition"],
    help={
        **_bench_help(),
        **FAULT_FLAGS,
        "base_port": f"first port of node 0 (default {DEFAULT_BASE_PORT})",
        "prometheus_port": "serve GET /metrics: node i at 127.0.0.1:P+i, client j at P+nodes+j",
        **ANALYSIS_FLAGS,
        "build": "run `cargo build --release` first",
        "logs": "directory of the runs' log directories",
        "results": "directory of the saved results (one JSON per run)",
        "binaries": "directory holding node and client (default: target/release)",
        "keep_stores": "with --store: keep the nodes' stores in the logs after each run (by"
        " default they are deleted once the run is summarised)",
    },
)
@_with_bench_flags
def local(
    c: Context,
    bench: dict[str, object | None],
    keep_stores: bool = False,
    crash: list[str] | None = None,
    kill_leader_every: str | None = None,
    partition: list[str] | None = None,
    base_port: str | None = None,
    prometheus_port: str | None = None,
    profile: bool = False,
    project_cores: str | None = None,
    instance_price: str | None = None,
    build: bool = True,
    logs: str = "logs",
    results: str = "results",
    work: str = ".bench",
    binaries: str = "",
) -> None:
    """Run a benchmark on this machine: nodes and clients as local processes."""

    def action() -> None:
        points = sweep_from_flags(bench)
        runner = LocalBench(
            repo_root=ROOT,
            base_port=positive_int(base_port or DEFAULT_BASE_PORT, "base_port"),
            logs_dir=ROOT / logs,
            results_dir=ROOT / results,
            work_dir=ROOT / work,
            binaries=ROOT / binaries if binaries else None,
            prometheus_port=optional_int(prometheus_port, "prometheus_port"),
            profile=profile,
            analysis=_analysis(project_cores, instance_price),
            fault_schedule=schedule_from_flags(crash, kill_leader_every, partition),
            keep_stores=keep_stores,
        )
        sweep.run_sweep(points, runner, sys.stdout, before_runs=runner.build if build else None)

    _guard(action)


def _analysis(
    project_cores: str | None, instance_price: str | None, settings_price: float | None = None
) -> AnalysisOptions:
    """`--project-cores` (default: the projection's own) and `--instance-price` (remote: the
    settings' price of the instance type unless given)."""
    cores = optional_int(project_cores, "project_cores")
    price = optional_float(instance_price, "instance_price")
    return AnalysisOptions(
        project_cores=cores if cores is not None else AnalysisOptions().project_cores,
        instance_price=price if price is not None else settings_price,
    )


def _settings(path: str) -> Settings:
    return Settings.load(ROOT / path)


def _manager(settings: str) -> InstanceManager:
    # boto3 (and matplotlib below) are slow to import: only the tasks that need them pay.
    from benchmark.aws.instances import InstanceManager  # noqa: PLC0415

    return InstanceManager(_settings(settings))


@task(help={"nodes": "instances per region (default 2)", "settings": "settings file"})
def create(c: Context, nodes: str = "2", settings: str = "settings.json") -> None:
    """Create instances (N per region), tagged Name=hotmove-node."""

    def action() -> None:
        count = positive_int(nodes, "nodes")
        created = _manager(settings).create_instances(count)
        for region, ids in created.items():
            print(f"{region}: created {', '.join(ids)}")

    _guard(action)


@task(help={"settings": "settings file"})
def destroy(c: Context, settings: str = "settings.json") -> None:
    """Terminate every testbed instance and its security groups."""
    _guard(lambda: print(f"Terminated {_manager(settings).terminate_instances()} instance(s)."))


@task(help={"settings": "settings file"})
def start(c: Context, settings: str = "settings.json") -> None:
    """Start the stopped testbed instances."""
    _guard(lambda: print(f"Started {_manager(settings).start_instances()} instance(s)."))


@task(help={"settings": "settings file"})
def stop(c: Context, settings: str = "settings.json") -> None:
    """Stop the running testbed instances (they keep their disks)."""
    _guard(lambda: print(f"Stopped {_manager(settings).stop_instances()} instance(s)."))


@task(help={"settings": "settings file"})
def info(c: Context, settings: str = "settings.json") -> None:
    """List the testbed instances per region."""
    _guard(lambda: print(_manager(settings).info()))


def _remote_bench(
    settings_path: str,
    prometheus_port: int | None = None,
    profile: bool = False,
    analysis: Callable[[Settings], AnalysisOptions] | None = None,
    fault_schedule: FaultSchedule | None = None,
) -> RemoteBench:
    settings = _settings(settings_path)
    hosts = select_hosts(_manager(settings_path).hosts(), settings.ssh_user)
    return RemoteBench(
        settings,
        hosts,
        local_node_binary=ROOT / "target" / "release" / "node",
        work_dir=ROOT / ".bench" / "remote",
        logs_dir=ROOT / "logs",
        results_dir=ROOT / "results",
        prometheus_port=prometheus_port,
        profile=profile,
        analysis=analysis(settings) if analysis is not None else None,
        fault_schedule=fault_schedule,
    )


@task(
    help={
        "skip_toolchain": "do not install apt packages and rustup (already there)",
        "settings": "settings file",
    }
)
def install(c: Context, skip_toolchain: bool = False, settings: str = "settings.json") -> None:
    """Install the toolchain, fetch the repository and build it on every running instance."""

    def action() -> None:
        with _remote_bench(settings) as bench:
            bench.install(skip_toolchain=skip_toolchain)

    _guard(action)


@task(
    auto_shortflags=False,
    iterable=["crash", "partition"],
    help={
        **_bench_help(REMOTE_DEFAULTS),
        **FAULT_FLAGS,
        "rates": "the same as --rate (its older spelling)",
        "prometheus_port": "serve GET /metrics: nodes on 0.0.0.0:P, clients on 0.0.0.0:P+1",
        **ANALYSIS_FLAGS,
        "settings": "settings file",
        "build": "build locally first (keys, genesis)",
    },
)
@_with_bench_flags
def remote(
    c: Context,
    bench: dict[str, object | None],
    rates: str | None = None,
    prometheus_port: str | None = None,
    crash: list[str] | None = None,
    kill_leader_every: str | None = None,
    partition: list[str] | None = None,
    profile: bool = False,
    project_cores: str | None = None,
    instance_price: str | None = None,
    settings: str = "settings.json",
    build: bool = True,
) -> None:
    """Run benchmarks on the instances for every committee size and rate, `runs` times each."""

    def action() -> None:
        flags = {**bench, "rate": either(bench["rate"], rates, "rate", "rates")}
        points = sweep_from_flags(flags, REMOTE_DEFAULTS)
        if points[0].mode not in NODE_MODES:
            raise ConfigError(
                f"{points[0].mode} runs in one process: use `fab local --mode={points[0].mode}`"
            )
        metrics_port = optional_int(prometheus_port, "prometheus_port")
        schedule = schedule_from_flags(crash, kill_leader_every, partition)
        with _remote_bench(
            settings,
            metrics_port,
            profile,
            lambda s: _analysis(project_cores, instance_price, s.instance_price),
            schedule,
        ) as runner:
            sweep.run_sweep(
                points,
                runner,
                sys.stdout,
                before_runs=(lambda: cargo_build(ROOT, sys.stdout)) if build else None,
            )

    _guard(action)


@task(help={"settings": "settings file"})
def kill(c: Context, settings: str = "settings.json") -> None:
    """Stop every benchmark process on the instances and delete their run directories."""

    def action() -> None:
        with _remote_bench(settings) as bench:
            bench.kill()
        print("Killed.")

    _guard(action)


@task(help={"settings": "settings file"})
def logs(c: Context, settings: str = "settings.json") -> None:
    """Download the last remote run's logs into logs/ and print their summary."""

    def action() -> None:
        with _remote_bench(settings) as bench:
            bench.logs(ROOT / "logs" / f"downloaded-{time.strftime('%Y%m%d-%H%M%S')}")

    _guard(action)


@task(
    help={
        "mode": "mode whose results to plot",
        "max_latency": "comma-separated latency caps (ms) for the TPS graph",
        "results": "results directory",
        "output": "plots directory",
    }
)
def plot(
    c: Context,
    mode: str = "hotcrypto",
    max_latency: str = "2000,5000",
    results: str = "results",
    output: str = "results/plots",
) -> None:
    """Aggregate saved results and draw the robustness, latency, TPS and batch-size graphs."""

    def action() -> None:
        from benchmark.plots.commits import plot_commits  # noqa: PLC0415
        from benchmark.plots.graphs import plot_all  # noqa: PLC0415

        caps = [float(cap) for cap in positive_ints(max_latency, "max_latency")]
        for path in plot_all(ROOT / results, ROOT / output, mode, caps, sys.stdout):
            print(f"wrote {path}")
        for path in plot_commits(ROOT / results, ROOT / output, mode):
            print(f"wrote {path}")

    _guard(action)


@task(
    auto_shortflags=False,
    help={
        "name": "the experiment: modes | multi-region | faults | workloads | store | overload"
        " | leaders | parallel | scale | links | diemvm | dilation",
        "quick": "a CI-sized version (short runs at low rates): checks the machinery only",
        "output": "directory of the page and its figures (default: docs/results; --quick:"
        " results/experiments, so a quick page never replaces a full one)",
        "build": "run `cargo build --release` first",
        "logs": "directory of the runs' log directories",
        "results": "directory of the saved results (one JSON per run)",
        "binaries": "directory holding node and client (default: target/release)",
        "base_port": "first port of node 0",
        "rewrite": "write the page again from the logs of the last run here (recorded under"
        " --logs), with this checkout's analysis; runs nothing",
        "remote": "run on the hosts of `fab remote` (settings file: --settings); configurations"
        " that run in one process (movevm) are left out",
        "settings": "settings file (with --remote)",
        "only": "run only the configurations whose label contains this text; the page takes the"
        " others from the last run recorded here",
        "resume": "go on with a run of this experiment that stopped halfway (recorded here, at"
        " this commit): run only the configurations it did not get to",
    },
)
def experiment(
    c: Context,
    name: str,
    quick: bool = False,
    output: str = "",
    build: bool = True,
    logs: str = "logs",
    results: str = "results",
    work: str = ".bench",
    binaries: str = "",
    base_port: str | None = None,
    rewrite: bool = False,
    remote: bool = False,
    settings: str = "settings.json",
    only: str = "",
    resume: bool = False,
) -> None:
    """Run a named experiment end to end and write its results page (docs/results/NAME.md);
        `--remote`: on the hosts of `fab remote`; `--rewrite`: write the page again from the logs
        of its last run, running nothing; `--only=TEXT`: run the configurations whose label contains
        TEXT, the others taken from the last run; `--resume`: go on with a run that stopped halfway
    (same commit), running only the configurations it did not get to."""

    def action() -> None:
        from benchmark.experiments import EXPERIMENTS  # noqa: PLC0415
        from benchmark.experiments.runner import (  # noqa: PLC0415
            RemoteTestbed,
            rewrite_experiment,
            run_experiment,
        )

        chosen = EXPERIMENTS.get(name)
        if chosen is None:
            raise FlagError(f"unknown experiment {name!r}; one of {', '.join(EXPERIMENTS)}")
        default = "results/experiments" if quick else "docs/results"
        where = {"quick": quick, "repo_root": ROOT, "output": ROOT / (output or default)}
        if rewrite:
            page = rewrite_experiment(chosen, logs_dir=ROOT / logs, **where)
        else:
            local = {
                "logs_dir": ROOT / logs,
                "results_dir": ROOT / results,
                "work_dir": ROOT / work,
                "out": sys.stdout,
                "binaries": ROOT / binaries if binaries else None,
                "build": build,
                "base_port": positive_int(base_port, "base_port")
                if base_port
                else DEFAULT_BASE_PORT,
                "only": only or None,
                "resume": resume,
            }
            if remote:
                with _remote_bench(settings) as bench:
                    page = run_experiment(chosen, testbed=RemoteTestbed(bench), **local, **where)
            else:
                page = run_experiment(chosen, **local, **where)
        print(f"wrote {page}")

    _guard(action)
