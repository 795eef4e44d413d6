"""Configuration of a run: the bench parameters, what the harness decides of them itself, and
reading and writing the JSON the binaries read and print (the run's files: `run_files.py`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from . import binary_modes
from .errors import HarnessError
from .parameters import NodeParameters

# The node refuses larger link latencies as unit mistakes (network::emulation).
MAX_DELAY_MS = 60_000
# And link rates (Mbit/s) outside these bounds.
MIN_BANDWIDTH_MBIT = 0.001
MAX_BANDWIDTH_MBIT = 1_000_000.0

# The smallest `node_cpus`: the kernel accepts no CFS quota under 1 ms, and the period is 100 ms.
MIN_NODE_CPUS = 0.01


class ConfigError(HarnessError):
    """A bench parameter or a configuration file is invalid."""


def passed(default: Any, flag: str | None = None) -> Any:  # noqa: ANN401 - the field's type
    """A setting that is a flag of `node run` or `client` (`flag`, or the field's name with
    dashes), which the harness checks and passes through as the binaries describe it
    (`binary_flags.py`)."""
    return field(default=default, metadata={PASSED: flag or ""})


PASSED = "passed"


def passed_fields() -> dict[str, str]:
    """Field name -> the flag of the binaries it is (`exec_threads` -> `exec-threads`)."""
    return {
        f.name: f.metadata[PASSED] or f.name.replace("_", "-")
        for f in fields(BenchParameters)
        if PASSED in f.metadata
    }


@dataclass(frozen=True)
class BenchParameters:
    """What one benchmark run does. `rate` is the total over all clients (tx/s).

    A field made with `passed` is a flag of the binaries: what it does is the flag's `--help`
    (`node run --help`, `client --help`, or `fab local --help`, which shows the same text).

    These defaults are the harness's only ones: `fab` flags that are not given are left out and
    filled in here (remote runs change one, see REMOTE_DEFAULTS). Node parameters get no default
    here at all: `node` holds only what was set, and the node supplies the rest.
    """

    mode: str = "hotcrypto"
    nodes: int = 4
    faults: int = 0
    rate: int = 20_000
    # The size of hotstuff's opaque transactions (the client's `--size`).
    tx_size: int = passed(197, flag="size")
    duration: int = 10
    # A flag of `node run`, not a parameters field; None: the node's default (every core).
    verifier_threads: int | None = passed(None)
    # A flag of `node run`: the worker threads of its consensus runtime; None: every core.
    consensus_threads: int | None = passed(None)
    # Test only (a flag of `node run`): the executor busy-spins this many µs per transaction, so
    # it becomes the bottleneck on purpose (the injected-bottleneck tests). None: no delay.
    executor_delay_us: int | None = passed(None)
    # Every node keeps blocks, batches and its safety state in a durable store (`node run
    # --store`) instead of memory; a node restarted by the fault schedule resumes from it.
    store: bool = False
    # Test only (a flag of `node run`): nodes skip the CPU per stage and the hop timestamps of
    # samples, to measure what they cost. False: the node's default (instrumented).
    no_instrumentation: bool = passed(False)
    accounts: int = 10_000
    balance: int = 1_000_000_000
    invalid_share: float = passed(0.0)
    # What runs Move transactions (hotmove, movevm): the bare VM or the VM behind Diem's adapter.
    vm: str = passed("bare")
    # How Move calls enter the VM (hotmove, movevm): a script or an entry function.
    payload: str = passed("script")
    # What Move transactions call (hotmove, movevm), and its size (cpuheavy, kvstore); None:
    # the workload's own default.
    workload: str = passed("transfer")
    workload_arg: int | None = passed(None)
    # Whom transfers and SmallBank's payments pay (hotcrypto, hotmove, movevm): "ring" (each
    # client's next account), "uniform" (any other genesis account) or "hot:K" (one of the first
    # K genesis accounts): the contention the load puts on the state.
    dest: str = passed("ring")
    # How the Move executor runs a batch (hotmove, movevm): "sequential", or in parallel on a
    # pool, "waves" (levels of transactions whose declared reads and writes do not conflict) or
    # "blockstm" (Block-STM). exec_threads: the pool's threads; None: one per core.
    exec: str = passed("sequential")
    exec_threads: int | None = passed(None)
    # When the adapter's fees reach the fee account: "block" (the batch's fees together after
    # it) or "per-tx" (every transaction credits the one fee account: a hotspot).
    fees: str = passed("block")
    # `node run --verify` and, comma-separated, one `--misbehave` per misbehaving member (the last
    # live nodes; None: every member honest): what they do is their `--help`.
    verify: str = passed("all")
    misbehave: str | None = passed(None)
    runs: int = 1
    # Network emulation on the committee's links (faults/net_emulation.py): one-way latency of every
    # link (ms), or a CSV file of per-link latencies; the rate of every link, each direction
    # (Mbit/s). None: real links, no emulation at all.
    delay_ms: int | None = None
    delay_matrix: str | None = None
    # `fab local` only: every node runs in a cgroup whose CFS quota is this many cores (may be a
    # fraction), the clients in another without one (runners/cgroups.py). None: no budget, the
    # nodes share whatever the machine has.
    node_cpus: float | None = None
    # `fab local` only: a cluster in slow motion (runners/vcpus.py, runners/run_clock.py). Every
    # node and client runs `dilation` times slower in wall time (a flag of both binaries: their
    # clocks), each node a machine of `vcpus` virtual CPUs of 1/K of a core each (its threads
    # one each at most), the clients `client_vcpus` together; figures are in dilated time.
    # `vcpus` at dilation 1 is the undilated run of the same emulation. None: no such budget.
    dilation: int = passed(1)
    vcpus: float | None = None
    client_vcpus: float = 1.0
    bandwidth_mbit: float | None = None
    node: NodeParameters = field(default_factory=NodeParameters)

    def __post_init__(self) -> None:
        """What the harness itself decides; a passed setting is checked against what the
        binaries say the mode takes once they are built (`binary_flags.ModeFlags.check`)."""
        _check_one_of("mode", self.mode, binary_modes.names())
        positive = {
            "rate": self.rate,
            "tx_size": self.tx_size,
            "duration": self.duration,
            "accounts": self.accounts,
            "runs": self.runs,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        self._check_links()
        self._check_node_cpus()
        self._check_vcpus()
        self._check_dest()
        if binary_modes.runs_committee(self.mode):
            if self.nodes <= 0:
                raise ConfigError(f"nodes must be positive, got {self.nodes}")
            # HotStuff makes progress only with f < n/3; more faults would measure nothing.
            if not 0 <= self.faults <= (self.nodes - 1) // 3:
                raise ConfigError(
                    f"faults must be between 0 and {(self.nodes - 1) // 3} for {self.nodes} nodes"
                    f" (HotStuff needs f < n/3), got {self.faults}"
                )
        self._check_misbehave()

    def _check_misbehave(self) -> None:
        conducts = self.conducts()
        if self.misbehave is not None and not conducts:
            raise ConfigError("--misbehave names no member's conduct")
        if conducts and not binary_modes.runs_committee(self.mode):
            raise ConfigError(f"--misbehave needs members; {self.mode} runs none")
        room = (self.nodes - 1) // 3 - self.faults
        if conducts and len(conducts) > room:
            raise ConfigError(
                f"--misbehave makes {len(conducts)} members Byzantine; with {self.nodes} nodes and"
                f" {self.faults} down at most {max(room, 0)} may be (f in all)"
            )

    def conducts(self) -> list[str]:
        """The entries of `misbehave`, one per misbehaving member."""
        return [entry.strip() for entry in (self.misbehave or "").split(",") if entry.strip()]

    def misbehaving(self) -> dict[int, str]:
        """Node index -> its conduct: the last live nodes take `misbehave`'s entries in order."""
        first = self.live_nodes - len(self.conducts())
        return {first + i: conduct for i, conduct in enumerate(self.conducts())}

    def _check_links(self) -> None:
        if self.delay_ms is not None and not 0 <= self.delay_ms <= MAX_DELAY_MS:
            raise ConfigError(f"delay must be within 0..{MAX_DELAY_MS} ms, got {self.delay_ms}")
        if self.delay_ms is not None and self.delay_matrix is not None:
            raise ConfigError("give --delay or --delay-matrix, not both")
        if self.bandwidth_mbit is not None:
            if self.bandwidth_mbit <= 0:
                raise ConfigError(
                    f"--bandwidth must be a positive rate in Mbit/s, got {self.bandwidth_mbit:g}"
                )
            if not MIN_BANDWIDTH_MBIT <= self.bandwidth_mbit <= MAX_BANDWIDTH_MBIT:
                raise ConfigError(
                    f"--bandwidth must be within {MIN_BANDWIDTH_MBIT:g}..{MAX_BANDWIDTH_MBIT:g}"
                    f" Mbit/s, got {self.bandwidth_mbit:g} (a unit mistake?)"
                )
        if self.emulated_links and not binary_modes.runs_committee(self.mode):
            raise ConfigError(
                f"--delay, --delay-matrix and --bandwidth need nodes; {self.mode} runs none"
            )

    def _check_node_cpus(self) -> None:
        if self.node_cpus is None:
            return
        if not self.node_cpus >= MIN_NODE_CPUS:
            raise ConfigError(
                f"node_cpus must be at least {MIN_NODE_CPUS} cores (a quota of 1 ms per 100 ms"
                f" period, the kernel's smallest), got {self.node_cpus:g}"
            )
        if not binary_modes.runs_committee(self.mode):
            # Its load generator is a thread of the same process: a quota would cap both.
            raise ConfigError(
                f"node_cpus caps nodes; {self.mode} runs its generator and stages in one process"
            )

    def _check_vcpus(self) -> None:
        if self.dilation < 1:
            raise ConfigError(f"dilation must be at least 1, got {self.dilation}")
        if self.vcpus is None:
            if self.dilation > 1:
                raise ConfigError(
                    "--dilation slows the clocks; give --vcpus too, the virtual CPUs of each"
                    " node (a virtual CPU is 1/K of a core)"
                )
            return
        if self.node_cpus is not None:
            raise ConfigError("give --vcpus or --node-cpus, not both")
        if not self.vcpus > 0 or not self.client_vcpus > 0:
            raise ConfigError(
                f"--vcpus and --client-vcpus must be positive, got {self.vcpus:g} and"
                f" {self.client_vcpus:g}"
            )
        if not binary_modes.runs_committee(self.mode):
            raise ConfigError(
                f"--vcpus and --dilation emulate a cluster of nodes; {self.mode} runs one process"
            )

    @property
    def emulated_links(self) -> bool:
        """Whether the nodes emulate link latencies or rates (partitions are in the fault
        schedule)."""
        return (
            self.delay_ms is not None
            or self.delay_matrix is not None
            or self.bandwidth_mbit is not None
        )

    def _check_dest(self) -> None:
        # The genesis is the harness's: how many accounts a hot set may name is its to check.
        hot = hot_accounts(self.dest)
        if self.dest not in ("ring", "uniform") and hot is None:
            raise ConfigError(f"unknown dest {self.dest!r}; expected ring, uniform or hot:K")
        if hot is not None and not 1 <= hot <= self.accounts:
            raise ConfigError(f"dest hot:K needs 1 <= K <= accounts ({self.accounts}), got {hot}")

    @property
    def live_nodes(self) -> int:
        """Nodes that are booted (the last `faults` nodes of the committee stay down)."""
        return self.nodes - self.faults

    @property
    def rate_per_client(self) -> int:
        """Each live node has one client; together they offer `rate`."""
        return max(1, self.rate // max(1, self.live_nodes))

    def to_dict(self) -> dict[str, Any]:
        """Flat: the bench settings, then the node parameters that were set (and no others), so a
        saved result says "node default" by leaving a parameter out."""
        bench = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "node"}
        return {**bench, **self.node.to_json()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchParameters:
        """The inverse of `to_dict`; unknown keys are ignored and None means "not set"."""
        known = {f.name for f in fields(cls)} - {"node"}
        given = {k: v for k, v in data.items() if k in known and v is not None}
        return cls(**given, node=NodeParameters.from_json(data))


def _check_one_of(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; expected one of {', '.join(choices)}")


def hot_accounts(dest: str) -> int | None:
    """K of a `hot:K` dest, None for any other (or a malformed K)."""
    prefix, _, count = dest.partition(":")
    if prefix != "hot" or not count.isdigit():
        return None
    return int(count)


# Remote runs cross regions, where a round takes far longer than on loopback: they default to a
# longer run so the steady window still holds many rounds. The only remote default that differs.
REMOTE_DEFAULTS: Mapping[str, Any] = {"duration": 30}


def read_json(path: Path) -> Any:  # noqa: ANN401 - JSON is untyped until validated
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from error


def write_json(path: Path, data: Any) -> Path:  # noqa: ANN401 - any JSON value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def run_tool(command: list[str]) -> str:
    """Run one of our binaries' tools (`node keys`, `node genesis`, `node describe`); what it
    printed on stdout."""
    try:
        done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)
    except FileNotFoundError as error:
        raise ConfigError(f"{command[0]} not found (build it first): {error}") from error
    except subprocess.CalledProcessError as error:
        raise ConfigError(
            f"`{' '.join(command)}` failed with code {error.returncode}: {error.stderr.strip()}"
        ) from error
    except subprocess.TimeoutExpired as error:
        raise ConfigError(f"`{' '.join(command)}` timed out") from error
    return done.stdout
