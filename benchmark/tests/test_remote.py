"""The remote runner against real SSH hosts on this machine (see `sshhosts.py`).

Everything `fab install` and `fab remote` do runs for real over SSH and SFTP: fetching the
repository, building, uploading the configuration, starting nodes and clients in the background
with pid files, waiting, stopping (SIGTERM, grace, SIGKILL), downloading the logs, parsing and
saving. Two things are stand-ins, so the test is about the harness and not about the Rust code:

* the toolchain: `install(skip_toolchain=True)` skips apt and rustup; each home gets a stand-in
  `cargo` (in ~/.cargo/bin, found through ~/.cargo/env like the real one) whose
  `build --release` copies the repository's stand-in binaries to target/release;
* the binaries: the repository fetched is a local git repository holding `standins/node` and
  `standins/client`, Python scripts with the real CLI that print valid METRICS lines.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from io import StringIO
from pathlib import Path

import pytest

from benchmark.analysis.audit.fault_report import AuditFailedError
from benchmark.analysis.metrics import load_run
from benchmark.aws.settings import Settings
from benchmark.config import BenchParameters
from benchmark.experiments.experiment import Configuration, Experiment, Outcome
from benchmark.experiments.page import Page
from benchmark.experiments.runner import run_experiment
from benchmark.faults.events import FaultLog
from benchmark.faults.schedule import schedule_from_flags
from benchmark.flags import sweep_points
from benchmark.run_files import Ports
from benchmark.runners.plan import RunPlan
from benchmark.runners.prometheus import EVERY_INTERFACE
from benchmark.runners.remote import BENCH_DIR, Host, RemoteBench, RemoteError, select_hosts
from benchmark.runners.sweep import run_sweep

from .conftest import described_flags
from .sshhosts import COMMITTEE_PORTS, SshHosts, free_port
from .synthetic import write_run
from .test_prometheus import scrape

FAKE_CARGO = """#!/bin/sh
# Stand-in for cargo: `build --release` puts the stand-in binaries where the real build would.
if [ "$1" != build ] || [ "$2" != --release ]; then echo "stand-in cargo: $*" >&2; exit 2; fi
mkdir -p target/release
cp standins/node standins/client standins/metrics_endpoint.py target/release/
chmod 755 target/release/node target/release/client
"""
CARGO_ENV = 'export PATH="$HOME/.cargo/bin:$PATH"\n'


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "tests",
        "GIT_AUTHOR_EMAIL": "tests@localhost",
        "GIT_COMMITTER_NAME": "tests",
        "GIT_COMMITTER_EMAIL": "tests@localhost",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.fixture(scope="module")
def stand_in_repo(local_ssh_hosts: SshHosts, standins: Path) -> Path:
    """A git repository (branch main) with the stand-in binaries, readable by the host users."""
    repo = local_ssh_hosts.shared_dir / "hotmove"
    (repo / "standins").mkdir(parents=True)
    for name in ("node", "client", "metrics_endpoint.py"):
        shutil.copy(standins / name, repo / "standins" / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "standins")
    _git(repo, "commit", "-q", "-m", "stand-in binaries")
    for path in [repo, *repo.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    for user in local_ssh_hosts.users:
        local_ssh_hosts.write_file(user, ".cargo/bin/cargo", FAKE_CARGO, mode=0o755)
        local_ssh_hosts.write_file(user, ".cargo/env", CARGO_ENV)
        # The repository belongs to root; let the users fetch from it.
        local_ssh_hosts.write_file(user, ".gitconfig", "[safe]\n\tdirectory = *\n")
    return repo


@pytest.fixture(scope="module")
def remote_bench(
    local_ssh_hosts: SshHosts,
    stand_in_repo: Path,
    standins: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RemoteBench]:
    settings = Settings(
        key_name="unused",
        key_path=local_ssh_hosts.key_path,
        regions=("local",),
        instance_type="none",
        ports=Ports.consecutive(free_port(COMMITTEE_PORTS)),
        repo_name="hotmove",
        repo_url=str(stand_in_repo),
        branch="main",
    )
    base = tmp_path_factory.mktemp("remote")
    bench = RemoteBench(
        settings,
        local_ssh_hosts.hosts(),
        local_node_binary=standins / "node",
        work_dir=base / "work",
        logs_dir=base / "logs",
        results_dir=base / "results",
        grace=2.0,
        poll_interval=0.2,
        # The stand-ins print plausible numbers, not a consistent ledger: audited, not enforced.
        enforce_audit=False,
    )
    with bench:
        bench.install(skip_toolchain=True)
        yield bench


def test_select_hosts_interleaves_regions() -> None:
    hosts = select_hosts({"us-east-1": ["1.1.1.1", "1.1.1.2"], "eu-west-1": ["2.2.2.1"]}, "ubuntu")
    assert [h.address for h in hosts] == ["1.1.1.1", "2.2.2.1", "1.1.1.2"]
    assert all(h.user == "ubuntu" and h.port == 22 for h in hosts)


def test_logs_audits_as_the_runs_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, standins: Path
) -> None:
    """`logs` summarises what it downloads with the runner's `enforce_audit`, as its runs do:
    stand-ins' logs, whose numbers make no consistent ledger, are audited without failing."""

    class NoBenchFile:
        def get(self, remote: str, local: str) -> None:
            raise OSError(f"no {remote}")

    def download(count: int, log_dir: Path) -> list[Path]:
        write_run(log_dir)  # its accounting does not add up: the audit fails
        return sorted(log_dir.glob("*.log"))

    settings = Settings(
        key_name="unused",
        key_path=tmp_path / "key",
        regions=("local",),
        instance_type="none",
        ports=Ports.consecutive(4000),
        repo_name="hotmove",
        repo_url="unused",
        branch="main",
    )
    for enforce_audit in (False, True):
        bench = RemoteBench(
            settings,
            [Host("10.0.0.1", "u")],
            local_node_binary=standins / "node",
            work_dir=tmp_path,
            logs_dir=tmp_path,
            results_dir=None,
            out=StringIO(),
            enforce_audit=enforce_audit,
        )
        monkeypatch.setattr(bench, "download", download)
        bench.connections = [NoBenchFile()]  # type: ignore[list-item]
        log_dir = tmp_path / f"enforced-{enforce_audit}"
        if enforce_audit:
            with pytest.raises(AuditFailedError, match="accounting"):
                bench.logs(log_dir)
        else:
            summary = bench.logs(log_dir)
            assert summary is not None
            assert summary.mode == "hotcrypto"


def test_install_fetches_and_builds(local_ssh_hosts: SshHosts, remote_bench: RemoteBench) -> None:
    for user in local_ssh_hosts.users:
        home = local_ssh_hosts.home(user)
        for name in ("node", "client"):
            binary = home / "hotmove" / "target" / "release" / name
            assert binary.is_file()
            assert os.access(binary, os.X_OK)
            assert binary.stat().st_uid == pwd.getpwnam(user).pw_uid
    # Installing again fetches into the existing clone instead of failing.
    remote_bench.install(skip_toolchain=True)


def test_remote_run_over_node_counts(local_ssh_hosts: SshHosts, remote_bench: RemoteBench) -> None:
    base = BenchParameters(mode="hotcrypto", rate=1_500, duration=1, accounts=60)
    out = StringIO()
    summaries = run_sweep(
        sweep_points(base, nodes=[2, 3], rates=[1_500]), RunPlan(remote_bench), out
    )
    assert "SWEEP" in out.getvalue()

    assert [s.config["nodes"] for s in summaries] == [2, 3]
    for summary in summaries:
        nodes = summary.config["nodes"]
        assert summary.config["where"] == "remote"
        assert summary.processes["nodes"] == nodes
        assert summary.processes["clients"] == nodes
        assert summary.end_to_end.tps > 0
        assert summary.consensus is not None
        assert summary.consensus.tps > 0
        assert [row.name for row in summary.stages] == ["consensus", "verifier", "executor"]
        assert summary.bottleneck.stage == "executor"
        logs = sorted(p.name for p in Path(summary.config["logs"]).glob("*.log"))
        assert logs == sorted(
            [f"node-{i}.log" for i in range(nodes)] + [f"client-{i}.log" for i in range(nodes)]
        )
        # Stopped gracefully: every node printed its final METRICS line; every client ended.
        run = load_run(Path(summary.config["logs"]))
        assert all(process.has_final for process in run.nodes + run.clients)
    for index, user in enumerate(local_ssh_hosts.users):
        pids = local_ssh_hosts.home(user) / BENCH_DIR / "pids"
        assert (pids / f"node-{index}.exit").read_text().strip() == "0"
        assert (pids / f"client-{index}.exit").read_text().strip() == "0"
    saved = sorted(remote_bench.results_dir.glob("*.json")) if remote_bench.results_dir else []
    assert len(saved) == 2
    assert json.loads(saved[0].read_text())["config"]["mode"] == "hotcrypto"
    assert local_ssh_hosts.user_processes() == []


def test_logs_downloads_the_last_run(remote_bench: RemoteBench, tmp_path: Path) -> None:
    # Relies on the run of the previous test having left its logs on the hosts.
    summary = remote_bench.logs(tmp_path / "downloaded")
    assert summary is not None
    assert summary.mode == "hotcrypto"
    assert summary.config["nodes"] == 3
    assert summary.end_to_end.tps > 0


def _pid(hosts: SshHosts, user: str, name: str) -> int:
    return int((hosts.home(user) / BENCH_DIR / "pids" / f"{name}.pid").read_text())


def _start(remote_bench: RemoteBench, bench: BenchParameters, tmp_path: Path) -> None:
    from benchmark.run_files import write_run_files  # noqa: PLC0415 - local to these helpers

    files = write_run_files(
        bench,
        remote_bench.local_node_binary,
        tmp_path / "config",
        [h.address for h in remote_bench.hosts[: bench.nodes]],
        remote_bench.settings.ports,
        genesis=bench.mode != "hotstuff",
    )
    flags = described_flags(bench.mode)
    remote_bench.upload(files, bench.nodes)
    remote_bench.start_nodes(files, bench, flags)
    remote_bench.start_clients(files, bench, flags)


def test_dead_node_fails_the_run_fast(
    local_ssh_hosts: SshHosts, remote_bench: RemoteBench, tmp_path: Path
) -> None:
    bench = BenchParameters(mode="hotstuff", nodes=2, rate=1_000, duration=30)
    _start(remote_bench, bench, tmp_path)
    try:
        os.kill(_pid(local_ssh_hosts, local_ssh_hosts.users[1], "node-1"), signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(RemoteError, match="node-1"):
            remote_bench.wait(bench)
        assert time.monotonic() - started < bench.duration
    finally:
        remote_bench.stop(bench.nodes)
    assert local_ssh_hosts.user_processes() == []


def test_kill_stops_everything(
    local_ssh_hosts: SshHosts, remote_bench: RemoteBench, tmp_path: Path
) -> None:
    bench = BenchParameters(mode="hotstuff", nodes=3, rate=1_000, duration=30)
    _start(remote_bench, bench, tmp_path)
    assert len(local_ssh_hosts.user_processes()) >= 6
    remote_bench.kill()
    assert local_ssh_hosts.user_processes() == []
    for user in local_ssh_hosts.users:
        assert not (local_ssh_hosts.home(user) / BENCH_DIR).exists()


def test_remote_processes_serve_metrics(
    local_ssh_hosts: SshHosts, remote_bench: RemoteBench, tmp_path: Path
) -> None:
    bench = BenchParameters(mode="hotstuff", nodes=2, rate=1_000, duration=30)
    # The hosts share 127.0.0.1, so node-1's endpoints come after node-0's: P..P+3.
    remote_bench.prometheus_port = free_port(4)
    try:
        remote_bench.check(bench)
        endpoints = remote_bench.metrics_endpoints(bench)
        assert endpoints is not None
        assert [e.listen.split(":")[0] for e in endpoints.nodes] == [EVERY_INTERFACE] * 2
        _start(remote_bench, bench, tmp_path)
        bodies: dict[str, str] = {}
        deadline = time.monotonic() + 20
        while len(bodies) < 4 and time.monotonic() < deadline:
            for endpoint in (*endpoints.nodes, *endpoints.clients):
                body = scrape(endpoint.url)
                if body and "hotmove_" in body:
                    bodies[endpoint.process] = body
            time.sleep(0.1)
    finally:
        remote_bench.prometheus_port = None
        remote_bench.stop(bench.nodes)
    assert sorted(bodies) == ["client-0", "client-1", "node-0", "node-1"]
    assert "hotmove_consensus_committed_txs_total{" in bodies["node-1"]
    assert "hotmove_client_sent_total{" in bodies["client-0"]
    assert local_ssh_hosts.user_processes() == []


def test_remote_profiles_come_back_with_the_logs(remote_bench: RemoteBench) -> None:
    [summary] = RunPlan(remote_bench, profile=True).run(
        BenchParameters(mode="hotcrypto", nodes=2, rate=1_500, duration=1, accounts=60)
    )
    logs = Path(summary.config["logs"])
    assert sorted(p.parent.name for p in logs.glob("profile-*/profile.folded")) == [
        "profile-node-0",
        "profile-node-1",
    ]
    assert summary.profile is not None
    assert summary.profile.top[0].function == "ed25519_verify"
    assert len(summary.profile.flamegraphs) == 2
    assert summary.resources is not None
    assert len(summary.resources.machines) == 2  # one per host, cores from `process.cores`


def test_remote_crash_and_restart(local_ssh_hosts: SshHosts, remote_bench: RemoteBench) -> None:
    """A scheduled crash over SSH does not abort the run; the restart appends to the node's log."""
    [summary] = RunPlan(remote_bench, schedule_from_flags(["1@1:2"], None)).run(
        BenchParameters(mode="hotcrypto", nodes=3, rate=1_500, duration=4, accounts=60)
    )
    log_dir = Path(summary.config["logs"])
    faults = FaultLog.load(log_dir)
    assert [(e.kind, e.node) for e in faults.events] == [("crash", 1), ("restart", 1)]
    [node] = [p for p in load_run(log_dir).nodes if p.source == "node-1.log"]
    restart_ms = faults.events[1].time_ms
    assert any(r["time_ms"] < faults.events[0].time_ms for r in node.records)
    assert any(r["time_ms"] > restart_ms for r in node.records)


def test_remote_partition_and_delay(remote_bench: RemoteBench) -> None:
    """Every node gets the emulation file (uploaded with the run) and the flag; the partition's
    events count from the clients' start, fixed before the nodes booted."""
    remote_bench.partition_lead = 3.0
    [summary] = RunPlan(remote_bench, schedule_from_flags(None, None, ["2@1-2.5"])).run(
        BenchParameters(mode="hotcrypto", nodes=3, rate=1_500, duration=4, accounts=60,
                        delay_ms=40)
    )  # fmt: skip
    log_dir = Path(summary.config["logs"])
    faults = FaultLog.load(log_dir)
    assert [(e.kind, e.node, e.t) for e in faults.events] == [
        ("partition", 2, 1.0),
        ("heal", 2, 2.5),
    ]
    assert summary.config["delay_ms"] == 40
    for node in range(3):
        log = (log_dir / f"node-{node}.log").read_text()
        line = next(x for x in log.splitlines() if x.startswith("network emulation: "))
        emulation = json.loads(line.removeprefix("network emulation: "))
        assert emulation["default_delay_ms"] == 40
        [window] = emulation["partitions"]
        assert window["end_unix_ms"] - window["start_unix_ms"] == 1_500
        assert window["start_unix_ms"] == round(faults.start_ms + 1_000)


def _runs_table(outcomes: Sequence[Outcome], page: Page) -> None:
    page.table(
        ["configuration", "runs"],
        [[o.configuration.label, str(len(o.summaries))] for o in outcomes],
    )


def test_an_experiment_runs_on_the_hosts(remote_bench: RemoteBench, tmp_path: Path) -> None:
    """`fab experiment NAME --remote`: the configurations run through `fab remote`'s runner, the
    page quotes `fab remote` commands and names the hosts, and a configuration that runs in one
    process is left out, said so."""
    on_hosts = Experiment(
        name="on-hosts",
        title="On the hosts",
        question="Do the stand-ins run on the hosts?",
        configurations=lambda quick: [
            Configuration(
                "hotstuff", {"mode": "hotstuff", "nodes": "3", "rate": "1500", "duration": "3"}
            ),
            Configuration("movevm", {"mode": "movevm", "duration": "1"}),
        ],
        write=_runs_table,
    )
    page = run_experiment(
        on_hosts,
        quick=False,
        repo_root=tmp_path,
        output=tmp_path / "pages",
        logs_dir=tmp_path / "logs",
        results_dir=tmp_path / "results",
        out=StringIO(),
        build=False,
        transport=remote_bench,
    ).read_text()
    assert "Written by `fab experiment on-hosts --remote`" in page
    assert "- Hosts: 3 hosts, none in local (`fab remote`)." in page
    assert "`fab remote --mode=hotstuff --nodes=3 --rate=1500 --duration=3`" in page
    assert "| hotstuff | 1 |" in page
    assert "- movevm: movevm runs in one process: not on the hosts (`fab local`)" in page
