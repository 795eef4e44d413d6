"""`--prometheus-port`: the address of every process, the port checks, the flags on the command
lines, and a scrape of a stand-in run."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest

from benchmark.aws.settings import Settings
from benchmark.config import BenchParameters
from benchmark.run_files import Ports
from benchmark.runners.commands import client_command, movevm_command, node_command
from benchmark.runners.local import LocalBench
from benchmark.runners.plan import RunPlan
from benchmark.runners.prometheus import PrometheusPortError, local_endpoints, remote_endpoints
from benchmark.runners.remote import Host, RemoteBench

from .conftest import REPO_ROOT, described_flags, fab_fails, standin_bench
from .sshhosts import COMMITTEE_PORTS, free_port


def _listen(endpoints: object) -> list[str]:
    return [e.listen for e in endpoints]  # type: ignore[attr-defined]


def test_local_nodes_come_first_then_their_clients() -> None:
    endpoints = local_endpoints(9100, BenchParameters(nodes=4))
    assert _listen(endpoints.nodes) == [f"127.0.0.1:{9100 + i}" for i in range(4)]
    assert _listen(endpoints.clients) == [f"127.0.0.1:{9104 + j}" for j in range(4)]
    assert endpoints.nodes[2].url == "http://127.0.0.1:9102/metrics"


def test_unbooted_nodes_leave_their_ports_unused() -> None:
    endpoints = local_endpoints(9100, BenchParameters(nodes=4, faults=1))
    assert _listen(endpoints.nodes) == ["127.0.0.1:9100", "127.0.0.1:9101", "127.0.0.1:9102"]
    # Clients still start after the whole committee: node ports stay one block, P..P+n-1.
    assert _listen(endpoints.clients) == ["127.0.0.1:9104", "127.0.0.1:9105", "127.0.0.1:9106"]


def test_movevm_has_one_endpoint_at_the_port() -> None:
    endpoints = local_endpoints(9100, BenchParameters(mode="movevm"))
    assert endpoints.nodes == ()
    assert _listen(endpoints.clients) == ["127.0.0.1:9100"]


def test_remote_processes_listen_everywhere_and_are_scraped_at_the_host() -> None:
    endpoints = remote_endpoints(9100, BenchParameters(nodes=3), ["1.1.1.1", "2.2.2.2", "3.3.3.3"])
    assert _listen(endpoints.nodes) == ["0.0.0.0:9100"] * 3
    assert _listen(endpoints.clients) == ["0.0.0.0:9101"] * 3
    assert [e.public for e in endpoints.nodes] == ["1.1.1.1:9100", "2.2.2.2:9100", "3.3.3.3:9100"]
    assert endpoints.clients[1].url == "http://2.2.2.2:9101/metrics"
    # Two nodes on one host (the loopback test hosts) do not share a port.
    shared = remote_endpoints(9100, BenchParameters(nodes=2), ["h", "h"])
    assert [e.public for e in (*shared.nodes, *shared.clients)] == [
        "h:9100",
        "h:9102",
        "h:9101",
        "h:9103",
    ]


def test_describe_lists_every_address() -> None:
    text = local_endpoints(9100, BenchParameters(nodes=2)).describe()
    for process, port in (("node-0", 9100), ("node-1", 9101), ("client-0", 9102)):
        assert f"{process}" in text
        assert f"http://127.0.0.1:{port}/metrics" in text


def test_command_lines_carry_the_address_only_when_given() -> None:
    bench = BenchParameters(mode="hotcrypto", nodes=1)
    flags = described_flags("hotcrypto")
    files = {"keys": "k", "committee": "c", "parameters": "p", "genesis": "g"}
    node = node_command("n", bench=bench, flags=flags, **files)
    assert "--prometheus" not in node
    node = node_command("n", bench=bench, flags=flags, prometheus="a:1", **files)
    assert node[-2:] == ["--prometheus", "a:1"]
    client = client_command(
        "c",
        bench=bench,
        flags=flags,
        target="t",
        nodes=["t"],
        index=0,
        genesis="g",
        prometheus="a:2",
    )
    assert client[-2:] == ["--prometheus", "a:2"]
    movevm = movevm_command("c", BenchParameters(mode="movevm"), described_flags("movevm"), "a:3")
    assert movevm[-2:] == ["--prometheus", "a:3"]


def _local(base_port: int, prometheus_port: int, tmp_path: Path) -> LocalBench:
    return standin_bench(tmp_path, base_port=base_port, prometheus_port=prometheus_port)


def test_metrics_ports_may_not_be_node_ports(tmp_path: Path) -> None:
    bench = BenchParameters(nodes=4)
    # Nodes use 4000-4011; metrics would use P..P+7.
    with pytest.raises(PrometheusPortError, match=r"the nodes listen on 4000-4011 \(port 4005"):
        _local(4000, 4005, tmp_path).check(bench)
    with pytest.raises(PrometheusPortError, match="port 4000 is both"):
        _local(4000, 3993, tmp_path).check(bench)
    _local(4000, 4012, tmp_path).check(bench)
    _local(4000, 3992, tmp_path).check(bench)
    with pytest.raises(PrometheusPortError, match="needs ports 65530-65537, outside 1-65535"):
        _local(4000, 65_530, tmp_path).check(bench)
    # movevm runs no node: any valid port will do.
    _local(4000, 4000, tmp_path).check(BenchParameters(mode="movevm"))


def test_remote_metrics_ports_may_not_be_node_ports(tmp_path: Path) -> None:
    settings = Settings(
        key_name="unused",
        key_path=tmp_path / "key",
        regions=("local",),
        instance_type="none",
        ports=Ports(8000, 8001, 8002),
        repo_name="hotmove",
        repo_url="unused",
        branch="main",
    )

    def remote(port: int) -> RemoteBench:
        return RemoteBench(
            settings,
            [Host("10.0.0.1", "u"), Host("10.0.0.2", "u")],
            local_node_binary=tmp_path / "node",
            work_dir=tmp_path,
            logs_dir=tmp_path,
            results_dir=None,
            prometheus_port=port,
        )

    bench = BenchParameters(nodes=2)
    # The client's port, P+1, is the node's consensus port.
    with pytest.raises(PrometheusPortError, match="port 8000 is both"):
        remote(7999).check(bench)
    remote(9100).check(bench)


def test_fab_local_names_a_collision_before_anything_starts() -> None:
    stderr = fab_fails(
        "local", "--nodes=4", "--base-port=4000", "--prometheus-port=4010", "--no-build",
        "--binaries=missing",
    )  # fmt: skip
    assert "--prometheus-port=4010 needs ports 4010-4017" in stderr
    assert "does not exist" not in stderr
    stderr = fab_fails("local", "--prometheus-port=x", "--no-build")
    assert "--prometheus-port must be an integer, got 'x'" in stderr


def scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback http
            return response.read().decode()
    except OSError:
        return None


def scrape_during_run(local: LocalBench, bench: BenchParameters, marker: str) -> dict[str, str]:
    """Run `bench` while scraping every metrics endpoint of the run until it ends: by URL, the
    last body of each that held `marker` (a process may answer before its first record)."""
    endpoints = local.metrics_endpoints(bench)
    assert endpoints is not None
    urls = [e.url for e in (*endpoints.nodes, *endpoints.clients)]
    last: dict[str, str] = {}
    stop = threading.Event()

    def scrape_all() -> None:
        while not stop.is_set():
            for url in urls:
                body = scrape(url)
                if body and marker in body:
                    last[url] = body
            stop.wait(0.1)

    scraper = threading.Thread(target=scrape_all)
    scraper.start()
    try:
        RunPlan(local).run(bench)
    finally:
        stop.set()
        scraper.join()
    assert sorted(last) == sorted(urls), "an endpoint never answered"
    return last


def test_a_stand_in_run_can_be_scraped(tmp_path: Path) -> None:
    # One free block: the committee's ports, then the metrics ports of 2 nodes and 2 clients.
    base_port = free_port(COMMITTEE_PORTS + 4)
    metrics_port = base_port + COMMITTEE_PORTS
    local = _local(base_port, metrics_port, tmp_path)
    bench = BenchParameters(mode="hotcrypto", nodes=2, rate=1_000, duration=3, accounts=20)
    bodies = scrape_during_run(local, bench, "hotmove_")
    endpoints = local.metrics_endpoints(bench)
    assert endpoints is not None
    node = bodies[endpoints.nodes[1].url]
    assert "# TYPE hotmove_consensus_committed_txs_total counter" in node
    assert 'hotmove_stage_items_total{node="' in node
    assert 'stage="executor"}' in node
    assert 'channel="verifier->executor"}' in node
    assert "hotmove_client_sent_total{" in bodies[endpoints.clients[0].url]
    output = local.out.getvalue()  # type: ignore[attr-defined]
    assert f"node-1     http://127.0.0.1:{metrics_port + 1}/metrics" in output
    assert f"client-1   http://127.0.0.1:{metrics_port + 3}/metrics" in output


def test_the_documented_scrape_config_matches_the_local_addresses() -> None:
    """The local example of `docs/metrics.md` lists nodes at P..P+n-1, as `local_endpoints`
    places them."""
    section = (REPO_ROOT / "docs" / "metrics.md").read_text()
    endpoints = local_endpoints(9100, BenchParameters(nodes=4))
    targets = ", ".join(f"'{e.public}'" for e in endpoints.nodes)
    assert f"targets: [{targets}]" in section
