"""Where each process of a run serves `GET /metrics` for Prometheus (`--prometheus-port=P`).

Local runs put everything on loopback: node i at 127.0.0.1:(P+i), client j at
127.0.0.1:(P+nodes+j), so the nodes are the block P..P+nodes-1 whatever the clients do; `movevm`
has one process, at P. Remote hosts run one node and one client each: the node listens on
0.0.0.0:P and the client on 0.0.0.0:(P+1), on every interface so a Prometheus elsewhere can
scrape them at the host's public address. A host that holds several nodes (the loopback test
hosts) shifts them by 2 per slot, as node ports shift by 3.

The ports must not be any node's own ports: that is checked before the first run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..binary_modes import runs_committee
from ..config import BenchParameters
from ..errors import HarnessError
from ..run_files import host_slots

LOOPBACK = "127.0.0.1"
EVERY_INTERFACE = "0.0.0.0"  # noqa: S104 - remote endpoints are meant to be scraped from outside
MAX_PORT = 65_535
# Remote: ports one host's node and client take; a second node on the same host starts after.
PORTS_PER_HOST_SLOT = 2


class PrometheusPortError(HarnessError):
    """The metrics ports are out of range or collide with the nodes' ports."""


@dataclass(frozen=True)
class Endpoint:
    """One process's metrics endpoint: what it binds, and where Prometheus finds it."""

    process: str
    listen: str
    public: str

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        return f"http://{self.public}/metrics"


@dataclass(frozen=True)
class MetricsEndpoints:
    """The endpoints of one run: nodes[i] is node i's, clients[j] client j's (or movevm's)."""

    nodes: tuple[Endpoint, ...]
    clients: tuple[Endpoint, ...]

    def ports(self) -> list[int]:
        return sorted({e.port for e in (*self.nodes, *self.clients)})

    def describe(self) -> str:
        lines = ["Prometheus metrics (GET /metrics):"]
        lines += [f"  {e.process:<10} {e.url}" for e in (*self.nodes, *self.clients)]
        return "\n".join(lines) + "\n"


def _loopback(process: str, port: int) -> Endpoint:
    address = f"{LOOPBACK}:{port}"
    return Endpoint(process, address, address)


def local_endpoints(port: int, bench: BenchParameters) -> MetricsEndpoints:
    """Node i at P+i, client j at P+nodes+j (live ones only); movevm's one process at P."""
    if not runs_committee(bench.mode):
        return MetricsEndpoints((), (_loopback("movevm", port),))
    live = range(bench.live_nodes)
    return MetricsEndpoints(
        nodes=tuple(_loopback(f"node-{i}", port + i) for i in live),
        clients=tuple(_loopback(f"client-{j}", port + bench.nodes + j) for j in live),
    )


def remote_endpoints(port: int, bench: BenchParameters, hosts: Sequence[str]) -> MetricsEndpoints:
    """Host i's node at 0.0.0.0:P and client at 0.0.0.0:(P+1), scraped at the host's address."""
    nodes, clients = [], []
    slots = host_slots(hosts[: bench.nodes])
    for i in range(bench.live_nodes):
        own = port + PORTS_PER_HOST_SLOT * slots[i]
        nodes.append(Endpoint(f"node-{i}", f"{EVERY_INTERFACE}:{own}", f"{hosts[i]}:{own}"))
        clients.append(
            Endpoint(f"client-{i}", f"{EVERY_INTERFACE}:{own + 1}", f"{hosts[i]}:{own + 1}")
        )
    return MetricsEndpoints(tuple(nodes), tuple(clients))


def _span(ports: Sequence[int]) -> str:
    return f"{ports[0]}" if len(ports) == 1 else f"{ports[0]}-{ports[-1]}"


def check_ports(endpoints: MetricsEndpoints, node_ports: Iterable[int], flag_value: int) -> None:
    """Raise unless every metrics port is a valid port that no node listens on."""
    ports = endpoints.ports()
    if not ports:
        return
    if ports[0] < 1 or ports[-1] > MAX_PORT:
        raise PrometheusPortError(
            f"--prometheus-port={flag_value} needs ports {_span(ports)}, outside 1-{MAX_PORT}"
        )
    taken = sorted(set(node_ports))
    clashes = sorted(set(ports) & set(taken))
    if clashes:
        raise PrometheusPortError(
            f"--prometheus-port={flag_value} needs ports {_span(ports)}, but the nodes listen on"
            f" {_span(taken)} (port {clashes[0]} is both): choose a port outside that range"
        )
