"""A run's settings checked against what the binaries say each mode takes (`node describe`,
`client --describe`: fixtures/, which test_e2e checks against the real binaries)."""

from __future__ import annotations

import pytest

from benchmark import binary_modes
from benchmark.binary_flags import ModeFlags
from benchmark.config import BenchParameters, ConfigError, passed_fields
from benchmark.experiments import workloads

from .conftest import described_flags


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"vm": "adapter"}, "--vm needs the Move VM: mode hotcrypto has none"),
        ({"mode": "movevm", "vm": "diem"}, "unknown --vm 'diem'; expected one of bare, adapter"),
        ({"mode": "movevm", "payload": "module"}, "unknown --payload 'module'; expected one of"),
        ({"payload": "entry"}, "--payload needs the Move VM: mode hotcrypto has none"),
        ({"mode": "movevm", "workload": "ycsb"}, "unknown --workload 'ycsb'; expected one of"),
        ({"workload": "kvstore"}, "--workload needs the Move VM: mode hotcrypto has none"),
        (
            {"mode": "movevm", "workload": "smallbank", "workload_arg": 3},
            "--workload-arg is for --workload cpuheavy|kvstore, not smallbank",
        ),
        (
            {"mode": "movevm", "workload": "cpuheavy", "workload_arg": 0},
            "--workload-arg must be at least 1, got 0",
        ),
        ({"mode": "hotstuff", "dest": "uniform"}, "--dest needs an executor: mode hotstuff"),
        ({"mode": "hotmove", "exec": "optimistic"}, "unknown --exec 'optimistic'; expected one"),
        ({"exec": "blockstm"}, "--exec needs the Move VM: mode hotcrypto has none"),
        (
            {"mode": "hotmove", "exec_threads": 2},
            "--exec-threads is for --exec waves|blockstm, not sequential",
        ),
        (
            {"mode": "movevm", "exec": "waves", "exec_threads": 0},
            "--exec-threads must be at least 1, got 0",
        ),
        ({"mode": "hotmove", "vm": "adapter", "fees": "never"}, "unknown --fees 'never'"),
        ({"mode": "hotmove", "fees": "per-tx"}, "--fees is for --vm adapter, not bare"),
        ({"verify": "some"}, "unknown --verify 'some'; expected one of all, attested"),
        (
            {"mode": "hotstuff", "verify": "attested"},
            "--verify needs signatures: mode hotstuff has none",
        ),
        ({"invalid_share": 1.5}, "--invalid-share must be at most 1, got 1.5"),
        ({"verifier_threads": 0}, "--verifier-threads must be at least 1, got 0"),
        ({"mode": "hotstuff", "verifier_threads": 2}, "--verifier-threads needs signatures"),
        ({"mode": "hotstuff", "tx_size": 8}, "--tx-size must be at least 9, got 8"),
        ({"tx_size": 300}, "--tx-size needs opaque transactions: mode hotcrypto has none"),
        ({"mode": "hotstuff", "executor_delay_us": 5}, "--executor-delay-us needs an executor"),
        ({"misbehave": "silent-attester"}, "--misbehave is for --verify attested, not all"),
        (
            {"verify": "attested", "misbehave": "honest"},
            "unknown --misbehave 'honest'; expected one of silent-attester, lying-attester",
        ),
        (
            {"nodes": 7, "verify": "attested", "misbehave": "silent-attester,lazy-attester"},
            "unknown --misbehave 'lazy-attester'",
        ),
    ],
)
def test_a_setting_the_binaries_would_refuse_is_refused_with_their_reason(
    kwargs: dict[str, object], message: str
) -> None:
    bench = BenchParameters(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        described_flags(bench.mode).check(bench)
    assert str(caught.value).startswith(message), caught.value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "hotmove", "vm": "adapter", "fees": "per-tx"},
        {"mode": "movevm", "vm": "adapter", "fees": "per-tx"},
        {"mode": "movevm", "exec": "waves", "exec_threads": 2},
        {"mode": "hotmove", "workload": "kvstore", "workload_arg": 8, "payload": "entry"},
        {"mode": "hotcrypto", "verify": "attested", "verifier_threads": 1, "invalid_share": 1.0},
        {"mode": "hotstuff", "tx_size": 9, "no_instrumentation": True},
        {"mode": "hotmove", "dest": "hot:3", "executor_delay_us": 10},
        {"mode": "hotcrypto", "verify": "attested", "misbehave": "lying-attester"},
        {"nodes": 7, "verify": "attested", "misbehave": "silent-attester,lying-attester"},
    ],
)
def test_settings_a_binary_of_the_mode_takes_pass(kwargs: dict[str, object]) -> None:
    bench = BenchParameters(**kwargs)  # type: ignore[arg-type]
    described_flags(bench.mode).check(bench)


@pytest.mark.parametrize("mode", binary_modes.names())
def test_the_harness_defaults_are_the_binaries(mode: str) -> None:
    """A passed setting left at the harness's default is what the binaries take without the
    flag, so nothing is passed and nothing refused: the defaults cannot drift apart."""
    flags = described_flags(mode)
    bench = BenchParameters(mode=mode)
    flags.check(bench)
    assert flags.node_arguments(bench) == []
    assert flags.client_arguments(bench) == []
    for setting, flag in passed_fields().items():
        for table in (flags.node, flags.client):
            if flag in table:
                assert table[flag].is_default(getattr(bench, setting)), (mode, setting)


def test_every_passed_setting_is_a_flag_of_a_binary() -> None:
    known = set()
    for mode in binary_modes.names():
        flags = described_flags(mode)
        known |= set(flags.node) | set(flags.client)
    assert set(passed_fields().values()) <= known


def test_a_mode_without_a_committee_takes_no_node_flag() -> None:
    movevm = described_flags("movevm")
    assert movevm.node == {}
    assert movevm.client["vm"].applies
    assert not described_flags("hotmove").client["vm"].applies


def test_the_workloads_page_spans_the_binaries_choices() -> None:
    client = described_flags("movevm").client
    assert client["workload"].choices == workloads.WORKLOADS
    assert client["vm"].choices == workloads.VMS
    assert client["payload"].choices == workloads.PAYLOADS


def test_a_malformed_description_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="flags"):
        ModeFlags.from_descriptions("hotcrypto", {"process": "node", "flags": {}}, {}, "x")
    with pytest.raises(ConfigError, match="lacks"):
        ModeFlags.from_descriptions("hotcrypto", {"process": "node", "flags": [{}]}, {}, "x")


def test_a_setting_no_binary_of_the_mode_takes_is_named() -> None:
    bench = BenchParameters(mode="movevm", verify="attested")
    with pytest.raises(ConfigError, match="no binary that mode movevm runs takes --verify"):
        described_flags("movevm").check(bench)


def test_only_the_misbehaving_members_take_their_conduct() -> None:
    """`--misbehave` names one conduct per Byzantine member: the last live nodes take them, in
    order, and the others' command lines carry no such flag."""
    flags = described_flags("hotcrypto")
    bench = BenchParameters(nodes=7, verify="attested", misbehave="silent-attester, lying-attester")
    flags.check(bench)
    taken = {index: flags.node_arguments(bench, index) for index in range(7)}
    for index in range(5):
        assert "--misbehave" not in taken[index], index
    assert taken[5][-2:] == ["--misbehave", "silent-attester"]
    assert taken[6][-2:] == ["--misbehave", "lying-attester"]
    assert "--misbehave" not in flags.node_arguments(bench)
    # The nodes left down come last: the misbehaving ones are the last that run.
    down = BenchParameters(nodes=7, faults=1, verify="attested", misbehave="lying-attester")
    assert down.misbehaving() == {5: "lying-attester"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"misbehave": "silent-attester,lying-attester"}, "--misbehave makes 2 members"),
        ({"faults": 1, "misbehave": "silent-attester"}, "--misbehave makes 1 members"),
        ({"misbehave": " , "}, "--misbehave names no member"),
        ({"mode": "movevm", "misbehave": "silent-attester"}, "--misbehave needs members"),
    ],
)
def test_more_byzantine_members_than_f_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BenchParameters(verify="attested", **kwargs)  # type: ignore[arg-type]
    assert str(caught.value).startswith(message), caught.value
