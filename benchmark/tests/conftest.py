"""Shared fixtures: paths of the fixture logs and stand-in binaries, and the local SSH hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from benchmark import binary_modes
from benchmark.analysis.metrics import load_run
from benchmark.analysis.pipeline import Pipeline, save
from benchmark.analysis.run_summary import Summary, summarize
from benchmark.binary_flags import ModeFlags
from benchmark.runners.local import LocalBench

from .checkout import left_behind, tree_state
from .sshhosts import COMMITTEE_PORTS, SshHosts, free_port, skip_reason, ssh_hosts

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
STANDINS = TESTS / "standins"
REPO_ROOT = TESTS.parent.parent
# The Cargo profile the tests build and run the binaries in: Cargo.toml's `[profile.ci]`, the
# README's `cargo test --workspace --profile ci`.
TEST_PROFILE = "ci"
# What that `cargo test` builds, the node among it (node/tests/processes run it), and the client
# as those tests build it (node/tests/processes/harness.rs): after the README's `cargo test`
# both commands are up to date and compile nothing. The node is the one the Rust tests run, with
# the features the workspace's tests turn on (test hooks in `network` and `store` that nothing
# calls, tokio's test utilities): a `cargo build` of it alone would compile our crates and
# several under them once more.
TEST_BUILDS = (
    ["cargo", "test", "--workspace", "--profile", TEST_PROFILE, "--no-run"],
    ["cargo", "build", "-p", "client", "--bin", "client", "--profile", TEST_PROFILE],
)


def described(mode: str) -> Pipeline:
    """What the real `node describe --mode` prints (benchmark/descriptions, checked in
    test_e2e)."""
    return Pipeline.from_json(binary_modes.node_description(mode), f"descriptions of {mode}")


def described_flags(mode: str) -> ModeFlags:
    """What the real `node describe --mode` and `client --describe --mode` say of the flags
    (benchmark/descriptions, checked in test_e2e)."""
    node, client = binary_modes.node_description(mode), binary_modes.client_description(mode)
    return ModeFlags.from_descriptions(mode, node, client, "descriptions")


def describe_into(log_dir: Path, mode: str) -> Path:
    """Put the mode's description beside fake logs, as a runner does."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return save(described(mode), log_dir)


@pytest.fixture(scope="session", autouse=True)
def checkout_left_as_found() -> Iterator[None]:
    """Fails the run (an error at the last test's teardown) if its tests left files in the
    checkout, or changed tracked ones: they belong under pytest's temporary directories."""
    before = tree_state(REPO_ROOT)
    yield
    left = left_behind(before, tree_state(REPO_ROOT))
    if left:
        shown = "\n  ".join(left[:20]) + ("\n  ..." if len(left) > 20 else "")
        pytest.fail(f"the tests left {len(left)} entries in the checkout:\n  {shown}", False)


def standin_bench(tmp_path: Path, binaries: Path = STANDINS, **options: Any) -> LocalBench:
    """A local runner in `tmp_path` of the stand-in binaries (or `binaries`), on free ports unless
    `options` say otherwise. The stand-ins print plausible numbers, not a consistent ledger: the
    run is audited, and a failed audit does not fail it."""
    settings = {"base_port": free_port(COMMITTEE_PORTS), "enforce_audit": False, **options}
    return LocalBench(repo_root=tmp_path, binaries=binaries, out=StringIO(), grace=2.0, **settings)


def standins_with(tmp_path: Path, name: str, before: str) -> Path:
    """A directory of the stand-in binaries in which `name` (node or client) runs the shell lines
    `before` first, then the stand-in: one that fails, or starts late, on purpose."""
    binaries = tmp_path / "bin"
    binaries.mkdir()
    for other in ("node", "client"):
        if other != name:
            (binaries / other).symlink_to(STANDINS / other)
    script = binaries / name
    # Asked what it takes (`node describe`, `client --describe`), it answers at once.
    described = '*" --describe "*|" describe "*'
    script.write_text(
        f'#!/bin/sh\ncase " $* " in {described}) exec {STANDINS / name} "$@";; esac\n'
        f'{before}exec {STANDINS / name} "$@"\n'
    )
    script.chmod(0o755)
    return binaries


def fab(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`fab ARGS` as a user runs it, from the repository root; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "fabric", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def fab_fails(*args: str) -> str:
    """`fab ARGS` that must fail as a user's mistake does: exit code 1 and a message, not a
    traceback. The message (stderr)."""
    result = fab(*args)
    assert result.returncode == 1, (args, result.stdout[-3000:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def run_flags(tmp_path: Path) -> list[str]:
    """The flags of a real run: free ports for its committee, its logs and results in `tmp_path`."""
    return [
        f"--base-port={free_port(COMMITTEE_PORTS)}",
        f"--logs={tmp_path / 'logs'}",
        f"--results={tmp_path / 'results'}",
        f"--work={tmp_path / 'work'}",
    ]


def run_fab_local(tmp_path: Path, *flags: str, timeout: float) -> tuple[dict[str, Any], str]:
    """A real `fab local` run (no build) that must succeed: its one saved result, and what it
    printed."""
    result = fab("local", *flags, "--no-build", *run_flags(tmp_path), timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [saved] = (tmp_path / "results").glob("*.json")
    return json.loads(saved.read_text()), result.stdout


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    """The summary of one synthetic run (`synthetic.write_run`) that tests reshape into the runs
    they need; a module may give its own (`test_profile_tables`)."""
    # `synthetic` describes its run's pipeline with this module's helpers: imported here.
    from .synthetic import write_run  # noqa: PLC0415

    logs = write_run(tmp_path_factory.mktemp("run"))
    return summarize(load_run(logs), {"mode": "hotcrypto", "nodes": 2})


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def standins() -> Path:
    """A directory with stand-in `node` and `client` executables (same CLI, fake METRICS)."""
    return STANDINS


@pytest.fixture(scope="session")
def local_ssh_hosts() -> Iterator[SshHosts]:
    """Three SSH hosts on loopback (one Unix user each) served by a real sshd."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(f"local SSH hosts unavailable: {reason}")
    with ssh_hosts() as hosts:
        yield hosts


@pytest.fixture(scope="session")
def built_binaries() -> Path:
    """The directory of the `node` and `client` the e2e runs use: `$HOTMOVE_E2E_BINARIES` when
    set (binaries built already), else target/ci, brought up to date by `TEST_BUILDS`, so no run
    tests stale binaries."""
    given = os.environ.get("HOTMOVE_E2E_BINARIES")
    if given:
        return Path(given)
    for command in TEST_BUILDS:
        result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            pytest.fail(f"`{' '.join(command)}` failed:\n{result.stderr[-4000:]}", False)
    return REPO_ROOT / "target" / TEST_PROFILE
