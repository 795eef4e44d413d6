"""The harness's modules import one another without circles.

A circle (two modules importing each other, even only for type checking) means an idea has no
single home; the graph is read from the source, TYPE_CHECKING imports included, over every
module of every subpackage, and again between the subpackages themselves.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def _module(path: Path) -> str:
    """`analysis/run_summary.py` -> `analysis.summary`; a package's `__init__.py` -> its name."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The harness's modules `path` imports (`from .x import y`, `from ..x.y import z`,
    `from . import x`, `from benchmark.x import y`)."""
    module = _module(path)
    package = module.split(".") if path.stem == "__init__" else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)]
        elif node.module and node.module.split(".")[0] == PACKAGE.name:
            base, node.module = [], ".".join(node.module.split(".")[1:]) or None
        else:
            continue
        target = ".".join([*base, *(node.module.split(".") if node.module else [])])
        for alias in node.names:
            named = f"{target}.{alias.name}" if target else alias.name
            if named in modules:
                found.add(named)
            elif target in modules:
                found.add(target)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """Every module of the harness (tests left out) and the harness's modules it imports."""
    paths = {
        _module(path): path
        for path in package.rglob("*.py")
        if "tests" not in path.relative_to(package).parts and path != package / "__init__.py"
    }
    return {name: _imports(path, set(paths)) - {name} for name, path in paths.items()}


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same graph between subpackages (the modules at the top level are one node, `.`)."""

    def package(module: str) -> str:
        return module.split(".", maxsplit=1)[0] if "." in module or module in SUBPACKAGES else "."

    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        edges = packages.setdefault(package(module), set())
        edges.update(package(other) for other in imported if package(other) != package(module))
    return packages


SUBPACKAGES = {"analysis", "aws", "experiments", "faults", "plots", "report", "runners"}


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
    assert {"analysis.run_summary", "report.text", "runners.sweep", "config"} <= set(graph)
    assert "analysis.run_summary" in graph["report.text"]
    assert find_cycle(graph) is None


ANALYSIS_GROUPS = {"stages", "consensus", "audit", "resources"}
# The top-level modules of `analysis/` that put a run together from the groups; the others are
# what every group reads.
ANALYSIS_ASSEMBLY = {"run_summary", "results", "options", "timelines"}


def test_the_analysis_groups_do_not_import_each_other_back() -> None:
    """`analysis/` is grouped as the summary is: the records every group reads at the bottom,
    the groups above them importing one another in one direction only, and the modules that
    put a run together on top."""
    graph = import_graph(PACKAGE)

    def group(module: str) -> str | None:
        parts = module.split(".")
        if parts[0] != "analysis":
            return None
        if len(parts) > 2 and parts[1] in ANALYSIS_GROUPS:
            return parts[1]
        return "assembly" if parts[-1] in ANALYSIS_ASSEMBLY else "."

    groups: dict[str, set[str]] = {}
    for module, imported in graph.items():
        own = group(module)
        if own is None:
            continue
        edges = groups.setdefault(own, set())
        edges.update(g for g in map(group, imported) if g is not None and g != own)
    assert set(groups) == ANALYSIS_GROUPS | {".", "assembly"}
    assert groups["."] == set()
    assert find_cycle(groups) is None


def test_no_module_name_is_used_twice_in_the_harness() -> None:
    """A name says which module it is wherever it is read (a traceback, an import, the README's
    layout): two `summary.py` or two `faults` would make the reader look at the path."""
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        if "tests" in parts or path.stem == "__init__":
            continue
        names.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    for package in PACKAGE.rglob("__init__.py"):
        if "tests" not in package.relative_to(PACKAGE).parts and package.parent != PACKAGE:
            names.setdefault(package.parent.name, []).append(f"{package.parent.name}/")
    assert {name: where for name, where in names.items() if len(where) > 1} == {}


def test_no_subpackage_imports_itself_back() -> None:
    """The subpackages are layers: the top-level modules (configuration), then faults,
    analysis, report, plots and aws, and the runners and experiments above them all."""
    packages = package_graph(import_graph(PACKAGE))
    assert set(packages) == SUBPACKAGES | {"."}
    assert packages["."] == set()
    assert "analysis" in packages["runners"]
    assert find_cycle(packages) is None
