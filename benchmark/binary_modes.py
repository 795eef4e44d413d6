"""The modes and the flags of the binaries, as the binaries say: `node describe --modes` (the
modes, in order), `node describe --mode M` (what M runs, and the flags of `node run`) and `client
--describe --mode M` (the client's flags), kept in `descriptions/` for what the harness decides
before the binaries are built: whether a mode runs a committee, what `fab local --help` says of a
flag. Nothing here is written by hand: after a change to the binaries' modes or flags,

    python3 -m benchmark.binary_modes target/release/node

writes them again, and a test (test_e2e.py) fails while they differ from what the binaries
print. At run time the harness asks the built binaries themselves (`binary_flags.py`,
`analysis/pipeline.py`).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

DESCRIPTIONS = Path(__file__).resolve().parent / "descriptions"


def names() -> tuple[str, ...]:
    """Every mode `--mode` takes, in the binaries' order."""
    return tuple(str(mode["name"]) for mode in _modes())


def help_of(mode: str) -> str | None:
    """What a mode runs, in a line."""
    return next((m.get("help") for m in _modes() if m["name"] == mode), None)


@functools.cache
def runs_committee(mode: str) -> bool:
    """Whether `mode` runs a committee of nodes (consensus), not one standalone process."""
    return bool(node_description(mode)["consensus"])


def node_description(mode: str) -> dict[str, Any]:
    """What `node describe --mode M` prints."""
    return _read(DESCRIPTIONS / "node" / f"{mode}.json")


def client_description(mode: str) -> dict[str, Any]:
    """What `client --describe --mode M` prints."""
    return _read(DESCRIPTIONS / "client" / f"{mode}.json")


def flag_help(flag: str) -> str | None:
    """What a flag of `node run` (or, when the node has no such flag, of `client`) does: its
    `--help` text."""
    found = _flag(flag)
    return None if found is None else found[1]


def binary_of(flag: str) -> str | None:
    """`node` when `node run` takes the flag, else `client` when the client does; None when
    neither does."""
    found = _flag(flag)
    return None if found is None else found[0]


@functools.cache
def _flag(flag: str) -> tuple[str, str | None] | None:
    for binary in ("node", "client"):
        for mode in names():
            for entry in _read(DESCRIPTIONS / binary / f"{mode}.json").get("flags", []):
                if entry["name"] == flag:
                    return binary, entry.get("help")
    return None


@functools.cache
def _modes() -> list[dict[str, Any]]:
    data = _read(DESCRIPTIONS / "modes.json")
    return list(data) if isinstance(data, list) else []


def _read(path: Path) -> Any:  # noqa: ANN401 - JSON, as the binaries print it
    return json.loads(path.read_text())


def _printed(command: list[str]) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def regenerate(node_binary: Path) -> list[Path]:
    """Write `descriptions/` again from the binaries (`client` beside `node`)."""
    client = node_binary.with_name("client")
    listing = _printed([str(node_binary), "describe", "--modes"])
    written = [DESCRIPTIONS / "modes.json"]
    written[0].write_text(listing)
    for mode in (str(m["name"]) for m in json.loads(listing)):
        for binary, command in (
            ("node", [str(node_binary), "describe", "--mode", mode]),
            ("client", [str(client), "--describe", "--mode", mode]),
        ):
            path = DESCRIPTIONS / binary / f"{mode}.json"
            path.write_text(_printed(command))
            written.append(path)
    return written


if __name__ == "__main__":
    for path in regenerate(Path(sys.argv[1] if len(sys.argv) > 1 else "target/release/node")):
        print(f"wrote {path}")
