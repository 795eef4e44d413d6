"""The harness's node parameters against their source of truth, Rust's `Parameters`.

The harness holds no defaults of node parameters, but it must spell every field as the node does
(the node rejects unknown fields), and the documentation must quote the node's defaults: the
parameters table of `docs/parameters.md` and the flags that set node parameters in
`docs/local.md`. Both are read here from `consensus/config/src/lib.rs`, so a change on the Rust side
fails this test until the docs (and, for a new field, `NodeParameters`) follow.
"""

from __future__ import annotations

import re

import pytest

from benchmark.parameters import NodeParameters

from .conftest import REPO_ROOT

CONFIG_RS = REPO_ROOT / "consensus" / "config" / "src" / "lib.rs"
PARAMETERS_MD = REPO_ROOT / "docs" / "parameters.md"
LOCAL_MD = REPO_ROOT / "docs" / "local.md"
README = REPO_ROOT / "README.md"


def _block(text: str, opening: str) -> str:
    """The body of the first `{ ... }` block after `opening` (no nested braces expected)."""
    start = text.index(opening)
    body = text.index("{", start) + 1
    return text[body : text.index("}", body)]


def rust_fields() -> list[str]:
    body = _block(CONFIG_RS.read_text(), "pub struct Parameters")
    return re.findall(r"pub (\w+):", body)


def rust_defaults() -> dict[str, int | str]:
    """`impl Default for Parameters`: `name: 1_000,`, `name: 8 * 1024 * 1024,`, or an enum
    variant, `name: LeaderRule::RoundRobin,` (read as its serde name, `round-robin`)."""
    text = CONFIG_RS.read_text()
    body = _block(text[text.index("impl Default for Parameters") :], "Parameters {")
    defaults: dict[str, int | str] = {}
    for name, expression in re.findall(r"(\w+):\s*([\d_ *]+),", body):
        value = 1
        for factor in expression.split("*"):
            value *= int(factor.strip().replace("_", ""))
        defaults[name] = value
    for name, variant in re.findall(r"(\w+):\s*\w+::(\w+),", body):
        defaults[name] = re.sub(r"(?<!^)([A-Z])", r"-\1", variant).lower()
    return defaults


def documented_parameter_defaults() -> dict[str, int | str]:
    """The parameters table of `docs/parameters.md`: | `field` | default | meaning |, the default
    a number or a `word`."""
    text = PARAMETERS_MD.read_text()
    rows = re.findall(r"^\| `(\w+)` \| ([\d,]+) \|", text, flags=re.MULTILINE)
    defaults: dict[str, int | str] = {name: int(value.replace(",", "")) for name, value in rows}
    words = re.findall(r"^\| `(\w+)` \| `([\w-]+)` \|", text, flags=re.MULTILINE)
    defaults.update(dict(words))
    return defaults


def test_the_parser_reads_expressions() -> None:
    defaults = rust_defaults()
    assert defaults, "no defaults found in config.rs"
    assert all(value > 0 for value in defaults.values() if isinstance(value, int))
    assert defaults["leader"] == "round-robin"


def test_node_parameters_are_spelled_as_the_node_spells_them() -> None:
    assert list(NodeParameters.names()) == rust_fields()
    assert set(rust_defaults()) == set(rust_fields())


@pytest.mark.parametrize("name", NodeParameters.names())
def test_the_parameters_page_quotes_the_node_defaults(name: str) -> None:
    assert documented_parameter_defaults().get(name) == rust_defaults()[name]


# The `fab local` flags that set a node parameter, and the parameter.
NODE_PARAMETER_FLAGS = {
    "--batch-size": "batch_size",
    "--batch-delay": "max_batch_delay",
    "--leader": "leader",
    "--channel-capacity": "channel_capacity",
    "--max-uncommitted-bytes": "max_uncommitted_bytes",
    "--gc-retention-ms": "gc_retention_ms",
}


def _node_default(value: int | str) -> str:
    return f"node default ({value:,})" if isinstance(value, int) else f"node default (`{value}`)"


def test_the_flag_tables_quote_the_node_defaults() -> None:
    """Flags that set node parameters: their row gives Rust's value as `node default (...)`, in
    the table of every flag (`docs/local.md`, all of them) and in the README's common flags
    (those it lists)."""
    defaults = rust_defaults()
    for page, every_flag in ((LOCAL_MD, True), (README, False)):
        text = page.read_text()
        for flag, field in NODE_PARAMETER_FLAGS.items():
            row = re.search(rf"^\| `{flag}` \| ([^|]+) \|", text, flags=re.MULTILINE)
            if row is None:
                assert not every_flag, f"{page.name}: no row for {flag}"
                continue
            assert row.group(1).strip() == _node_default(defaults[field]), (page.name, flag)
