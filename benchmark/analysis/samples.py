"""Sample transactions: the (id, time) events processes report in their `samples` arrays.

Clients report sends as `{"id", "t_ms"}`; nodes report `{"id", "event", "t_ms"}` with `event`
one of SAMPLE_EVENTS (see `consensus/hops.py` for what each means).
"""

from __future__ import annotations

from collections.abc import Iterable

from .metrics import ProcessMetrics

# The events of a sample's path through a node, in the order they happen.
SAMPLE_EVENTS: tuple[str, ...] = ("receive", "seal", "quorum", "commit", "verify", "execute")


def sample_events(process: ProcessMetrics, event: str | None) -> Iterable[tuple[str, float]]:
    """(id, time) of a process's well-formed samples: all of them (clients: `event` None), or
    one event kind (nodes)."""
    for record in process.records:
        samples = record.get("samples")
        if not isinstance(samples, list):
            continue
        for sample in samples:
            if not isinstance(sample, dict) or "id" not in sample:
                continue
            if event is not None and sample.get("event") != event:
                continue
            t_ms = sample.get("t_ms")
            if isinstance(t_ms, int | float) and not isinstance(t_ms, bool):
                yield str(sample["id"]), float(t_ms)


def first_sends(clients: Iterable[ProcessMetrics]) -> dict[str, float]:
    """The earliest send time of every sample id over the clients."""
    sent: dict[str, float] = {}
    for client in clients:
        for key, t_ms in sample_events(client, None):
            if key not in sent or t_ms < sent[key]:
                sent[key] = t_ms
    return sent
