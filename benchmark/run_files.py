"""A run's committee and the files its binaries read, in the formats of the node's CLI: key files
(written by `node keys`), the committee, the node parameters and the genesis (written by `node
genesis`). Keys and genesis are produced by the `node` binary itself so the harness never
re-implements the key derivation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import binary_modes
from .config import BenchParameters, ConfigError, read_json, run_tool, write_json

# Ports used by one node: consensus, mempool, transactions. Co-located nodes shift by this stride.
PORTS_PER_NODE = 3


@dataclass(frozen=True)
class Ports:
    """The three ports of a node; a second node on the same host uses them plus PORTS_PER_NODE."""

    consensus: int
    mempool: int
    transactions: int

    @classmethod
    def consecutive(cls, base: int) -> Ports:
        return cls(base, base + 1, base + 2)

    def shifted(self, slot: int) -> Ports:
        step = PORTS_PER_NODE * slot
        return Ports(self.consensus + step, self.mempool + step, self.transactions + step)

    def all(self) -> tuple[int, int, int]:
        return (self.consensus, self.mempool, self.transactions)

    def span(self) -> tuple[int, int]:
        """Lowest and highest port (to open a firewall range)."""
        values = (self.consensus, self.mempool, self.transactions)
        return min(values), max(values)


def host_slots(hosts: Sequence[str]) -> list[int]:
    """How many nodes before node i share its host: its slot, by which its ports shift."""
    seen: dict[str, int] = {}
    slots = []
    for host in hosts:
        slots.append(seen.get(host, 0))
        seen[host] = slots[-1] + 1
    return slots


@dataclass(frozen=True)
class Authority:
    name: str
    host: str
    ports: Ports
    stake: int = 1

    @property
    def consensus_address(self) -> str:
        return f"{self.host}:{self.ports.consensus}"

    @property
    def mempool_address(self) -> str:
        return f"{self.host}:{self.ports.mempool}"

    @property
    def transactions_address(self) -> str:
        return f"{self.host}:{self.ports.transactions}"

    def to_json(self) -> dict[str, Any]:
        return {
            "stake": self.stake,
            "consensus_address": self.consensus_address,
            "mempool_address": self.mempool_address,
            "transactions_address": self.transactions_address,
        }


@dataclass(frozen=True)
class Committee:
    """Node i of the committee is authorities[i]; the JSON keeps that order."""

    authorities: tuple[Authority, ...]

    @classmethod
    def build(cls, names: Sequence[str], hosts: Sequence[str], ports: Ports) -> Committee:
        """Node i runs on hosts[i]; nodes sharing a host get disjoint ports (stride 3)."""
        if len(names) != len(hosts):
            raise ConfigError(f"{len(names)} keys for {len(hosts)} hosts")
        if len(set(names)) != len(names):
            raise ConfigError("two nodes have the same public key")
        authorities = [
            Authority(name=name, host=host, ports=ports.shifted(slot))
            for name, host, slot in zip(names, hosts, host_slots(hosts), strict=True)
        ]
        return cls(tuple(authorities))

    def __len__(self) -> int:
        return len(self.authorities)

    def transactions_addresses(self, count: int | None = None) -> list[str]:
        chosen = self.authorities if count is None else self.authorities[:count]
        return [a.transactions_address for a in chosen]

    def to_json(self) -> dict[str, Any]:
        return {"authorities": {a.name: a.to_json() for a in self.authorities}}

    def write(self, path: Path) -> Path:
        return write_json(path, self.to_json())


def generate_key(node_binary: Path, path: Path) -> str:
    """Write a key file with `node keys` and return its public key (hex)."""
    run_tool([str(node_binary), "keys", "--filename", str(path)])
    data = read_json(path)
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: key file has no 'name'")
    return name


def write_genesis(
    node_binary: Path, path: Path, accounts: int, balance: int, seed: int | None = None
) -> Path:
    """Write the genesis with `node genesis` (deterministic accounts from the seed)."""
    command = [
        str(node_binary),
        "genesis",
        "--accounts",
        str(accounts),
        "--balance",
        str(balance),
        "--filename",
        str(path),
    ]
    if seed is not None:
        command += ["--seed", str(seed)]
    run_tool(command)
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("accounts"), list):
        raise ConfigError(f"{path}: genesis has no 'accounts' list")
    if len(data["accounts"]) != accounts:
        raise ConfigError(f"{path}: {len(data['accounts'])} accounts, expected {accounts}")
    return path


@dataclass(frozen=True)
class RunFiles:
    """The configuration files of one run, all in `directory`."""

    directory: Path
    committee: Committee
    key_files: tuple[Path, ...]
    committee_file: Path
    parameters_file: Path
    genesis_file: Path | None
    bench_file: Path


def write_run_files(
    bench: BenchParameters,
    node_binary: Path,
    directory: Path,
    hosts: Sequence[str],
    ports: Ports,
    *,
    genesis: bool,
) -> RunFiles:
    """Write every file a run needs: node-i.json keys, committee, parameters, the genesis
    (when the mode starts from one, as the node describes it), bench."""
    if not binary_modes.runs_committee(bench.mode):
        raise ConfigError(f"mode {bench.mode} runs no nodes")
    if len(hosts) < bench.nodes:
        raise ConfigError(f"{bench.nodes} nodes need {bench.nodes} hosts, got {len(hosts)}")
    directory.mkdir(parents=True, exist_ok=True)
    key_files = tuple(directory / f"node-{i}.json" for i in range(bench.nodes))
    names = [generate_key(node_binary, path) for path in key_files]
    committee = Committee.build(names, list(hosts[: bench.nodes]), ports)
    committee_file = committee.write(directory / "committee.json")
    parameters_file = bench.node.write(directory / "parameters.json")
    genesis_file = None
    if genesis:
        genesis_file = write_genesis(
            node_binary, directory / "genesis.json", bench.accounts, bench.balance
        )
    bench_file = write_json(directory / "bench.json", bench.to_dict())
    return RunFiles(
        directory=directory,
        committee=committee,
        key_files=key_files,
        committee_file=committee_file,
        parameters_file=parameters_file,
        genesis_file=genesis_file,
        bench_file=bench_file,
    )
