"""`--partition`, `--delay`, `--delay-matrix` and `--bandwidth`: parsing, checks, and the file the
nodes read."""

from __future__ import annotations

import json
import time
from io import StringIO
from pathlib import Path

import pytest

from benchmark.config import BenchParameters, ConfigError
from benchmark.faults.net_emulation import (
    EmulationError,
    Partition,
    emulates,
    node_file,
    parse_partition,
    read_delay_matrix,
    wait_for_clients_start,
    write_node_file_if_emulating,
)
from benchmark.faults.schedule import schedule_from_flags
from benchmark.flags import FlagError, bench_from_flags
from benchmark.report.text import render_summary
from benchmark.runners.commands import node_command
from benchmark.runners.plan import RunPlan

from .conftest import described_flags, standin_bench

NAMES = ["aa", "bb", "cc", "dd"]


def test_partition_specs() -> None:
    assert parse_partition("3@5-25") == Partition((3,), 5.0, 25.0)
    assert parse_partition(" 2, 1 @ 4.5 - 8 ") == Partition((1, 2), 4.5, 8.0)
    assert parse_partition("1,2@5-25").spec == "1,2@5-25"


@pytest.mark.parametrize("spec", ["", "3", "@5-25", "3@5", "3@-25", "a@5-25", "3@5-x", "3@5:25"])
def test_bad_partition_specs_name_the_flag(spec: str) -> None:
    with pytest.raises(EmulationError, match="--partition"):
        parse_partition(spec)


def test_the_heal_must_follow_the_cut() -> None:
    with pytest.raises(EmulationError, match=r"--partition='3@9-4'.*after"):
        parse_partition("3@9-4")


def test_partitions_join_the_fault_schedule_sorted() -> None:
    schedule = schedule_from_flags([], None, ["2@9-12", "3@5-25"])
    assert [p.start for p in schedule.partitions] == [5.0, 9.0]
    assert not schedule.empty
    assert schedule.to_dict()["partitions"][0] == {"nodes": [3], "start": 5.0, "end": 25.0}


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("4@5-25", "not a booted node"),
        ("3@5-25", "not a booted node"),  # node 3 never booted with --faults=1
        ("0,1,2@5-25", "every node"),
        ("1@30-35", "not within"),
    ],
)
def test_partitions_must_fit_the_run(spec: str, match: str) -> None:
    bench = BenchParameters(nodes=4, faults=1, duration=30)
    with pytest.raises(EmulationError, match=match):
        schedule_from_flags([], None, [spec]).check(bench)


def test_delay_flags_set_bench_fields() -> None:
    bench = bench_from_flags({"delay": "50"})
    assert bench.delay_ms == 50
    assert bench.emulated_links
    assert bench.to_dict()["delay_ms"] == 50
    assert not BenchParameters().emulated_links
    assert bench_from_flags({"delay_matrix": "m.csv"}).delay_matrix == "m.csv"


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"delay": "-1"}, "within"),
        ({"delay": "60001"}, "within"),
        ({"delay": "50", "delay_matrix": "m.csv"}, "not both"),
        ({"delay": "50", "mode": "movevm"}, "need nodes"),
    ],
)
def test_bad_delay_flags(flags: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        bench_from_flags(flags)


def test_the_bandwidth_flag_sets_a_rate_in_mbit_s() -> None:
    bench = bench_from_flags({"bandwidth": "100"})
    assert bench.bandwidth_mbit == 100.0
    assert bench.emulated_links
    assert bench.to_dict()["bandwidth_mbit"] == 100.0
    assert bench_from_flags({"bandwidth": "2.5", "delay": "20"}).bandwidth_mbit == 2.5


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"bandwidth": "0"}, r"--bandwidth must be a positive rate in Mbit/s, got 0"),
        ({"bandwidth": "-10"}, r"--bandwidth must be a positive rate in Mbit/s, got -10"),
        ({"bandwidth": "nan"}, r"within 0\.001\.\.1e\+06 Mbit/s, got nan"),
        ({"bandwidth": "0.0001"}, "a unit mistake"),
        ({"bandwidth": "1e9"}, "a unit mistake"),
        ({"bandwidth": "100", "mode": "movevm"}, "need nodes"),
    ],
)
def test_bad_bandwidths(flags: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        bench_from_flags(flags)


def test_a_bandwidth_that_is_no_number_names_the_flag() -> None:
    with pytest.raises(FlagError, match="--bandwidth must be float, got 'fast'"):
        bench_from_flags({"bandwidth": "fast"})


def test_the_rate_goes_into_the_node_file_beside_the_latency(tmp_path: Path) -> None:
    alone = BenchParameters(bandwidth_mbit=100.0)
    assert emulates(alone, ())
    path = write_node_file_if_emulating(tmp_path / "a", NAMES, alone, (), None)
    assert path is not None
    assert json.loads(path.read_text()) == {"default_delay_ms": 0, "bandwidth_mbit": 100.0}
    both = BenchParameters(delay_ms=25, bandwidth_mbit=0.5)
    path = write_node_file_if_emulating(tmp_path / "b", NAMES, both, (), None)
    assert path is not None
    assert json.loads(path.read_text()) == {"default_delay_ms": 25, "bandwidth_mbit": 0.5}
    # Unlimited: no key, as the node reads it.
    data = node_file(NAMES, delay_ms=25, matrix=None, partitions=(), start_ms=None)
    assert "bandwidth_mbit" not in data


def test_a_local_run_gives_its_nodes_the_rate_and_records_it(tmp_path: Path) -> None:
    """The stand-in node prints the emulation file it was given."""
    local = standin_bench(tmp_path)
    bench = BenchParameters(
        mode="hotcrypto", nodes=4, rate=1_000, duration=2, accounts=40, bandwidth_mbit=100.0
    )
    [summary] = RunPlan(local).run(bench)
    assert summary.config["bandwidth_mbit"] == 100.0
    log_dir = Path(summary.config["logs"])
    for node in range(4):
        log = (log_dir / f"node-{node}.log").read_text()
        line = next(x for x in log.splitlines() if x.startswith("network emulation: "))
        emulation = json.loads(line.removeprefix("network emulation: "))
        assert emulation == {"default_delay_ms": 0, "bandwidth_mbit": 100.0}
    assert "Emulated links: 100 Mbit/s each way" in render_summary(summary)


def write_matrix(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.csv"
    path.write_text(text)
    return path


def test_delay_matrix_rows_are_from_columns_are_to(tmp_path: Path) -> None:
    path = write_matrix(tmp_path, "# one-way ms\n0, 10, 20\n\n11,0,30\n21,31,0\n")
    matrix = read_delay_matrix(path, 3)
    assert (matrix[0][1], matrix[1][0], matrix[2][1]) == (10, 11, 31)
    data = node_file(NAMES[:3], delay_ms=None, matrix=matrix, partitions=(), start_ms=None)
    assert data == {
        "default_delay_ms": 0,
        "delays_ms": {
            "aa": {"bb": 10, "cc": 20},
            "bb": {"aa": 11, "cc": 30},
            "cc": {"aa": 21, "bb": 31},
        },
    }


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0,1\n1,0\n1,1\n0,0\n", "4 rows for 3 nodes"),
        ("0,1,2\n1,0\n2,1,0\n", "row 1 has 2 values"),
        ("0,1,2\n1,0,x\n2,1,0\n", "row 1"),
        ("0,1,2\n1,0,-5\n2,1,0\n", "not within"),
    ],
)
def test_bad_delay_matrices(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(EmulationError, match=match):
        read_delay_matrix(write_matrix(tmp_path, text), 3)


def test_a_matrix_of_regions_places_node_i_in_region_i_mod_r(tmp_path: Path) -> None:
    # Three regions, one of them holding nodes 0 and 3: within it, the diagonal's 1 ms.
    path = write_matrix(tmp_path, "1,40,70\n40,2,100\n70,100,3\n")
    matrix = read_delay_matrix(path, 4)
    assert matrix == [
        [1, 40, 70, 1],
        [40, 2, 100, 40],
        [70, 100, 3, 70],
        [1, 40, 70, 1],
    ]
    with pytest.raises(EmulationError, match="-1 ms from region 1 to 1"):
        read_delay_matrix(write_matrix(tmp_path, "0,40\n40,-1\n"), 4)


def test_a_missing_matrix_is_named(tmp_path: Path) -> None:
    with pytest.raises(EmulationError, match="cannot read"):
        read_delay_matrix(tmp_path / "nope.csv", 3)


def test_partition_windows_count_from_the_clients_start(tmp_path: Path) -> None:
    partitions = (Partition((3,), 5.0, 25.0), Partition((1, 2), 30.0, 32.5))
    bench = BenchParameters(delay_ms=50)
    path = write_node_file_if_emulating(tmp_path, NAMES, bench, partitions, clients_at=1_000.0)
    assert path is not None
    assert json.loads(path.read_text()) == {
        "default_delay_ms": 50,
        "partitions": [
            {"nodes": ["dd"], "start_unix_ms": 1_005_000, "end_unix_ms": 1_025_000},
            {"nodes": ["bb", "cc"], "start_unix_ms": 1_030_000, "end_unix_ms": 1_032_500},
        ],
    }


def test_only_emulated_runs_give_the_nodes_a_file(tmp_path: Path) -> None:
    assert not emulates(BenchParameters(), ())
    assert write_node_file_if_emulating(tmp_path, NAMES, BenchParameters(), (), None) is None
    assert list(tmp_path.iterdir()) == []
    assert emulates(BenchParameters(delay_ms=0), ())
    assert emulates(BenchParameters(), (Partition((1,), 1.0, 2.0),))
    files = {"keys": "k", "committee": "c", "parameters": "p", "genesis": None}
    flags = described_flags("hotcrypto")
    plain = node_command("node", bench=BenchParameters(), flags=flags, **files)
    assert "--net-emulation" not in plain
    emulated = node_command(
        "node", bench=BenchParameters(), flags=flags, net_emulation="net-emulation.json", **files
    )
    assert emulated[-2:] == ["--net-emulation", "net-emulation.json"]


def test_the_clients_start_waits_for_the_plan_or_warns_that_it_passed() -> None:
    out = StringIO()
    wait_for_clients_start(None, 5.0, out)
    planned = time.time() + 0.2
    wait_for_clients_start(planned, 5.0, out)
    assert time.time() >= planned
    assert out.getvalue() == ""
    wait_for_clients_start(time.time() - 3.0, 5.0, out)
    assert out.getvalue().startswith("warning: the nodes took 3.")
    assert "s longer to start than the 5 s allowed" in out.getvalue()
