"""End-to-end `fab local` runs of the real Rust binaries, one per mode (marked `e2e`).

The binaries are the session's `built_binaries`: the node and client the README's `cargo test
--profile ci` builds (conftest.py brings them up to date), unless `HOTMOVE_E2E_BINARIES` names
them. `fab local` runs for a few seconds per mode with its logs and results in a temporary
directory. The assertions are on the saved, parsed summary: non-zero end-to-end throughput, the
stage rows of the mode, a named limiting stage, and no `node` or `client` process left behind.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psutil
import pytest

from benchmark import binary_flags, binary_modes
from benchmark.analysis.pipeline import FILE, describe

from .conftest import described, described_flags, run_fab_local

pytestmark = pytest.mark.e2e


RUNS = {
    "hotstuff": ["--nodes=4", "--rate=10000", "--tx-size=512", "--duration=5"],
    "hotcrypto": ["--nodes=4", "--rate=4000", "--duration=5"],
    "hotmove": ["--nodes=4", "--rate=4000", "--duration=5"],
    "movevm": ["--duration=3"],
    # The Move VM behind the Diem-style adapter: the audit (run by `fab local`, failing it on a
    # bad check) holds every node's balances plus fees to the genesis supply and compares digests.
    "hotmove-adapter": [
        "--nodes=4",
        "--rate=4000",
        "--duration=5",
        "--vm=adapter",
        "--payload=entry",
    ],
    "movevm-adapter": ["--duration=3", "--vm=adapter", "--payload=entry"],
    # Block-STM on every node, payees drawn at random: the audit compares the digests and
    # holds the supply, with the fees credited per batch.
    "hotmove-blockstm-adapter": [
        "--nodes=4",
        "--rate=4000",
        "--duration=5",
        "--vm=adapter",
        "--payload=entry",
        "--exec=blockstm",
        "--dest=uniform",
    ],
    "movevm-waves-smallbank": [
        "--duration=3",
        "--workload=smallbank",
        "--exec=waves",
        "--exec-threads=2",
        "--dest=hot:4",
    ],
    # Workloads: the audit holds smallbank's coins + bank holdings + fees to the genesis supply,
    # and every run to no `invariant_violated` failure (movevm included).
    "hotmove-smallbank-adapter": [
        "--nodes=4",
        "--rate=2000",
        "--duration=5",
        "--vm=adapter",
        "--workload=smallbank",
    ],
    "movevm-kvstore": ["--duration=3", "--workload=kvstore", "--payload=entry"],
    # A cpuheavy transaction takes about 0.6 ms: small channels keep the drain after the stop short.
    "movevm-cpuheavy-adapter": [
        "--duration=3",
        "--workload=cpuheavy",
        "--vm=adapter",
        "--channel-capacity=1000",
    ],
}
STAGES = {
    "hotstuff": ["consensus"],
    "hotcrypto": ["consensus", "verifier", "executor"],
    "hotmove": ["consensus", "verifier", "executor"],
}


def _our_binaries_running(binaries: Path) -> list[psutil.Process]:
    ours = {binaries / name for name in ("node", "client")}
    found = []
    for process in psutil.process_iter(["exe", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if process.info["exe"] and Path(process.info["exe"]) in ours:
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_the_described_modes_are_the_nodes(built_binaries: Path) -> None:
    """The modes the harness knows before a build (benchmark/descriptions/modes.json) are the
    ones the real node lists, in its order (`python3 -m benchmark.binary_modes` writes them
    again)."""
    node = built_binaries / "node"
    listed = subprocess.run(
        [str(node), "describe", "--modes"], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(listed) == json.loads((binary_modes.DESCRIPTIONS / "modes.json").read_text())
    assert list(binary_modes.names()) == ["hotstuff", "hotcrypto", "hotmove", "movevm"]


@pytest.mark.parametrize("mode", ["hotstuff", "hotcrypto", "hotmove", "movevm"])
def test_the_fixture_descriptions_are_the_nodes(mode: str, built_binaries: Path) -> None:
    """The checked-in descriptions the harness, the stand-in node and fake logs use are what the
    real node says, help texts included (`python3 -m benchmark.binary_modes` writes them again)."""
    node = built_binaries / "node"
    assert describe(node, mode) == described(mode)
    printed = subprocess.run(
        [str(node), "describe", "--mode", mode], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(printed) == binary_modes.node_description(mode)


@pytest.mark.parametrize("mode", ["hotstuff", "hotcrypto", "hotmove", "movevm"])
def test_the_fixture_flags_are_the_binaries(mode: str, built_binaries: Path) -> None:
    """The checked-in flag descriptions (descriptions/node/ for `node describe`,
    descriptions/client/ for `client --describe`) are what the real binaries say."""
    node = built_binaries / "node"
    assert binary_flags.describe(node, mode) == described_flags(mode)
    printed = subprocess.run(
        [str(node.with_name("client")), "--describe", "--mode", mode],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(printed) == binary_modes.client_description(mode)


@pytest.mark.parametrize("run", list(RUNS))
def test_fab_local(run: str, tmp_path: Path, built_binaries: Path) -> None:
    mode = run.split("-", maxsplit=1)[0]
    before = {p.pid for p in _our_binaries_running(built_binaries)}
    summary, output = run_fab_local(
        tmp_path, f"--mode={mode}", *RUNS[run], f"--binaries={built_binaries}", timeout=180
    )
    assert "LIMITING STAGE" in output
    assert "AUDIT: ok" in output, output[-3000:]
    assert summary["config"]["mode"] == mode
    # The node's description, beside the logs and in the result.
    [description] = (tmp_path / "logs").glob(f"*/{FILE}")
    assert json.loads(description.read_text()) == summary["pipeline"] == described(mode).to_json()
    assert summary["config"]["vm"] == ("adapter" if run.endswith("-adapter") else "bare")
    workload = next((w for w in ("smallbank", "kvstore", "cpuheavy") if w in run), "transfer")
    assert summary["config"]["workload"] == workload
    if mode in ("hotmove", "movevm"):
        assert f"workload {workload}" in output
    scheme = next((e for e in ("blockstm", "waves") if e in run), "sequential")
    assert summary["config"]["exec"] == scheme
    assert summary["end_to_end"]["tps"] > 0
    assert summary["bottleneck"]["stage"]
    stages = [row["name"] for row in summary["stages"]]
    if mode == "movevm":
        assert "executor" in stages
    else:
        assert stages == STAGES[mode]
        assert summary["consensus"]["tps"] > 0
        assert summary["end_to_end"]["latency"]["count"] > 0
        assert summary["processes"]["nodes"] == 4
        assert summary["processes"]["clients"] == 4
    assert [p for p in _our_binaries_running(built_binaries) if p.pid not in before] == []
