"""The Grafana dashboard `docs/grafana/hotmove.json`: a dashboard Grafana imports (a Prometheus
datasource variable, panels on a grid, one datasource for all), every query valid PromQL (parsed
by promql-parser), and every metric, label and legend it names served by the real binaries: the
names come from scraping a short `hotcrypto --store` run's node and client with
`--prometheus-port`, so a renamed counter fails here, not on a user's empty panel.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from benchmark.config import BenchParameters
from benchmark.runners.local import LocalBench

from .conftest import REPO_ROOT
from .sshhosts import COMMITTEE_PORTS, free_port
from .test_prometheus import scrape_during_run

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "hotmove.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Labels Prometheus adds to every series it scrapes (the processes do not serve them).
TARGET_LABELS = frozenset({"instance", "job"})
# Grafana's own variables, and a value of the same kind to parse the query with.
GRAFANA_VARIABLES = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_LABEL_VALUES = re.compile(r"^label_values\((.+),\s*(\w+)\)$")
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s")
_SAMPLE_LABEL = re.compile(r'(\w+)="')


def _dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text())
    assert isinstance(data, dict)
    return data


def _variables(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return list(dashboard["templating"]["list"])


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included, rows excluded."""
    found = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            found += panel.get("panels", [])
        else:
            found.append(panel)
    return found


def _as_promql(expr: str, dashboard: dict[str, Any]) -> str:
    """The query as Prometheus receives it: Grafana's variables replaced by values of their
    kind (a dashboard variable holds a regex of instances). An undefined variable fails."""
    defined = {v["name"] for v in _variables(dashboard)}

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in GRAFANA_VARIABLES:
            return GRAFANA_VARIABLES[name]
        assert name in defined, f"${name} is not a variable of the dashboard: {expr}"
        return ".*"

    return _VARIABLE.sub(value, expr)


def _queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, PromQL, legend) of every panel target and every query variable."""
    for panel in _panels(dashboard):
        for target in panel["targets"]:
            where = f"panel {panel['title']!r} target {target['refId']}"
            yield where, _as_promql(target["expr"], dashboard), target.get("legendFormat", "")
    for variable in _variables(dashboard):
        if variable["type"] != "query":
            continue
        match = _LABEL_VALUES.match(variable["query"]["query"])
        assert match is not None, variable
        # `label_values(SELECTOR, LABEL)`: the selector is PromQL, LABEL one of its labels.
        yield f"variable ${variable['name']}", match.group(1), "{{" + match.group(2) + "}}"


def _names(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """The metrics a query selects with the labels it matches on, and the labels it groups by."""
    selected: dict[str, set[str]] = {}
    grouped: set[str] = set()

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            labels = {m.name for m in node.matchers.matchers} - {"__name__"}
            assert node.name, f"a selector without a metric name: {expr}"
            selected.setdefault(node.name, set()).update(labels)
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouped.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            if node.modifier.matching is not None:
                grouped.update(node.modifier.matching.labels)
            grouped.update(node.modifier.group_labels or [])
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return selected, grouped


def test_the_dashboard_imports() -> None:
    """What Grafana's import needs: a title and uid, a datasource variable of type prometheus
    that every panel and target uses, unique panel ids, refIds unique per panel, panels that
    do not overlap on the 24-column grid."""
    dashboard = _dashboard()
    assert dashboard["title"]
    assert dashboard["uid"]
    assert dashboard.get("id") is None  # an exported dashboard carries no database id
    [source] = [v for v in _variables(dashboard) if v["type"] == "datasource"]
    assert (source["name"], source["query"]) == ("datasource", "prometheus")
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        area = {
            (grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])
        }
        assert not area & cells, f"{panel['title']!r} overlaps another panel"
        cells |= area
    for panel in _panels(dashboard):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for variable in _variables(dashboard):
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, variable["name"]


def test_the_panels_a_user_opens_first_are_there() -> None:
    """tx/s per stage, queue lengths, channel-full rates, CPU per stage, committed blocks and
    rounds, timeouts: each panel reads the counter it is about."""
    queries = {
        panel["title"]: " ".join(t["expr"] for t in panel["targets"])
        for panel in _panels(_dashboard())
    }
    expected = {
        "Transactions per second per stage": "hotmove_stage_items_total",
        "Mean queue length per channel": "hotmove_channel_len_samples_total",
        "Channel full per second": "hotmove_channel_full_total",
        "CPU per stage": "hotmove_stage_cpu_ms_total",
        "Committed blocks per second": "hotmove_consensus_committed_blocks_total",
        "Round": "hotmove_consensus_round",
        "Timeouts per second": "hotmove_consensus_timeouts_total",
    }
    for title, metric in expected.items():
        assert metric in queries[title], title


def test_every_query_parses_as_promql() -> None:
    queries = list(_queries(_dashboard()))
    assert len(queries) > 20
    for where, expr, _legend in queries:
        try:
            promql_parser.parse(expr)
        except ValueError as error:
            pytest.fail(f"{where}: {expr}: {error}")


def _served_names(bodies: list[str]) -> dict[str, set[str]]:
    """Metric name -> its label names, over the samples of every scraped body."""
    served: dict[str, set[str]] = {}
    for body in bodies:
        for line in body.splitlines():
            match = _SAMPLE.match(line)
            if match is None or line.startswith("#"):
                continue
            labels = set(_SAMPLE_LABEL.findall(match.group(2) or ""))
            served.setdefault(match.group(1), set()).update(labels)
    return served


@pytest.fixture(scope="module")
def served(built_binaries: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The metrics a real node and client serve: a 3-s `hotcrypto --store` run of two nodes,
    each endpoint scraped until the run ends (a stage adds some counters once it has seen a
    transaction)."""
    base_port = free_port(COMMITTEE_PORTS + 4)
    local = LocalBench(
        repo_root=REPO_ROOT,
        base_port=base_port,
        binaries=built_binaries,
        logs_dir=tmp_path_factory.mktemp("logs"),
        results_dir=tmp_path_factory.mktemp("results"),
        work_dir=tmp_path_factory.mktemp("work"),
        prometheus_port=base_port + COMMITTEE_PORTS,
        out=StringIO(),
    )
    bench = BenchParameters(
        mode="hotcrypto", nodes=2, rate=2_000, duration=3, accounts=200, store=True
    )
    return _served_names(list(scrape_during_run(local, bench, "hotmove_info").values()))


@pytest.mark.e2e
def test_every_query_names_served_metrics_and_labels(served: dict[str, set[str]]) -> None:
    # The scrape itself: the families docs/metrics.md documents are there.
    assert {"hotmove_info", "hotmove_stage_items_total", "hotmove_sent_total"} <= set(served)
    assert "role" in served["hotmove_info"]
    for where, expr, legend in _queries(_dashboard()):
        selected, grouped = _names(expr)
        assert selected, f"{where}: selects no metric: {expr}"
        labels = set(TARGET_LABELS)
        for metric, matched in selected.items():
            assert metric in served, f"{where}: {metric} is not served by node or client"
            unknown = matched - served[metric] - TARGET_LABELS
            assert not unknown, f"{where}: {metric} has no label {sorted(unknown)}"
            labels |= served[metric]
        assert grouped <= labels, f"{where}: groups by {sorted(grouped - labels)}: {expr}"
        shown = set(_LEGEND_LABEL.findall(legend))
        assert shown <= labels, f"{where}: legend names {sorted(shown - labels)}"
