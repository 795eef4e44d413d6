"""From `fab` flags to sweep points: defaults come from one place, node parameters from none."""

from __future__ import annotations

import pytest

from benchmark.config import REMOTE_DEFAULTS, BenchParameters, ConfigError
from benchmark.flags import (
    FlagError,
    bench_from_flags,
    default_text,
    either,
    int_list,
    sweep_from_flags,
)
from benchmark.parameters import NodeParameters
from benchmark.runners.commands import node_command

from .conftest import described_flags

NOTHING_GIVEN = {"mode": None, "nodes": None, "rate": None, "batch_size": None, "runs": None}


def test_no_flags_give_the_bench_defaults_and_no_node_parameter() -> None:
    [point] = sweep_from_flags(NOTHING_GIVEN)
    assert point == BenchParameters()
    assert point.node.to_json() == {}


def test_a_flag_given_sets_its_field_and_nothing_else() -> None:
    bench = bench_from_flags({"batch_delay": "50", "batch_size": None, "invalid_share": "0.25"})
    assert bench.node == NodeParameters(max_batch_delay=50)
    assert bench.invalid_share == 0.25
    assert bench.duration == BenchParameters().duration


def test_remote_defaults_apply_unless_a_flag_is_given() -> None:
    assert bench_from_flags({}, REMOTE_DEFAULTS).duration == REMOTE_DEFAULTS["duration"]
    assert bench_from_flags({"duration": "5"}, REMOTE_DEFAULTS).duration == 5
    assert REMOTE_DEFAULTS["duration"] != BenchParameters().duration


def test_unreadable_flags_are_named() -> None:
    with pytest.raises(FlagError, match="--tx-size must be int, got 'big'"):
        bench_from_flags({"tx_size": "big"})
    with pytest.raises(FlagError, match="--rate must be comma-separated integers, got '1,x'"):
        int_list("1,x", "rate")
    with pytest.raises(FlagError, match="--nodes is empty"):
        int_list(",", "nodes")


def test_lists_of_nodes_and_rates_span_the_sweep() -> None:
    points = sweep_from_flags({**NOTHING_GIVEN, "nodes": "4,7", "rate": "100,200", "runs": "2"})
    assert [(p.nodes, p.rate, p.runs) for p in points] == [
        (4, 100, 2),
        (4, 200, 2),
        (7, 100, 2),
        (7, 200, 2),
    ]


def test_every_point_is_validated_before_any_is_returned() -> None:
    with pytest.raises(ConfigError, match="rate must be positive, got 0"):
        sweep_from_flags({"rate": "100,0"})
    with pytest.raises(ConfigError, match="faults must be between 0 and 0 for 2 nodes"):
        sweep_from_flags({"nodes": "4,2", "faults": "1"})


def test_an_alias_gives_the_same_value_and_both_at_once_is_an_error() -> None:
    assert either(None, "1,2", "rate", "rates") == "1,2"
    assert either("3", None, "rate", "rates") == "3"
    assert either(None, None, "rate", "rates") is None
    with pytest.raises(FlagError, match="--rate and --rates are the same flag"):
        either("3", "4", "rate", "rates")


def test_help_shows_the_default_from_where_it_is_defined() -> None:
    assert default_text("nodes") == f"default {BenchParameters().nodes}"
    assert default_text("duration", REMOTE_DEFAULTS) == f"default {REMOTE_DEFAULTS['duration']}"
    assert default_text("batch_delay") == "default: the node's"
    assert default_text("verifier_threads") == "default: the node's"


def test_faults_are_checked_against_the_committee_given() -> None:
    [point] = sweep_from_flags({"nodes": "7", "faults": "2"})
    assert (point.nodes, point.faults) == (7, 2)


def test_store_switches_every_node_to_its_own_file() -> None:
    bench = bench_from_flags({"store": True})
    assert bench.store
    assert not BenchParameters().store
    assert bench_from_flags({"store": "off"}).store is False
    with pytest.raises(FlagError, match="--store must be true or false"):
        bench_from_flags({"store": "maybe"})
    files = {"keys": "k.json", "committee": "c.json", "parameters": "p.json", "genesis": None}
    flags = described_flags("hotcrypto")
    on = node_command("node", bench=bench, flags=flags, store="store-node-0.redb", **files)
    assert on[on.index("--store") + 1] == "store-node-0.redb"
    assert "--store" not in node_command("node", bench=BenchParameters(), flags=flags, **files)


def test_workload_flags_reach_the_bench_as_their_types() -> None:
    bench = bench_from_flags({"mode": "movevm", "workload": "cpuheavy", "workload_arg": "512"})
    assert (bench.workload, bench.workload_arg) == ("cpuheavy", 512)
    assert bench_from_flags({"mode": "hotmove"}).workload == "transfer"
    with pytest.raises(FlagError, match="--workload-arg must be int, got 'many'"):
        bench_from_flags({"mode": "movevm", "workload": "kvstore", "workload_arg": "many"})
    with pytest.raises(ConfigError, match="--workload needs the Move VM"):
        described_flags("hotcrypto").check(
            bench_from_flags({"mode": "hotcrypto", "workload": "smallbank"})
        )
    assert default_text("workload") == "default transfer"
    # What the client does without it is the client's help's to say (`--workload-arg`).
    assert default_text("workload_arg") == "default: the client's"
