"""A dilated run on the real binaries and the real kernel (marked `e2e`): `fab local --dilation=4
--vcpus=1.5` must write a quota for every node, for each of its threads and for the clients, slow
every process's clock four times, and print and save its figures in dilated time, labelled.

It checks the mechanism, not throughput (throughput belongs on the gate's page,
docs/results/dilation.md): the rate is one a committee of this size keeps up with, so the
delivered rate in dilated time is the rate asked, four times what the clients sent per real
second; a figure left in real time would be off fourfold.

It needs root and a cgroup cpu controller this process can write: without them it is skipped,
with the reason, except under `CI=true`, where it fails (CI runs as root on a machine that has
one). The binaries come from the `built_binaries` fixture.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from benchmark.runners.cgroups import STATS_FILE, CgroupError, Cgroups

from .conftest import run_fab_local

pytestmark = pytest.mark.e2e

K = 4
VCPUS = 1.5
DURATION = 4
RATE = 8_000
# A tracing line's time: `2026-11-28T12:34:56.789Z`, as `stages::logging` writes it.
LOG_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z ")
# The colours tracing writes around it.
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def root_and_cpu_controller() -> None:
    try:
        if os.geteuid() != 0:
            raise CgroupError("not root")
        Cgroups().hierarchy()
    except CgroupError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the dilation test: {error}")
        pytest.skip(f"no root or no writable cgroup cpu controller: {error}")


def _log_seconds(log: Path) -> list[float]:
    """The times (s since the epoch) of a log's tracing lines."""
    seconds = []
    for line in log.read_text(errors="replace").splitlines():
        found = LOG_TIME.match(ANSI.sub("", line))
        if found:
            y, mo, d, h, mi, s, ms = (int(x) for x in found.groups())
            stamp = time.strptime(f"{y}-{mo}-{d} {h}:{mi}:{s}", "%Y-%m-%d %H:%M:%S")
            seconds.append(time.mktime(stamp) - time.timezone + ms / 1000)
    return seconds


@pytest.mark.usefixtures("root_and_cpu_controller")
def test_a_dilated_run_holds_threads_slows_clocks_and_reports_dilated_time(
    built_binaries: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    result, output = run_fab_local(
        tmp_path,
        "--mode=hotcrypto",
        f"--rate={RATE}",
        f"--duration={DURATION}",
        f"--dilation={K}",
        f"--vcpus={VCPUS}",
        "--client-vcpus=0.4",
        f"--binaries={built_binaries}",
        timeout=600,
    )
    elapsed = time.monotonic() - started

    # Quotas: V/K of a core per node, 1/K per thread, the clients' once they sent.
    [log_dir] = (tmp_path / "logs").iterdir()
    budget = json.loads((log_dir / STATS_FILE).read_text())
    assert (budget["node_quota_us"], budget["node_period_us"]) == (1_500, 4_000)
    assert (budget["thread_quota_us"], budget["thread_period_us"]) == (1_000, 4_000)
    # Each node's runtime workers, verifier threads, executor, ... were each placed.
    assert sorted(budget["threads_placed"]) == [f"node-{i}" for i in range(4)]
    assert all(count >= 4 for count in budget["threads_placed"].values()), budget
    # The kernel held them: some periods were throttled.
    assert any(g.get("nr_throttled", 0) > 0 for g in budget["groups"].values()), budget
    assert f"Dilated ×{K}: nodes of {VCPUS:g} virtual CPUs (1500 µs per 4000 µs)" in output

    # Clocks: the clients sent for DURATION of their seconds, K times as many real ones; a
    # node's log lines are stamped on its clock, which ran K times slower than the real one.
    assert elapsed > K * DURATION
    node_log = _log_seconds(log_dir / "node-0.log")
    assert len(node_log) >= 2
    span = node_log[-1] - node_log[0]
    assert span < elapsed / K + 2, (span, elapsed)
    assert result["config"]["dilation"] == K
    window = result["window"]
    assert (window["end_ms"] - window["load_start_ms"]) / 1000 == pytest.approx(DURATION, abs=1.5)

    # Figures in dilated time: the rate asked was delivered (not a quarter of it), labelled.
    assert result["end_to_end"]["tps"] == pytest.approx(RATE, rel=0.2)
    assert f" + [dilated ×{K}] END-TO-END:" in output
    assert f" + [dilated ×{K}] STAGES" in output
    assert f"time dilated ×{K}" in output
    assert "AUDIT: ok" in output, output[-3000:]
