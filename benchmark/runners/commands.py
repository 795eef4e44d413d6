"""Command lines of the `node` and `client` binaries, shared by local and remote runs.

Paths are plain strings so the same builders serve local paths and paths on a remote host.
`prometheus` is the address a process serves `GET /metrics` on (see `prometheus.py`); None
leaves the endpoint off. The settings the binaries take as they are (`--vm`, `--exec`, ...) come
from what they say the mode takes (`flags`, see `binary_flags.py`), not from lists kept here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..binary_flags import ModeFlags
from ..config import BenchParameters
from ..run_files import RunFiles
from .prometheus import MetricsEndpoints


def node_command(
    binary: str,
    *,
    keys: str,
    committee: str,
    parameters: str,
    genesis: str | None,
    bench: BenchParameters,
    flags: ModeFlags,
    prometheus: str | None = None,
    profile: str | None = None,
    store: str | None = None,
    net_emulation: str | None = None,
    dilation_origin_ms: int | None = None,
    index: int | None = None,
) -> list[str]:
    """`profile`: the directory the node writes its flame graph and folded stacks to on exit;
    `store`: the file of the node's durable store (`bench.store`), None keeps it in memory;
    `net_emulation`: the file of the emulated links (faults/net_emulation.py);
    `dilation_origin_ms`: where a dilated run's clocks agree (run_clock.py). A node of
    `bench.vcpus` virtual CPUs sizes its pools as on that many cores. `index`: the node's place
    in the committee, for the settings only some members take (`--misbehave`)."""
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
    command += ["--mode", bench.mode, *flags.node_arguments(bench, index)]
    if store is not None:
        command += ["--store", store]
    if net_emulation is not None:
        command += ["--net-emulation", net_emulation]
    if bench.vcpus is not None:
        command += ["--cores", str(math.ceil(bench.vcpus))]
    command += _origin(dilation_origin_ms)
    return command + _prometheus(prometheus) + _profile(profile)


def client_command(
    binary: str,
    *,
    bench: BenchParameters,
    flags: ModeFlags,
    target: str,
    nodes: Sequence[str],
    index: int,
    genesis: str | None,
    prometheus: str | None = None,
    dilation_origin_ms: int | None = None,
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
    if genesis is not None:
        command += ["--genesis", genesis]
    command += _origin(dilation_origin_ms)
    return command + flags.client_arguments(bench) + _prometheus(prometheus)


def committee_client_command(
    binary: str,
    bench: BenchParameters,
    flags: ModeFlags,
    files: RunFiles,
    index: int,
    *,
    genesis: str | None,
    endpoints: MetricsEndpoints | None,
    dilation_origin_ms: int | None = None,
) -> list[str]:
    """Client `index` of a committee run: it sends to node `index`, waits for every live node,
    and serves its metrics where `endpoints` says (`genesis` as the client's host sees it)."""
    addresses = files.committee.transactions_addresses(bench.live_nodes)
    return client_command(
        binary,
        bench=bench,
        flags=flags,
        target=addresses[index],
        nodes=addresses,
        index=index,
        genesis=genesis,
        prometheus=endpoints.clients[index].listen if endpoints else None,
        dilation_origin_ms=dilation_origin_ms,
    )


def movevm_command(
    binary: str,
    bench: BenchParameters,
    flags: ModeFlags,
    prometheus: str | None = None,
    profile: str | None = None,
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
        *flags.client_arguments(bench),
    ]
    # The node's channel capacity, when set, sizes the generator->executor channel as it would a
    # node's channels; otherwise the client keeps its own default.
    if bench.node.channel_capacity is not None:
        command += ["--channel-capacity", str(bench.node.channel_capacity)]
    return command + _prometheus(prometheus) + _profile(profile)


def _origin(dilation_origin_ms: int | None) -> list[str]:
    return [] if dilation_origin_ms is None else ["--dilation-origin-ms", str(dilation_origin_ms)]


def _prometheus(address: str | None) -> list[str]:
    return [] if address is None else ["--prometheus", address]


def _profile(directory: str | None) -> list[str]:
    return [] if directory is None else ["--profile", directory]
