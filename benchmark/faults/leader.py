"""Which node leads a round: Rust's round-robin `Committee::leader` (consensus/config/src/lib.rs) in
Python, for logs whose METRICS lines do not name the leader, and the node a short name is.

The committee is a `BTreeMap<PublicKey, Authority>` and the leader of round r is the key at
position r mod n in key order. A public key orders by its 32 bytes, which is the order of its
lowercase hex form: the names of the committee file, sorted as strings.
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


def leader_name(names: Sequence[str], round_: int) -> str:
    ordered = sorted(name.lower() for name in names)
    return ordered[round_ % len(ordered)]


def leader_index(names: Sequence[str], round_: int) -> int:
    """The index (node-i) of the node that leads `round_`."""
    lowered = [name.lower() for name in names]
    return lowered.index(leader_name(lowered, round_))


def named_index(names: Sequence[str], short: str) -> int | None:
    """The index of the node whose key the short name (its first hex digits, as the node prints
    a key) begins; None if no node's does."""
    short = short.lower()
    for index, name in enumerate(names):
        if name.lower().startswith(short):
            return index
    return None
