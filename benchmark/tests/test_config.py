"""The config writers (committee, parameters, keys, genesis) and the command lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.aws.settings import Settings, SettingsError
from benchmark.config import BenchParameters, ConfigError
from benchmark.parameters import NodeParameters, ParametersError
from benchmark.run_files import Committee, Ports, generate_key, write_genesis, write_run_files
from benchmark.runners.commands import client_command, movevm_command, node_command

from .conftest import described_flags


def test_committee_json_matches_the_node_format(tmp_path: Path) -> None:
    committee = Committee.build(["aa", "bb"], ["127.0.0.1", "127.0.0.1"], Ports.consecutive(4000))
    path = committee.write(tmp_path / "committee.json")
    assert json.loads(path.read_text()) == {
        "authorities": {
            "aa": {
                "stake": 1,
                "consensus_address": "127.0.0.1:4000",
                "mempool_address": "127.0.0.1:4001",
                "transactions_address": "127.0.0.1:4002",
            },
            "bb": {
                "stake": 1,
                "consensus_address": "127.0.0.1:4003",
                "mempool_address": "127.0.0.1:4004",
                "transactions_address": "127.0.0.1:4005",
            },
        }
    }


def test_distinct_hosts_share_the_same_ports() -> None:
    committee = Committee.build(
        ["a", "b", "c"], ["10.0.0.1", "10.0.0.2", "10.0.0.1"], Ports(8000, 7000, 6000)
    )
    assert committee.transactions_addresses() == ["10.0.0.1:6000", "10.0.0.2:6000", "10.0.0.1:6003"]
    assert committee.transactions_addresses(2) == ["10.0.0.1:6000", "10.0.0.2:6000"]


def test_committee_rejects_duplicates_and_missing_hosts() -> None:
    with pytest.raises(ConfigError):
        Committee.build(["a", "a"], ["h", "h"], Ports.consecutive(1))
    with pytest.raises(ConfigError):
        Committee.build(["a", "b"], ["h"], Ports.consecutive(1))


def test_parameters_file_of_no_options_is_empty(tmp_path: Path) -> None:
    path = BenchParameters().node.write(tmp_path / "p.json")
    assert json.loads(path.read_text()) == {}


def test_parameters_file_holds_what_was_set_and_nothing_else(tmp_path: Path) -> None:
    bench = BenchParameters(node=NodeParameters(batch_size=1234, gc_depth=0))
    assert json.loads(bench.node.write(tmp_path / "p.json").read_text()) == {
        "batch_size": 1234,
        "gc_depth": 0,
    }


def test_node_parameters_the_node_rejects_fail_early() -> None:
    with pytest.raises(ParametersError, match="batch_size must be at least 1, got 0"):
        NodeParameters(batch_size=0)
    with pytest.raises(ParametersError, match="gc_depth must be at least 0"):
        NodeParameters(gc_depth=-1)


def test_saved_bench_settings_name_only_the_node_parameters_set() -> None:
    bench = BenchParameters(rate=5_000, node=NodeParameters(max_batch_delay=7))
    data = bench.to_dict()
    assert data["rate"] == 5_000
    assert data["max_batch_delay"] == 7
    assert "batch_size" not in data
    assert BenchParameters.from_dict(data) == bench


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "paxos"},
        {"rate": 0},
        {"duration": 0},
        {"mode": "hotstuff", "tx_size": 0},
        {"mode": "hotcrypto", "dest": "zipf"},
        {"mode": "hotcrypto", "dest": "hot:0"},
        {"mode": "hotmove", "dest": "hot:x"},
        {"mode": "movevm", "accounts": 5, "dest": "hot:6"},
        {"mode": "hotcrypto", "nodes": 4, "faults": 2},
    ],
)
def test_bench_parameters_are_validated(kwargs: dict[str, object]) -> None:
    """What the harness decides itself (the binaries' flags are checked against what they
    describe: test_binary_flags.py)."""
    with pytest.raises(ConfigError):
        BenchParameters(**kwargs)  # type: ignore[arg-type]


def test_rate_is_split_over_live_clients() -> None:
    bench = BenchParameters(nodes=4, faults=1, rate=30_000)
    assert bench.live_nodes == 3
    assert bench.rate_per_client == 10_000
    assert BenchParameters.from_dict({**bench.to_dict(), "unknown": 1}) == bench


def test_keys_and_genesis_come_from_the_node_binary(tmp_path: Path, standins: Path) -> None:
    name = generate_key(standins / "node", tmp_path / "k.json")
    assert json.loads((tmp_path / "k.json").read_text())["name"] == name
    write_genesis(standins / "node", tmp_path / "g.json", accounts=5, balance=10, seed=3)
    accounts = json.loads((tmp_path / "g.json").read_text())["accounts"]
    assert len(accounts) == 5
    assert {a["balance"] for a in accounts} == {10}


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        generate_key(tmp_path / "nothing", tmp_path / "k.json")


def test_run_files(tmp_path: Path, standins: Path) -> None:
    bench = BenchParameters(mode="hotmove", nodes=4, faults=1, accounts=8)
    files = write_run_files(
        bench, standins / "node", tmp_path, ["127.0.0.1"] * 4, Ports.consecutive(5000), genesis=True
    )
    assert [p.name for p in files.key_files] == [f"node-{i}.json" for i in range(4)]
    assert len(files.committee) == 4
    names = [json.loads(p.read_text())["name"] for p in files.key_files]
    assert list(json.loads(files.committee_file.read_text())["authorities"]) == names
    assert files.genesis_file is not None
    assert len(json.loads(files.genesis_file.read_text())["accounts"]) == 8
    assert BenchParameters.from_dict(json.loads(files.bench_file.read_text())) == bench

    hotstuff = write_run_files(
        BenchParameters(mode="hotstuff", nodes=1),
        standins / "node",
        tmp_path / "hs",
        ["h"],
        Ports.consecutive(1),
        genesis=False,
    )
    assert hotstuff.genesis_file is None
    with pytest.raises(ConfigError):
        write_run_files(
            BenchParameters(mode="movevm"),
            standins / "node",
            tmp_path,
            ["h"],
            Ports.consecutive(1),
            genesis=True,
        )


def _node(bench: BenchParameters, genesis: str | None = "g") -> list[str]:
    flags = described_flags(bench.mode)
    return node_command(
        "node", keys="k", committee="c", parameters="p", genesis=genesis, bench=bench, flags=flags
    )


def _client(bench: BenchParameters, genesis: str | None = "g") -> list[str]:
    flags = described_flags(bench.mode)
    return client_command(
        "c", bench=bench, flags=flags, target="a", nodes=["a"], index=0, genesis=genesis
    )


def _movevm(bench: BenchParameters) -> list[str]:
    return movevm_command("client", bench, described_flags("movevm"))


def test_node_and_client_command_lines() -> None:
    bench = BenchParameters(
        mode="hotcrypto", nodes=4, faults=1, rate=3000, duration=7, verifier_threads=2
    )
    assert _node(bench) == [
        "node", "run", "--keys", "k", "--committee", "c", "--parameters", "p",
        "--genesis", "g", "--mode", "hotcrypto", "--verifier-threads", "2",
    ]  # fmt: skip
    client = client_command(
        "client",
        bench=bench,
        flags=described_flags("hotcrypto"),
        target="a:2",
        nodes=["a:2", "b:2", "c:2"],
        index=1,
        genesis="g",
    )
    assert client == [
        "client", "--target", "a:2", "--nodes", "a:2,b:2,c:2", "--rate", "1000", "--duration", "7",
        "--mode", "hotcrypto", "--client-index", "1", "--clients", "3", "--genesis", "g",
    ]  # fmt: skip

    hotstuff = BenchParameters(mode="hotstuff", nodes=1, rate=10, tx_size=64)
    command = _client(hotstuff, genesis=None)
    assert command[-2:] == ["--size", "64"]
    assert "--genesis" not in command
    # The binaries' defaults are not spelled out (197 bytes is the client's own).
    assert "--size" not in _client(BenchParameters(mode="hotstuff"), genesis=None)

    assert _movevm(BenchParameters(mode="movevm", duration=3, accounts=9)) == [
        "client", "--mode", "movevm", "--duration", "3", "--accounts", "9",
    ]  # fmt: skip
    adapter = BenchParameters(mode="movevm", vm="adapter", payload="entry", workload="cpuheavy")
    assert _movevm(adapter)[-6:] == [
        "--vm", "adapter", "--payload", "entry", "--workload", "cpuheavy",
    ]  # fmt: skip
    sorting = BenchParameters(mode="movevm", workload="cpuheavy", workload_arg=512)
    assert _movevm(sorting)[-4:] == [
        "--workload", "cpuheavy", "--workload-arg", "512",
    ]  # fmt: skip
    hotmove = BenchParameters(
        mode="hotmove", vm="adapter", payload="entry", workload="kvstore", workload_arg=8
    )
    node = _node(hotmove)
    # The node sets up the workload's genesis; the size is the client's business.
    assert node[-6:] == ["--mode", "hotmove", "--vm", "adapter", "--workload", "kvstore"]
    assert "--workload-arg" not in node
    # The transactions are the same under both VMs: the client is told how to send them, the
    # node what runs them.
    client = _client(hotmove)
    assert "--vm" not in client
    assert client[-6:] == [
        "--payload", "entry", "--workload", "kvstore", "--workload-arg", "8",
    ]  # fmt: skip
    assert "--payload" not in node
    crypto = BenchParameters(mode="hotcrypto")
    assert "--workload" not in _node(crypto)
    assert "--workload" not in _client(crypto)
    sized = BenchParameters(mode="movevm", node=NodeParameters(channel_capacity=50))
    assert _movevm(sized)[-2:] == ["--channel-capacity", "50"]


def test_execution_goes_to_whatever_executes() -> None:
    bench = BenchParameters(
        mode="hotmove", vm="adapter", exec="blockstm", exec_threads=3, fees="per-tx"
    )
    assert _node(bench)[-10:] == [
        "--mode", "hotmove", "--vm", "adapter",
        "--exec", "blockstm", "--exec-threads", "3", "--fees", "per-tx",
    ]  # fmt: skip
    assert "--exec" not in _client(bench)
    assert _movevm(BenchParameters(mode="movevm", exec="waves"))[-2:] == ["--exec", "waves"]
    # Sequential execution and block fees are the binaries' defaults: not spelled out.
    assert "--exec" not in _node(BenchParameters(mode="hotmove"))
    assert BenchParameters.from_dict(bench.to_dict()) == bench


def test_verify_goes_to_the_nodes_when_not_their_default() -> None:
    attested = BenchParameters(mode="hotcrypto", verify="attested")
    node = _node(attested)
    assert node[node.index("--verify") + 1] == "attested"
    assert "--verify" not in _client(attested)


def test_dest_goes_to_whatever_generates_the_transactions() -> None:
    hot = BenchParameters(mode="hotcrypto", dest="hot:1", accounts=10)
    assert _client(hot)[-2:] == ["--dest", "hot:1"]
    assert "--dest" not in _node(hot)
    assert _movevm(BenchParameters(mode="movevm", dest="uniform"))[-2:] == ["--dest", "uniform"]
    # The default ring is the clients' own default: not spelled out.
    assert "--dest" not in _movevm(BenchParameters(mode="movevm"))
    assert BenchParameters.from_dict(hot.to_dict()).dest == "hot:1"


def test_switches_and_test_knobs_reach_the_node() -> None:
    bench = BenchParameters(mode="hotcrypto", executor_delay_us=50, no_instrumentation=True)
    node = _node(bench)
    assert node[node.index("--executor-delay-us") + 1] == "50"
    assert "--no-instrumentation" in node
    assert "--no-instrumentation" not in _client(bench)


def test_settings_load(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "settings.example.json"
    settings = Settings.load(example)
    assert settings.regions[0] == "us-east-1"
    assert settings.ports == Ports(8000, 8001, 8002)
    assert settings.key_path.is_absolute()
    with pytest.raises(SettingsError, match="not found"):
        Settings.load(tmp_path / "settings.json")
    broken = tmp_path / "broken.json"
    data = json.loads(example.read_text())
    del data["key"]["path"]
    broken.write_text(json.dumps(data))
    with pytest.raises(SettingsError, match=r"key\.path"):
        Settings.load(broken)
