"""Shared fixtures: paths of the fixture logs and stand-in binaries, and the local SSH hosts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest

from benchmark.analysis.pipeline import Pipeline, save
from benchmark.runners.local import build

from .checkout import left_behind, tree_state
from .sshhosts import SshHosts, skip_reason, ssh_hosts

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
STANDINS = TESTS / "standins"
REPO_ROOT = TESTS.parent.parent


def described(mode: str) -> Pipeline:
    """What the real `node describe --mode` prints (fixtures/pipelines, checked in test_e2e)."""
    path = FIXTURES / "pipelines" / f"{mode}.json"
    return Pipeline.from_json(json.loads(path.read_text()), str(path))


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
def release_binaries() -> Path:
    """The `node` and `client` the e2e runs use: `$HOTMOVE_E2E_BINARIES` when set (binaries built
    already), else the harness's own build of this checkout, so no run tests stale binaries."""
    given = os.environ.get("HOTMOVE_E2E_BINARIES")
    if given:
        return Path(given)
    build(REPO_ROOT, StringIO())
    return REPO_ROOT / "target" / "release"
