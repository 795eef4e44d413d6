"""The workspace's crates depend on one another as the README's layout says: the client links the
stages behind ordering, never the replica's consensus.

The graph is Cargo's own (`cargo metadata --no-deps`, no network, no build): each workspace
crate and the workspace crates it depends on, for any kind of dependency (normal, build, dev).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .conftest import REPO_ROOT

# What orders batches; the stages, and so the client, must build without any of it.
CONSENSUS_ONLY = {"hotstuff", "mempool", "network"}


def workspace_graph(repo: Path) -> dict[str, set[str]]:
    """Each workspace crate and the workspace crates it names in its manifest."""
    result = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    packages = json.loads(result.stdout)["packages"]
    members = {package["name"] for package in packages}
    return {
        package["name"]: {
            dependency["name"]
            for dependency in package["dependencies"]
            if dependency["name"] in members
        }
        for package in packages
    }


def closure(graph: dict[str, set[str]], crate: str) -> set[str]:
    """Every workspace crate `crate` builds against, directly or through another."""
    seen: set[str] = set()
    pending = [crate]
    while pending:
        for dependency in graph[pending.pop()]:
            if dependency not in seen:
                seen.add(dependency)
                pending.append(dependency)
    return seen


def test_closure_follows_dependencies_through_other_crates() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert closure(graph, "a") == {"b", "c"}
    assert closure(graph, "c") == set()


def test_the_replica_links_consensus() -> None:
    """The check below could not pass by reading nothing: the replica does link consensus."""
    graph = workspace_graph(REPO_ROOT)
    assert closure(graph, "node") >= CONSENSUS_ONLY
    assert "stages" in graph["node"]


def test_the_client_and_the_stages_link_no_consensus() -> None:
    graph = workspace_graph(REPO_ROOT)
    for crate in ("client", "stages"):
        linked = closure(graph, crate)
        assert not linked & CONSENSUS_ONLY, f"{crate} links {sorted(linked & CONSENSUS_ONLY)}"
        assert "node" not in linked, f"{crate} links the replica"
    assert "stages" in graph["client"]
