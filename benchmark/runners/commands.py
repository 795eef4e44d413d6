"""Command lines of the `node` and `client` binaries, shared by local and remote runs.

Paths are plain strings so the same builders serve local paths and paths on a remote host.
`prometheus` is the address a process serves `GET /metrics` on (see `prometheus.py`); None
leaves the endpoint off.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import CRYPTO_MODES, MOVE_MODES, OPAQUE_MODES, BenchParameters, RunFiles
from .prometheus import MetricsEndpoints


def node_command(
    binary: str,
    *,
    keys: str,
    committee: str,
    parameters: str,
    genesis: str | None,
    bench: BenchParameters,
    prometheus: str | None = None,
    profile: str | None = None,
    store: str | None = None,
    net_emulation: str | None = None,
) -> list[str]:
    """`profile`: the directory the node writes its flame graph and folded stacks to on exit;
    `store`: the file of the node's durable store (`bench.store`), None keeps it in memory;
    `net_emulation`: the file of the emulated links (faults/net_emulation.py)."""
    command = [
        binary,
        "run",
        "--keys",
        keys,
        "--committee",
        committee,
        "--parameters",
        parameters,
    ]
    if genesis is not None:
        command += ["--genesis", genesis]
    command += ["--mode", bench.mode]
    if bench.mode in MOVE_MODES:
        # The node sets up the workload's genesis state (smallbank's banks).
        command += ["--vm", bench.vm, "--workload", bench.workload, *_execution(bench)]
    if bench.mode in CRYPTO_MODES and bench.verifier_threads is not None:
        command += ["--verifier-threads", str(bench.verifier_threads)]
    if bench.verify != "all":
        command += ["--verify", bench.verify]
    if bench.executor_delay_us is not None:
        command += ["--executor-delay-us", str(bench.executor_delay_us)]
    if store is not None:
        command += ["--store", store]
    if bench.no_instrumentation:
        command.append("--no-instrumentation")
    if net_emulation is not None:
        command += ["--net-emulation", net_emulation]
    return command + _prometheus(prometheus) + _profile(profile)


def client_command(
    binary: str,
    *,
    bench: BenchParameters,
    target: str,
    nodes: Sequence[str],
    index: int,
    genesis: str | None,
    prometheus: str | None = None,
) -> list[str]:
    """Client `index` sends to `target` and first waits until every address in `nodes` is up."""
    command = [
        binary,
        "--target",
        target,
        "--nodes",
        ",".join(nodes),
        "--rate",
        str(bench.rate_per_client),
        "--duration",
        str(bench.duration),
        "--mode",
        bench.mode,
        # Every mode: sample ids (hotstuff) and accounts (crypto modes) are split by client.
        "--client-index",
        str(index),
        "--clients",
        str(bench.live_nodes),
    ]
    if bench.mode in OPAQUE_MODES:
        command += ["--size", str(bench.tx_size)]
    if bench.mode in CRYPTO_MODES:
        if genesis is None:
            raise ValueError(f"mode {bench.mode} needs a genesis file for the client")
        command += ["--genesis", genesis]
        if bench.invalid_share > 0:
            command += ["--invalid-share", str(bench.invalid_share)]
    if bench.mode in MOVE_MODES:
        command += ["--payload", bench.payload, *_workload(bench)]
    return command + _dest(bench) + _prometheus(prometheus)


def committee_client_command(
    binary: str,
    bench: BenchParameters,
    files: RunFiles,
    index: int,
    *,
    genesis: str | None,
    endpoints: MetricsEndpoints | None,
) -> list[str]:
    """Client `index` of a committee run: it sends to node `index`, waits for every live node,
    and serves its metrics where `endpoints` says (`genesis` as the client's host sees it)."""
    addresses = files.committee.transactions_addresses(bench.live_nodes)
    return client_command(
        binary,
        bench=bench,
        target=addresses[index],
        nodes=addresses,
        index=index,
        genesis=genesis,
        prometheus=endpoints.clients[index].listen if endpoints else None,
    )


def movevm_command(
    binary: str, bench: BenchParameters, prometheus: str | None = None, profile: str | None = None
) -> list[str]:
    """The standalone Move VM run: one process, a generator thread feeding the decoder and executor
    stages a node runs."""
    command = [
        binary,
        "--mode",
        "movevm",
        "--duration",
        str(bench.duration),
        "--accounts",
        str(bench.accounts),
        "--vm",
        bench.vm,
        "--payload",
        bench.payload,
        *_workload(bench),
    ]
    command += _execution(bench)
    # The node's channel capacity, when set, sizes the generator->executor channel as it would a
    # node's channels; otherwise the client keeps its own default.
    if bench.node.channel_capacity is not None:
        command += ["--channel-capacity", str(bench.node.channel_capacity)]
    return command + _dest(bench) + _prometheus(prometheus) + _profile(profile)


def _workload(bench: BenchParameters) -> list[str]:
    """What the transactions call, and its size when given."""
    arg = [] if bench.workload_arg is None else ["--workload-arg", str(bench.workload_arg)]
    return ["--workload", bench.workload, *arg]


def _execution(bench: BenchParameters) -> list[str]:
    """How the executor runs batches and credits fees, when not the binaries' defaults."""
    command = [] if bench.exec == "sequential" else ["--exec", bench.exec]
    if bench.exec_threads is not None:
        command += ["--exec-threads", str(bench.exec_threads)]
    if bench.fees != "block":
        command += ["--fees", bench.fees]
    return command


def _dest(bench: BenchParameters) -> list[str]:
    """Whom the transactions pay, when not the clients' default ring."""
    return [] if bench.dest == "ring" else ["--dest", bench.dest]


def _prometheus(address: str | None) -> list[str]:
    return [] if address is None else ["--prometheus", address]


def _profile(directory: str | None) -> list[str]:
    return [] if directory is None else ["--profile", directory]
