"""The node's parameters file, holding only what the user set.

Rust's `Parameters` (consensus/config/src/lib.rs) is the one source of the defaults: every field is
optional there and `{}` is a valid file. The harness therefore writes a field only when the user
set it; a default copied here would silently override the node's own whenever Rust changed it.
The field names are the Rust ones (the node rejects unknown fields); a test compares them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .errors import HarnessError

# Fields the node requires to be above zero when set (`Parameters::validate`); checked here too so
# a bad flag fails before anything starts rather than as a node's boot error.
POSITIVE = frozenset(
    {
        "timeout_delay",
        "sync_retry_delay",
        "batch_size",
        "max_batch_delay",
        "max_block_digests",
        "channel_capacity",
        "max_rounds_ahead",
        "max_uncommitted_batches_per_author",
        "max_connections",
        "idle_timeout_ms",
        "max_pending_sync_blocks",
        "checkpoint_rounds",
        "leader_window",
        "max_uncommitted_bytes",
        "max_unexecuted_bytes",
        "max_retained_bytes",
    }
)
# The node's leader rules (`LeaderRule` in consensus/config/src/lib.rs).
LEADER_RULES = ("round-robin", "reputation")


class ParametersError(HarnessError):
    """A node parameter has an impossible value."""


@dataclass(frozen=True)
class NodeParameters:
    """Node parameters (times in ms, sizes in bytes); None means "the node's default"."""

    timeout_delay: int | None = None
    leader: str | None = None
    leader_window: int | None = None
    sync_retry_delay: int | None = None
    sync_retry_nodes: int | None = None
    batch_size: int | None = None
    max_batch_delay: int | None = None
    gc_depth: int | None = None
    gc_retention_ms: int | None = None
    max_block_digests: int | None = None
    max_rounds_ahead: int | None = None
    max_frame_size: int | None = None
    channel_capacity: int | None = None
    max_backlog_per_sender: int | None = None
    max_request_digests: int | None = None
    max_uncommitted_bytes: int | None = None
    max_unexecuted_bytes: int | None = None
    max_retained_bytes: int | None = None
    max_uncommitted_batches_per_author: int | None = None
    max_connections: int | None = None
    idle_timeout_ms: int | None = None
    max_pending_sync_blocks: int | None = None
    checkpoint_rounds: int | None = None

    def __post_init__(self) -> None:
        if self.leader is not None and self.leader not in LEADER_RULES:
            raise ParametersError(
                f"unknown leader rule {self.leader!r}; expected one of {', '.join(LEADER_RULES)}"
            )
        for name, value in self.to_json().items():
            if not isinstance(value, int):
                continue
            lowest = 1 if name in POSITIVE else 0
            if value < lowest:
                raise ParametersError(f"{name} must be at least {lowest}, got {value}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeParameters:
        """The node parameters among `data`'s keys (other keys are ignored)."""
        return cls(**{name: data[name] for name in cls.names() if data.get(name) is not None})

    def to_json(self) -> dict[str, int | str]:
        """Only the fields that were set: the node fills in the rest."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path
