"""A CPU budget per node on the real binaries and the real kernel (marked `e2e`): `fab local
--node-cpus=0.25` runs every node in a cgroup capped at a quarter of a core, and the saved result
shows that no node used more, the kernel's counters that it held them there, and the summary that
the budget was asked.

The run is of hotcrypto, not hotstuff: a hotstuff node used at most 0.16 cores at any rate four
clients could offer on a 2-core machine (2,000 to 50,000 tx/s, batches down to 2 transactions),
so its budget would never bind and "at most 0.25" would hold without any cgroup. A hotcrypto node
verifies every signature, and at 12,000 tx/s it wants more than a quarter of a core.

It needs a cgroup cpu controller this process can write (root, cgroup v1 `cpu` or v2 with `cpu`
offered): without one it is skipped, with the reason, except under `CI=true`, where it fails (CI
runs as root on a machine that has one). The binaries come from the `built_binaries` fixture.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmark.analysis.metrics import load_run
from benchmark.analysis.resources.usage import CORES
from benchmark.json_path import number
from benchmark.runners.cgroups import STATS_FILE, CgroupError, Cgroups

from .conftest import run_fab_local

pytestmark = pytest.mark.e2e

BUDGET = 0.25
# The window's mean is the CPU time between two METRICS lines about 8 s apart, of which the
# quota lets through at most BUDGET per 100 ms period: 5 % covers a line stamped a little late.
MEAN_TOLERANCE = 0.05 * BUDGET
# A single second holds ten periods, and its two lines need not fall on period boundaries: one
# period's quota more, and the same lateness.
SECOND_TOLERANCE = 0.1 * BUDGET + MEAN_TOLERANCE


@pytest.fixture
def cpu_controller() -> None:
    try:
        Cgroups().check(BUDGET)
    except CgroupError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the CPU budget test: {error}")
        pytest.skip(f"no writable cgroup cpu controller: {error}")


@pytest.mark.usefixtures("cpu_controller")
def test_every_node_stays_within_a_quarter_core(built_binaries: Path, tmp_path: Path) -> None:
    result, output = run_fab_local(
        tmp_path,
        "--mode=hotcrypto",
        "--rate=12000",
        "--duration=8",
        f"--node-cpus={BUDGET}",
        f"--binaries={built_binaries}",
        timeout=300,
    )
    print(output[output.find(" + RESOURCES") :])
    assert result["config"]["node_cpus"] == BUDGET
    resources = result["resources"]
    budgets = [m for m in resources["machines"] if m["budget"]]
    assert [m["name"] for m in budgets] == [f"node-{i}" for i in range(4)]
    for machine in budgets:
        assert machine["cores"] == BUDGET
        # It ran (it committed), and never beyond its quota.
        assert 0 < machine["cpu_used"] <= BUDGET + MEAN_TOLERANCE, machine
        seconds = [c for c in resources["series"][machine["name"]]["cpu_cores"] if c is not None]
        # The last interval ends at the node's final line, written on its stop: the runner lifts
        # the budgets before stopping the nodes (so that they drain in the time a stop is
        # given), and a node that drained fast there went past the quota in it (0.41 cores).
        assert max(seconds[:-1]) <= BUDGET + SECOND_TOLERANCE, (machine["name"], seconds)
    assert result["consensus"]["tps"] > 0

    assert f"Nodes capped at {BUDGET:g} cores each (CFS quota 25000 µs per 100000 µs)" in output
    assert f" + RESOURCES (--node-cpus: every node capped at {BUDGET:g} cores" in output
    assert f"cores of at most {BUDGET:g}, rss" in output
    assert f"from costs measured at {BUDGET:g} cores per node" in output

    [log_dir] = (tmp_path / "logs").iterdir()
    # Every node was in its group from its start: it sized its thread pools for the one core
    # `available_parallelism` reads from the quota (at least 1), not the machine's.
    for node in load_run(log_dir).nodes:
        assert {number(r, CORES) for r in node.records} == {1.0}, node.source
    # The kernel held every node back at some point: it is the quota that kept them under it,
    # not a light load. And the groups are gone.
    stats = json.loads((log_dir / STATS_FILE).read_text())
    throttled = [stats["groups"][f"node-{i}"].get("nr_throttled", 0) for i in range(4)]
    assert all(count > 0 for count in throttled), stats
    assert not Path(stats["parent"]).exists()
