"""Shared fixtures: paths of the fixture logs and stand-in binaries, and the local SSH hosts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .sshhosts import SshHosts, skip_reason, ssh_hosts

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
STANDINS = TESTS / "standins"
REPO_ROOT = TESTS.parent.parent


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
