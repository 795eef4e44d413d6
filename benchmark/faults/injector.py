"""Carries out a fault schedule while a run goes: crashes, restarts, leader kills. Partitions
are carried out by the nodes (net_emulation.py); the injector records them when they happen.

The injector knows nothing of processes or SSH: a `NodeControl` kills and restarts node i and
reports the latest round the nodes announced, with its leader as the node saw it
(`consensus.round` and `consensus.leader` of their METRICS lines: the node is the one place that
knows who leads, under either rule; a line without a leader is waited past). The runner calls
`tick()` from its wait loop; every event is recorded in a `FaultLog`.

A METRICS line comes once a second while a round lasts about 100 ms under load, so a round read
from a line already written is most likely over. A due leader kill therefore waits (up to a
second) for the next line of any live node and kills the leader of the round it reports at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from ..json_path import number
from .events import CRASH, HEAL, PARTITION, RESTART, FaultEvent, FaultLog
from .members import named_index
from .schedule import FaultSchedule

# How long a due leader kill waits for a fresh METRICS line (they come once a second).
LEADER_WAIT_MS = 3000.0


class NodeControl(Protocol):
    def kill(self, node: int) -> None:
        """Kill node `node` at once (SIGKILL to its process group)."""

    def restart(self, node: int) -> None:
        """Start node `node` again with its exact command, appending to its log."""

    def latest_round(self, nodes: Sequence[int], since_ms: float) -> RoundView | None:
        """The highest `consensus.round` in the given nodes' latest METRICS lines written at or
        after `since_ms` (wall clock ms), with the leader that line names; None while none is
        that recent."""


@dataclass(frozen=True)
class RoundView:
    """A round a node reported, and the short name of its leader as the node saw it (None: the
    line does not say)."""

    round: int
    leader: str | None = None


def round_view(record: Mapping[str, Any]) -> list[RoundView]:
    """The round a METRICS record reports, with its leader if the record names one (none or
    one view)."""
    value = number(record, ("consensus", "round"))
    if value is None:
        return []
    consensus = record.get("consensus")
    leader = consensus.get("leader") if isinstance(consensus, Mapping) else None
    return [RoundView(int(value), leader if isinstance(leader, str) else None)]


@dataclass(order=True)
class _Pending:
    t: float
    kind: str = field(compare=False)
    node: int = field(compare=False)
    cause: str = field(compare=False)


@dataclass
class FaultInjector:
    schedule: FaultSchedule
    control: NodeControl
    names: list[str]  # committee public keys, node i's at position i
    live_nodes: int  # nodes 0..live_nodes-1 were booted
    out: TextIO
    clock: Callable[[], float] = time.time
    # The run's length: a leader kill due later than S before it is not made (`tick`).
    duration: float = math.inf
    log: FaultLog = field(default_factory=FaultLog)
    down: set[int] = field(default_factory=set)
    pending: list[_Pending] = field(default_factory=list)
    next_leader_kill: float | None = None
    # Wall clock ms since which a fresh METRICS line is awaited for a due leader kill.
    leader_kill_armed_ms: float | None = None

    def start(self, at: float | None = None) -> None:
        """The clients just started: times of the schedule count from now, or from `at` (wall
        clock seconds) when the start was fixed in advance (the nodes' partition windows)."""
        self.log.start_ms = (self.clock() if at is None else at) * 1000.0
        self.log.schedule = self.schedule.to_dict()
        self.log.never_booted = list(range(self.live_nodes, len(self.names)))
        for crash in self.schedule.crashes:
            self.pending.append(_Pending(crash.at, CRASH, crash.node, "schedule"))
            if crash.restart_at is not None:
                self.pending.append(_Pending(crash.restart_at, RESTART, crash.node, "schedule"))
        for partition in self.schedule.partitions:
            for node in partition.nodes:
                self.pending.append(_Pending(partition.start, PARTITION, node, "schedule"))
                self.pending.append(_Pending(partition.end, HEAL, node, "schedule"))
        self.pending.sort()
        self.next_leader_kill = self.schedule.kill_leader_every

    def elapsed(self) -> float:
        if self.log.start_ms is None:
            return 0.0
        return self.clock() - self.log.start_ms / 1000.0

    def holds_run(self, duration: float) -> bool:
        """Whether the run must go on although every client may have stopped: the clients of
        crashed nodes die with their connection, and the schedule still runs to `duration`."""
        return not self.schedule.empty and self.elapsed() < duration

    def is_expected_down(self, node: int) -> bool:
        """Whether node `node` is down because of the schedule (a death not to abort on)."""
        return node in self.down

    def ever_crashed(self, node: int) -> bool:
        """A crashed node's client lost its connection and stopped: not a failure either."""
        return node in self.log.crashed()

    def tick(self) -> None:
        if self.log.start_ms is None:
            return
        now = self.elapsed()
        while self.pending and self.pending[0].t <= now:
            event = self.pending.pop(0)
            if event.kind == CRASH:
                self._crash(event.node, event.cause, None)
            elif event.kind == RESTART:
                self._restart(event.node, event.cause)
            else:
                # The nodes cut and healed at the scheduled moment: record that moment.
                self._record(event.kind, event.node, event.cause, None, at=event.t)
        period = self.schedule.kill_leader_every
        if (
            self.next_leader_kill is not None
            and period is not None
            and now >= self.next_leader_kill
        ):
            # A kill is made only when its restart, S/2 later, and S/2 more of the run follow
            # it: a restart at the run's end (or after it) would leave no time to see the node
            # come back and commits go on.
            if self.next_leader_kill + period <= self.duration:
                self.leader_kill_armed_ms = self.clock() * 1000.0
            self.next_leader_kill += period
        if self.leader_kill_armed_ms is not None:
            self._kill_leader(self.leader_kill_armed_ms)

    def _kill_leader(self, since_ms: float) -> None:
        up = [i for i in range(self.live_nodes) if i not in self.down]
        view = self.control.latest_round(up, since_ms)
        # The node names the leader of its round; a line that names none (a node not yet in a
        # round) is waited past like no line at all.
        if view is None or view.leader is None:
            if self.clock() * 1000.0 - since_ms > LEADER_WAIT_MS:
                self.out.write("fault: no node named the leader of a round; no leader killed\n")
                self.leader_kill_armed_ms = None
            return
        self.leader_kill_armed_ms = None
        round_ = view.round
        node = named_index(self.names, view.leader)
        if node is None:
            self.out.write(f"fault: the leader of round {round_} ({view.leader}) is no member\n")
            return
        if node in self.down or node >= self.live_nodes:
            self.out.write(f"fault: the leader of round {round_} (node-{node}) is already down\n")
            return
        self._crash(node, "leader", round_)
        after = self.schedule.leader_restart_after
        if after is not None:
            self.pending.append(_Pending(self.elapsed() + after, RESTART, node, "leader"))
            self.pending.sort()

    def _crash(self, node: int, cause: str, round_: int | None) -> None:
        self.control.kill(node)
        self.down.add(node)
        self._record(CRASH, node, cause, round_)

    def _restart(self, node: int, cause: str) -> None:
        self.control.restart(node)
        self.down.discard(node)
        self._record(RESTART, node, cause, None)

    def _record(
        self, kind: str, node: int, cause: str, round_: int | None, at: float | None = None
    ) -> None:
        if at is None or self.log.start_ms is None:
            t, time_ms = self.elapsed(), self.clock() * 1000.0
        else:
            t, time_ms = at, self.log.start_ms + at * 1000.0
        event = FaultEvent(kind, node, round(t, 3), time_ms, cause, round_)
        self.log.events.append(event)
        what = f" (leader of round {round_})" if round_ is not None else ""
        self.out.write(f"fault: {kind} node-{node} at {event.t:.1f} s{what}\n")
        self.out.flush()
