"""`fab install` and `fab remote` with the real binaries on four hosts of their own (marked `e2e`).

The hosts are network namespaces on a bridge, each with its own address and sshd (`nshosts.py`).
The tasks run through `fabfile.py` with two things replaced: AWS (the instance list names the
namespaces' addresses) and the repository root (a temporary one, so settings, logs and results
stay out of the checkout). `fab install --skip-toolchain` fetches a git repository and runs
`cargo build --release` on every host; there `cargo` is a stand-in that copies the real release
`node` and `client` into `target/release` (a build per host would take a CPU half an hour). Then
a 20-s `hotcrypto` run with node 1 crashed at 5 s and restarted at 12 s must pass its audit.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from invoke import Context

from benchmark.analysis.metrics import load_run
from benchmark.faults.events import FaultLog

from .conftest import REPO_ROOT
from .nshosts import NamespaceHosts, namespace_hosts, skip_reason
from .test_faults_e2e import accounting, check_agreement, check_caught_up

pytestmark = pytest.mark.e2e

RATE = 2_000
DURATION = 20
CRASH = "1@5:12"
PORTS = {"consensus": 7000, "mempool": 7001, "transactions": 7002}
# `cargo build --release` on a host: the real binaries, built once on this machine.
STAND_IN_CARGO = """#!/bin/sh
if [ "$1" != build ] || [ "$2" != --release ]; then echo "stand-in cargo: $*" >&2; exit 2; fi
mkdir -p target/release
cp {binaries}/node {binaries}/client target/release/
"""


@pytest.fixture(scope="module")
def hosts() -> Iterator[NamespaceHosts]:
    reason = skip_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the namespace hosts test: {reason}")
        pytest.skip(f"namespace hosts unavailable: {reason}")
    with namespace_hosts(4) as made:
        yield made


def _git(repo: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "tests", "GIT_AUTHOR_EMAIL": "tests@localhost"}
    identity |= {"GIT_COMMITTER_NAME": "tests", "GIT_COMMITTER_EMAIL": "tests@localhost"}
    subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, env=os.environ | identity
    )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def project(
    hosts: NamespaceHosts, built_binaries: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The repository root the tasks see: settings.json for the hosts, and target/release with
    the real binaries (the tasks make keys and the genesis with `node`). On the shared side: the
    repository the hosts fetch and the binaries their stand-in cargo copies."""
    root = tmp_path_factory.mktemp("project")
    (root / "target").mkdir()
    (root / "target" / "release").symlink_to(built_binaries.resolve())
    binaries = hosts.shared_dir / "binaries"
    binaries.mkdir(mode=0o755)
    for name in ("node", "client"):
        shutil.copy(built_binaries / name, binaries / name)
        (binaries / name).chmod(0o755)
    repo = hosts.shared_dir / "hotmove"
    repo.mkdir(mode=0o755)
    (repo / "README.md").write_text("What the hosts fetch; their cargo brings the binaries.\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-q", "-m", "the hosts' checkout")
    for path in [repo, *repo.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    uid, gid = os.stat(hosts.homes[0]).st_uid, os.stat(hosts.homes[0]).st_gid
    for home in hosts.homes:
        files = {
            ".cargo/bin/cargo": (STAND_IN_CARGO.format(binaries=binaries), 0o755),
            ".cargo/env": ('export PATH="$HOME/.cargo/bin:$PATH"\n', 0o644),
            # The repository belongs to root; let the user fetch from it.
            ".gitconfig": ("[safe]\n\tdirectory = *\n", 0o644),
        }
        for relative, (text, mode) in files.items():
            path = home / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(mode)
            for owned in (path, *[p for p in path.parents if p.is_relative_to(home)]):
                os.chown(owned, uid, gid)
    settings = {
        "key": {"name": "unused", "path": str(hosts.key_path)},
        "instances": {"type": "namespace", "regions": ["namespaces"], "user": hosts.user},
        "ports": PORTS,
        "repo": {"name": "hotmove", "url": str(repo), "branch": "main"},
    }
    (root / "settings.json").write_text(json.dumps(settings, indent=2))
    return root


class _Instances:
    """Stands for AWS: the running instances are the namespaces."""

    def __init__(self, addresses: tuple[str, ...]) -> None:
        self.addresses = addresses

    def hosts(self) -> dict[str, list[str]]:
        return {"namespaces": list(self.addresses)}


def _fabfile(monkeypatch: pytest.MonkeyPatch, project: Path, hosts: NamespaceHosts) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    fab = importlib.import_module("fabfile")
    monkeypatch.setattr(fab, "ROOT", project)
    monkeypatch.setattr(fab, "_manager", lambda _settings: _Instances(hosts.addresses))
    return fab


def test_fab_remote_runs_the_real_binaries_on_four_hosts(
    hosts: NamespaceHosts,
    project: Path,
    built_binaries: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fab = _fabfile(monkeypatch, project, hosts)
    fab.install(Context(), skip_toolchain=True)
    for home in hosts.homes:
        for name in ("node", "client"):
            installed = home / "hotmove" / "target" / "release" / name
            assert _digest(installed) == _digest(built_binaries / name)

    fab.remote(
        Context(),
        mode="hotcrypto",
        nodes="4",
        rate=str(RATE),
        duration=str(DURATION),
        crash=[CRASH],
        build=False,
    )
    output = capsys.readouterr().out
    print(output[output.find(" + FAULTS") :])
    assert "AUDIT: ok" in output

    [saved] = (project / "results").glob("*.json")
    result = json.loads(saved.read_text())
    assert result["config"]["where"] == "remote"
    assert result["config"]["hosts"] == [f"{hosts.user}@{a}:22" for a in hosts.addresses]
    # Every node ran on its own host: the committee the nodes were given.
    [committee_file] = (project / ".bench" / "remote").glob("*/committee.json")
    committee = json.loads(committee_file.read_text())["authorities"].values()
    assert sorted(a["consensus_address"] for a in committee) == [
        f"{a}:{PORTS['consensus']}" for a in hosts.addresses
    ]
    kinds = [(e["kind"], e["node"]) for e in result["faults"]["events"]]
    assert kinds == [("crash", 1), ("restart", 1)]
    check_agreement(result)
    check_caught_up(result, 1)
    # What was committed: the clients kept sending through the crash (node 1's moved to another
    # node) and nearly all of it executed everywhere, node 1 included.
    for node in range(4):
        sent, executed = accounting(result, node)
        assert sent >= 0.9 * RATE * DURATION, (node, sent)
        assert executed >= 0.9 * sent, (node, sent, executed)
    # Node 1's restart, over SSH on its host, appended its second life to the same log.
    [log_dir] = (project / "logs").iterdir()
    faults = FaultLog.load(log_dir)
    [node] = [p for p in load_run(log_dir).nodes if p.source == "node-1.log"]
    assert any(r["time_ms"] < faults.events[0].time_ms for r in node.records)
    assert any(r["time_ms"] > faults.events[1].time_ms for r in node.records)
    assert hosts.processes() == []  # nothing of the run is left running on any host
