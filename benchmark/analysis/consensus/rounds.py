"""How the consensus rounds went over the steady window: how many there were, how many ended in a
timeout and whose rounds those were, how long the mempools held their clients back, and how
often a leader left its batches out because its node's execution was behind.

Every figure is a counter the nodes report (`consensus.round`, `timeouts`,
`timed_out_leaders.<leader>`, `backpressure_ms`, `withheld_proposals`), read within each life
over the window (`counters.increase`). A node names leaders by the short form of their key, as
it names itself (`name` in its METRICS lines), so a leader is shown as the node it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..counters import Window, increase
from ..metrics import ProcessMetrics
from ..node_lives import index_of
from ..stats import mean


@dataclass(frozen=True)
class Rounds:
    """Means over the nodes counted for the headline rates, except `timed_out_leaders`, which
    sums every node's timeouts by the leader whose round it was (`?`: a node that could not tell
    who led)."""

    rounds: float
    timeouts: float
    # Share of the window the mempools held their clients back (at their uncommitted bound).
    backpressure_share: float | None
    # Blocks proposed without batches because the leader's execution was behind.
    withheld_proposals: float | None
    window_seconds: float
    timed_out_leaders: dict[str, int] = field(default_factory=dict)

    @property
    def rounds_per_second(self) -> float:
        return self.rounds / self.window_seconds if self.window_seconds > 0 else 0.0

    @property
    def timeout_share(self) -> float:
        """Share of the rounds that ended in a timeout."""
        return self.timeouts / self.rounds if self.rounds > 0 else 0.0


def node_labels(nodes: Sequence[ProcessMetrics]) -> dict[str, str]:
    """Each node's short name (as its lines give it) -> its label (`node-i`)."""
    labels: dict[str, str] = {}
    for node in nodes:
        index = index_of(node)
        labels[node.name] = f"node-{index}" if index is not None else node.name
    return labels


def rounds_of(
    nodes: Sequence[ProcessMetrics], counted: Sequence[ProcessMetrics], window: Window
) -> Rounds | None:
    """The rounds of the window, or None if the nodes report none (a log without rounds)."""
    rounds = mean(increase(n.records, ("consensus", "round"), window) for n in counted)
    if rounds is None:
        return None
    timeouts = mean(increase(n.records, ("consensus", "timeouts"), window) for n in counted)
    paused_ms = mean(increase(n.records, ("consensus", "backpressure_ms"), window) for n in counted)
    window_ms = window.end_ms - window.start_ms
    return Rounds(
        rounds=rounds,
        timeouts=timeouts or 0.0,
        backpressure_share=None
        if paused_ms is None or window_ms <= 0
        else min(1.0, paused_ms / window_ms),
        withheld_proposals=mean(
            increase(n.records, ("consensus", "withheld_proposals"), window) for n in counted
        ),
        window_seconds=window.seconds,
        timed_out_leaders=_timed_out_leaders(nodes, window),
    )


def _timed_out_leaders(nodes: Sequence[ProcessMetrics], window: Window) -> dict[str, int]:
    labels = node_labels(nodes)
    leaders: set[str] = set()
    for node in nodes:
        for record in node.records:
            consensus = record.get("consensus")
            counts = consensus.get("timed_out_leaders") if isinstance(consensus, Mapping) else None
            if isinstance(counts, Mapping):
                leaders.update(str(key) for key in counts)
    totals: dict[str, int] = {}
    for leader in sorted(leaders):
        path = ("consensus", "timed_out_leaders", leader)
        grown = sum(increase(n.records, path, window) or 0.0 for n in nodes)
        if grown >= 0.5:
            totals[labels.get(leader, leader)] = round(grown)
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def rounds_section(rounds: Rounds | None) -> list[str]:
    """The summary's lines on the rounds (none without rounds)."""
    if rounds is None:
        return []
    lines = [
        f" + ROUNDS: {rounds.rounds:,.0f} in the window ({rounds.rounds_per_second:,.1f}/s),"
        f" {rounds.timeouts:,.0f} timed out ({rounds.timeout_share:.1%})"
    ]
    if rounds.timed_out_leaders:
        blamed = ", ".join(
            f"{leader} x{count}" for leader, count in rounds.timed_out_leaders.items()
        )
        lines.append(f"   timeouts by the leader of the round (all nodes): {blamed}")
    if rounds.backpressure_share is not None:
        lines.append(
            f"   mempools held their clients back {rounds.backpressure_share:.0%} of the window"
            " (their uncommitted batches at max_uncommitted_bytes)"
        )
    if rounds.withheld_proposals:
        lines.append(
            f"   {rounds.withheld_proposals:,.0f} blocks per node proposed without batches: the"
            " leader's execution was behind (max_unexecuted_bytes)"
        )
    return lines
