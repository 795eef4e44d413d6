"""Injected bottlenecks: short real `fab local` runs, each made slow in one known place, and the
verdict must name that place (marked `e2e`; they need the release binaries with the CPU, hop and
`--executor-delay-us` support).

They assert on the verdict only, never on a rate or a latency: the machine running them may be
of any size and noisy. Binaries come from `cargo build --release` (as in test_e2e.py) unless
HOTMOVE_E2E_BINARIES names a directory holding `node` and `client` already built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import run_fab_local

pytestmark = pytest.mark.e2e

DURATION = "--duration=8"


def fab_local(binaries: Path, tmp_path: Path, *flags: str) -> dict[str, Any]:
    """Run `fab local` with `flags`; the saved result of its one run."""
    result, _ = run_fab_local(tmp_path, *flags, DURATION, f"--binaries={binaries}", timeout=240)
    return result


def _verdict(result: dict[str, Any]) -> tuple[str, str]:
    return result["bottleneck"]["stage"], result["bottleneck"]["rule"]


def test_one_verifier_thread_far_below_the_offered_rate(
    built_binaries: Path, tmp_path: Path
) -> None:
    result = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--verifier-threads=1", "--rate=60000"
    )
    assert _verdict(result)[0] == "verifier", result["bottleneck"]


def test_a_slowed_executor(built_binaries: Path, tmp_path: Path) -> None:
    # 200 µs per transaction: one executor thread handles at most 5,000 tx/s, whatever the cores.
    result = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--executor-delay-us=200", "--rate=10000"
    )
    assert _verdict(result)[0] == "executor", result["bottleneck"]


def test_a_one_slot_channel_between_verifier_and_executor(
    built_binaries: Path, tmp_path: Path
) -> None:
    # Every channel holds one batch: the verifier waits on the executor or the executor starves.
    result = fab_local(
        built_binaries, tmp_path, "--mode=hotcrypto", "--channel-capacity=1", "--rate=40000"
    )
    assert _verdict(result)[0] in ("verifier", "executor"), result["bottleneck"]


def test_tiny_batches_make_ordering_the_limit(built_binaries: Path, tmp_path: Path) -> None:
    # Two transactions per batch: a batch, its acknowledgements and a digest in a block for every
    # two transactions. In hotstuff mode nothing follows consensus, so no later stage can be
    # blamed (in hotcrypto the verifier's per-batch overhead on such batches limits first).
    result = fab_local(
        built_binaries,
        tmp_path,
        "--mode=hotstuff",
        "--tx-size=512",
        "--batch-size=1024",
        "--rate=150000",
    )
    assert _verdict(result)[0] == "consensus", result["bottleneck"]


def test_a_rate_far_below_capacity_keeps_up(built_binaries: Path, tmp_path: Path) -> None:
    result = fab_local(built_binaries, tmp_path, "--mode=hotcrypto", "--rate=2000")
    assert _verdict(result) == ("offered load", "keeps up"), result["bottleneck"]
