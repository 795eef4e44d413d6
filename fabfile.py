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

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fabric import task
from invoke import Context
from invoke.exceptions import Exit

from benchmark.analysis.options import AnalysisOptions
from benchmark.aws.settings import Settings
from benchmark.binary_modes import runs_committee
from benchmark.config import REMOTE_DEFAULTS, ConfigError
from benchmark.errors import HarnessError
from benchmark.faults.schedule import schedule_from_flags
from benchmark.flags import (
    ANALYSIS_FLAGS,
    FAULT_FLAGS,
    FlagError,
    bench_help,
    either,
    optional_float,
    optional_int,
    positive_int,
    positive_ints,
    sweep_from_flags,
    with_bench_flags,
)
from benchmark.runners import sweep
from benchmark.runners.local import DEFAULT_BASE_PORT, LocalBench
from benchmark.runners.local import build as cargo_build
from benchmark.runners.plan import RunPlan
from benchmark.runners.processes import Interrupted
from benchmark.runners.remote import RemoteBench, select_hosts

if TYPE_CHECKING:
    from benchmark.aws.instances import InstanceManager

ROOT = Path(__file__).resolve().parent
T = TypeVar("T")


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
        **bench_help(),
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
@with_bench_flags
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
        here = LocalBench(
            repo_root=ROOT,
            base_port=positive_int(base_port or DEFAULT_BASE_PORT, "base_port"),
            logs_dir=ROOT / logs,
            results_dir=ROOT / results,
            work_dir=ROOT / work,
            binaries=ROOT / binaries if binaries else None,
            prometheus_port=optional_int(prometheus_port, "prometheus_port"),
            analysis=_analysis(project_cores, instance_price),
            keep_stores=keep_stores,
        )
        plan = RunPlan(here, schedule_from_flags(crash, kill_leader_every, partition), profile)
        sweep.run_sweep(points, plan, sys.stdout, before_runs=here.build if build else None)

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
    analysis: Callable[[Settings], AnalysisOptions] | None = None,
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
        analysis=analysis(settings) if analysis is not None else None,
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
        **bench_help(REMOTE_DEFAULTS),
        **FAULT_FLAGS,
        "rates": "the same as --rate (its older spelling)",
        "prometheus_port": "serve GET /metrics: nodes on 0.0.0.0:P, clients on 0.0.0.0:P+1",
        **ANALYSIS_FLAGS,
        "settings": "settings file",
        "build": "build locally first (keys, genesis)",
    },
)
@with_bench_flags
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
        if not runs_committee(points[0].mode):
            raise ConfigError(
                f"{points[0].mode} runs in one process: use `fab local --mode={points[0].mode}`"
            )
        metrics_port = optional_int(prometheus_port, "prometheus_port")
        schedule = schedule_from_flags(crash, kill_leader_every, partition)
        with _remote_bench(
            settings,
            metrics_port,
            lambda s: _analysis(project_cores, instance_price, s.instance_price),
        ) as hosts:
            sweep.run_sweep(
                points,
                RunPlan(hosts, schedule, profile),
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
        # The experiments are benchmark/experiments/'s to list: an unknown name prints them.
        "name": "the experiment, e.g. modes (`--name=list` prints every one)",
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
        from benchmark.experiments.results_page import rewrite_experiment  # noqa: PLC0415
        from benchmark.experiments.runner import run_experiment  # noqa: PLC0415

        if name == "list":
            for each in EXPERIMENTS.values():
                print(f"{each.name}: {each.title}")
            return
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
                    page = run_experiment(chosen, transport=bench, **local, **where)
            else:
                page = run_experiment(chosen, **local, **where)
        print(f"wrote {page}")

    _guard(action)
