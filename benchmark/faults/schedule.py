"""The fault schedule of a run: which nodes crash when, and whether they come back.

Times are seconds from the moment the clients start. `--crash=NODE@T` kills node NODE (SIGKILL,
like a power cut: no final METRICS line) at T; `--crash=NODE@T:RESTART_T` starts it again at
RESTART_T with its exact command, its output appended to the same log. `--kill-leader-every=S`
kills, every S seconds, the node leading the current round and restarts it S/2 seconds later:
restarting keeps at most one node down at a time, so a committee of 4 (f = 1) stays live however
long the run, and every kill tests a fresh leader change rather than a shrinking committee. A
kill is made only when the run lasts S after it (its restart, and S/2 to see the node come back),
so a run of D seconds has at most floor(D/S) - 1 kills.

`--partition=NODES@T1-T2` cuts NODES off from the rest of the committee from T1 to T2: the nodes
do it themselves (net_emulation.py); the injector only records it.

A schedule that restarts nodes runs every node with `--store` (`FaultSchedule.bench_for`): a
node restarted without its store has no vote record, and its peers, who hold its signatures,
would make it stop at start (or, with `--risk-equivocation-without-vote-record`, which the
harness never passes, vote only above what they show: docs/store.md).

`--faults=N` (nodes never booted) is a bench parameter, not part of this schedule; scheduled
crashes and partitions may not name those nodes.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..binary_modes import runs_committee
from ..config import BenchParameters
from ..errors import HarnessError
from .net_emulation import Partition, check_partitions, parse_partitions


class ScheduleError(HarnessError):
    """A fault flag cannot be read or does not fit the run; the message names the flag."""


_CRASH = re.compile(r"^\s*(\d+)\s*@\s*([0-9.]+)\s*(?::\s*([0-9.]+)\s*)?$")


@dataclass(frozen=True)
class Crash:
    node: int
    at: float
    restart_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "at": self.at, "restart_at": self.restart_at}


@dataclass(frozen=True)
class FaultSchedule:
    crashes: tuple[Crash, ...] = ()
    kill_leader_every: float | None = None
    # Seconds after a leader kill at which the leader is restarted (S/2, see the module doc).
    leader_restart_after: float | None = field(default=None)
    partitions: tuple[Partition, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.crashes and self.kill_leader_every is None and not self.partitions

    @property
    def restarts(self) -> bool:
        """Whether the schedule starts a node it killed again."""
        crash_restarts = any(crash.restart_at is not None for crash in self.crashes)
        return crash_restarts or self.kill_leader_every is not None

    def bench_for(self, bench: BenchParameters) -> BenchParameters:
        """`bench` as the schedule runs it: with `--store` when it restarts nodes, so a node
        comes back with the safety state (its votes) it had; restarted on an empty memory
        store, it would stop at start, since its peers hold signatures of its key."""
        if self.restarts and not bench.store:
            return dataclasses.replace(bench, store=True)
        return bench

    def crashed_nodes(self) -> set[int]:
        return {crash.node for crash in self.crashes}

    def to_dict(self) -> dict[str, Any]:
        return {
            "crashes": [crash.to_dict() for crash in self.crashes],
            "kill_leader_every": self.kill_leader_every,
            "leader_restart_after": self.leader_restart_after,
            "partitions": [partition.to_dict() for partition in self.partitions],
        }

    def check(self, bench: BenchParameters) -> None:
        """Every crash names a booted node and happens while the clients send."""
        if self.empty:
            return
        if not runs_committee(bench.mode):
            raise ScheduleError(
                f"--crash, --kill-leader-every and --partition need nodes; {bench.mode} runs none"
            )
        check_partitions(self.partitions, bench.live_nodes, bench.duration)
        for crash in self.crashes:
            spec = _spec(crash)
            if crash.node >= bench.live_nodes:
                booted = f"0..{bench.live_nodes - 1}"
                raise ScheduleError(
                    f"--crash={spec}: node {crash.node} is not a booted node ({booted};"
                    f" {bench.nodes} nodes, {bench.faults} never booted)"
                )
            if crash.at >= bench.duration:
                raise ScheduleError(
                    f"--crash={spec}: {crash.at:g} s is not within the {bench.duration} s run"
                )
        by_node: dict[int, list[Crash]] = {}
        for crash in self.crashes:
            by_node.setdefault(crash.node, []).append(crash)
        for node, crashes in by_node.items():
            ordered = sorted(crashes, key=lambda c: c.at)
            for before, after in itertools.pairwise(ordered):
                if before.restart_at is None or before.restart_at > after.at:
                    raise ScheduleError(
                        f"--crash: node {node} crashes at {after.at:g} s while still down"
                        f" from --crash={_spec(before)}"
                    )
        if self.kill_leader_every is not None and 2 * self.kill_leader_every > bench.duration:
            raise ScheduleError(
                f"--kill-leader-every={self.kill_leader_every:g}: no kill within the"
                f" {bench.duration} s run with its restart and as long again after it"
            )


def _spec(crash: Crash) -> str:
    restart = "" if crash.restart_at is None else f":{crash.restart_at:g}"
    return f"{crash.node}@{crash.at:g}{restart}"


def parse_crash(text: str) -> Crash:
    """`"1@4"` -> Crash(1, 4.0); `"1@4:8"` -> Crash(1, 4.0, 8.0)."""
    match = _CRASH.match(text)
    if match is None:
        raise ScheduleError(
            f"--crash={text!r} is not NODE@T or NODE@T:RESTART_T"
            " (node index, seconds from the start of the clients)"
        )
    try:
        at = float(match.group(2))
        restart = float(match.group(3)) if match.group(3) is not None else None
    except ValueError as error:
        raise ScheduleError(f"--crash={text!r}: {error}") from error
    if restart is not None and restart <= at:
        raise ScheduleError(
            f"--crash={text!r}: the restart ({restart:g} s) must come after {at:g} s"
        )
    return Crash(int(match.group(1)), at, restart)


def parse_period(text: object) -> float | None:
    """`--kill-leader-every=S`: a positive number of seconds, or None when not given."""
    if text is None or text == "":
        return None
    try:
        value = float(str(text))
    except ValueError as error:
        raise ScheduleError(f"--kill-leader-every must be seconds, got {text!r}") from error
    if value <= 0:
        raise ScheduleError(f"--kill-leader-every must be positive, got {text!r}")
    return value


def schedule_from_flags(
    crash: Sequence[str] | None,
    kill_leader_every: object,
    partition: Sequence[str] | None = None,
) -> FaultSchedule:
    """The schedule of `fab local` / `fab remote` flags (`--crash`, `--partition` may repeat)."""
    crashes = tuple(sorted((parse_crash(spec) for spec in crash or ()), key=lambda c: c.at))
    period = parse_period(kill_leader_every)
    return FaultSchedule(
        crashes=crashes,
        kill_leader_every=period,
        leader_restart_after=period / 2 if period is not None else None,
        partitions=parse_partitions(partition),
    )
