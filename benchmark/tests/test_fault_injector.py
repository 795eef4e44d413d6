"""The fault injector with a fake clock and fake nodes: the schedule's order, leader kills on a
fresh round only, the restart S/2 later, and which deaths are expected."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from io import StringIO

from benchmark.faults.injector import FaultInjector, RoundView
from benchmark.faults.schedule import schedule_from_flags

NAMES = ["cc" * 32, "aa" * 32, "dd" * 32, "bb" * 32]  # key order: 1, 3, 0, 2


@dataclass
class FakeNodes:
    now: list[float]
    round_: int = 7
    round_written_at: float = 0.0  # seconds
    # The leader the lines name (None: lines of nodes that do not say).
    leader: str | None = None
    actions: list[tuple[str, int, float]] = field(default_factory=list)

    def kill(self, node: int) -> None:
        self.actions.append(("kill", node, self.now[0]))

    def restart(self, node: int) -> None:
        self.actions.append(("restart", node, self.now[0]))

    def latest_round(self, nodes: Sequence[int], since_ms: float) -> RoundView | None:
        if self.round_written_at * 1000.0 < since_ms:
            return None
        return RoundView(self.round_, self.leader)


def run(
    crashes: list[str],
    period: str | None,
    until: float,
    step: float = 0.25,
    duration: float = 1000.0,
    *,
    leader: str | None = None,
) -> FakeNodes:
    now = [0.0]
    nodes = FakeNodes(now, leader=leader)
    injector = FaultInjector(
        schedule_from_flags(crashes, period),
        nodes,
        NAMES,
        4,
        StringIO(),
        clock=lambda: now[0],
        duration=duration,
    )
    injector.start()
    while now[0] < until:
        now[0] += step
        # A METRICS line every second, one round further each time.
        if now[0] % 1.0 == 0:
            nodes.round_ += 1
            nodes.round_written_at = now[0]
        injector.tick()
    return nodes


def test_crashes_and_restarts_happen_in_time_order() -> None:
    nodes = run(["2@3", "1@1:2"], None, 4)
    assert [(a, n) for a, n, _ in nodes.actions] == [("kill", 1), ("restart", 1), ("kill", 2)]


def test_the_leader_of_a_fresh_round_is_killed_and_restarted_half_a_period_later() -> None:
    nodes = run([], "2.5", 4.9, leader="dddddddd")
    kill, restart = nodes.actions[0], nodes.actions[1]
    # Due at 2.5 s; the next line comes at 3 s with round 10: the leader it names is killed.
    assert kill == ("kill", 2, 3.0)
    assert restart == ("restart", 2, 4.25)


def test_the_leader_a_node_names_is_the_one_killed() -> None:
    # Under either rule only the nodes know who leads: the harness has no copy of the rules.
    nodes = run([], "2.5", 4.9, leader="bbbbbbbb")
    assert nodes.actions[0] == ("kill", 3, 3.0)


def test_lines_that_name_no_leader_kill_nobody() -> None:
    out = StringIO()
    now = [0.0]
    nodes = FakeNodes(now, leader=None)
    injector = FaultInjector(
        schedule_from_flags([], "5"), nodes, NAMES, 4, out, clock=lambda: now[0]
    )
    injector.start()
    # Due at 5 s; lines naming no leader for the next 3 s: the kill is given up.
    while now[0] < 9.0:
        now[0] += 0.25
        if now[0] % 1.0 == 0:
            nodes.round_ += 1
            nodes.round_written_at = now[0]
        injector.tick()
    assert nodes.actions == []
    assert "no node named the leader of a round; no leader killed" in out.getvalue()


def test_no_leader_kill_is_due_at_the_end_of_the_run() -> None:
    # Kills due at 5, 10, 15 and 20 s in a 20 s run whose clients overrun a little: the one
    # due at 20 s would leave no time to see commits resume.
    nodes = run([], "5", 22.0, duration=20.0, leader="aaaaaaaa")
    kills = [t for action, _, t in nodes.actions if action == "kill"]
    assert len(kills) == 3
    assert max(kills) < 20.0


def test_every_leader_kill_leaves_its_restart_and_as_long_again_in_the_run() -> None:
    # Kills due at 3 and 6 s in a 7 s run: the one due at 6 s would restart its node at 7.5 s,
    # after the run, so no comeback and no commit after the last restart could be seen.
    nodes = run([], "3", 9.0, duration=7.0, leader="aaaaaaaa")
    actions = [(action, t) for action, _, t in nodes.actions]
    assert actions == [("kill", 3.0), ("restart", 4.5)]


def test_expected_deaths() -> None:
    now = [0.0]
    nodes = FakeNodes(now)
    injector = FaultInjector(
        schedule_from_flags(["1@1:2"], None), nodes, NAMES, 4, StringIO(), clock=lambda: now[0]
    )
    injector.start()
    now[0] = 1.5
    injector.tick()
    assert injector.is_expected_down(1)
    assert not injector.is_expected_down(0)
    now[0] = 2.5
    injector.tick()
    assert not injector.is_expected_down(1)
    assert injector.ever_crashed(1)  # its client died with the connection
    assert injector.holds_run(10)
    assert not injector.holds_run(2)


def test_partitions_are_recorded_at_their_scheduled_times_per_node() -> None:
    now = [100.0]
    nodes = FakeNodes(now)
    injector = FaultInjector(
        schedule_from_flags([], None, ["1,2@1-3"]),
        nodes,
        NAMES,
        4,
        StringIO(),
        clock=lambda: now[0],
    )
    # The clients' start was fixed in advance (the nodes' windows count from it).
    injector.start(at=99.5)
    for t in (100.9, 101.7, 103.4):  # ticks come late; the nodes acted on time
        now[0] = t
        injector.tick()
    events = [(e.kind, e.node, e.t, e.time_ms) for e in injector.log.events]
    assert events == [
        ("partition", 1, 1.0, 100_500.0),
        ("partition", 2, 1.0, 100_500.0),
        ("heal", 1, 3.0, 102_500.0),
        ("heal", 2, 3.0, 102_500.0),
    ]
    # The injector kills nothing for a partition, and nobody is expected down.
    assert nodes.actions == []
    assert not injector.is_expected_down(1)
    assert injector.log.partitioned() == {1, 2}
    assert injector.log.down_at_end() == set()
