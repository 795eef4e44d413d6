"""The harness's modules import one another without circles.

A circle (two modules importing each other, even only for type checking) means an idea has no
single home; the graph is read from the source, TYPE_CHECKING imports included.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    """The sibling modules `path` imports (`from .x import y`, `from . import x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = {path.stem: path for path in package.glob("*.py") if path.stem != "__init__"}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first == last), or None."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for imported in sorted(graph[name]):
            cycle = visit(imported, [*path, name])
            if cycle is not None:
                return cycle
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name, [])
        if cycle is not None:
            return cycle
    return None


def test_the_cycle_finder_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_the_harness_imports_itself_back() -> None:
    graph = import_graph(PACKAGE)
    assert {"summary", "report", "sweep", "config"} <= set(graph)
    assert find_cycle(graph) is None
