"""The members of a run's committee, node i's key at position i, and which member a short name
(the first hex digits a node prints of a key) is. Who leads a round is the node's to say: its
METRICS lines name the leader of their round (`consensus.leader`), under either leader rule, and
the fault injector kills the one they name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..config import ConfigError, read_json


def committee_names(path: Path) -> list[str]:
    """The public keys of a committee file, node i's at position i (the file keeps that order)."""
    data = read_json(path)
    authorities = data.get("authorities") if isinstance(data, dict) else None
    if not isinstance(authorities, dict) or not authorities:
        raise ConfigError(f"{path}: no 'authorities'")
    return [str(name) for name in authorities]


def named_index(names: Sequence[str], short: str) -> int | None:
    """The index of the node whose key the short name (its first hex digits, as the node prints
    a key) begins; None if no node's does."""
    short = short.lower()
    for index, name in enumerate(names):
        if name.lower().startswith(short):
            return index
    return None
