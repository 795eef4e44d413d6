"""Parsing and checking `--crash` and `--kill-leader-every`."""

from __future__ import annotations

import pytest

from benchmark.config import BenchParameters
from benchmark.faults.schedule import Crash, ScheduleError, parse_crash, schedule_from_flags


def test_crash_specs() -> None:
    assert parse_crash("1@4") == Crash(1, 4.0, None)
    assert parse_crash("2@4.5:8") == Crash(2, 4.5, 8.0)


@pytest.mark.parametrize("spec", ["", "1", "@4", "1@", "a@4", "1@4:", "1@-2", "1@4:x", "1@4;8"])
def test_bad_crash_specs_name_the_flag(spec: str) -> None:
    with pytest.raises(ScheduleError, match="--crash"):
        parse_crash(spec)


def test_restart_must_follow_the_crash() -> None:
    with pytest.raises(ScheduleError, match=r"--crash='1@8:4'.*after"):
        parse_crash("1@8:4")


@pytest.mark.parametrize("value", ["x", "0", "-5"])
def test_bad_kill_leader_period_names_the_flag(value: str) -> None:
    with pytest.raises(ScheduleError, match="--kill-leader-every"):
        schedule_from_flags([], value)


def test_schedule_from_flags_sorts_and_halves_the_leader_restart() -> None:
    schedule = schedule_from_flags(["2@6", "1@4:8"], "5")
    assert [c.node for c in schedule.crashes] == [1, 2]
    assert schedule.kill_leader_every == 5.0
    assert schedule.leader_restart_after == 2.5
    assert schedule_from_flags(None, None).empty


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["3@4"], "node 3 is not a booted node"),  # node 3 is never booted (faults=1)
        (["1@10"], "not within the 10 s run"),
        (["1@2", "1@5"], "still down"),
        (["1@2:6", "1@5"], "still down"),
    ],
)
def test_schedule_checked_against_the_run(specs: list[str], message: str) -> None:
    bench = BenchParameters(nodes=4, faults=1, duration=10)
    with pytest.raises(ScheduleError, match=message):
        schedule_from_flags(specs, None).check(bench)


def test_a_valid_schedule_passes_and_movevm_has_no_nodes() -> None:
    schedule = schedule_from_flags(["1@2:4", "1@5"], "3")
    schedule.check(BenchParameters(nodes=4, duration=10))
    with pytest.raises(ScheduleError, match="movevm"):
        schedule.check(BenchParameters(mode="movevm"))


def test_a_schedule_that_restarts_nodes_runs_them_on_their_stores() -> None:
    """A node restarted without its store forgets its votes (it may vote twice in a round)."""
    bench = BenchParameters(mode="hotstuff", duration=20)
    restarting = [
        schedule_from_flags(["1@5:12"], None, None),
        schedule_from_flags(None, "5", None),
    ]
    for schedule in restarting:
        assert schedule.restarts
        assert schedule.bench_for(bench).store
    # A crash without a restart, or no schedule, changes nothing.
    for schedule in [
        schedule_from_flags(["1@5"], None, None),
        schedule_from_flags(None, None, None),
    ]:
        assert not schedule.restarts
        assert schedule.bench_for(bench) == bench
