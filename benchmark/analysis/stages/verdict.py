"""The limiting stage: `find_bottleneck`'s rules over the stage table, the throughput and the
rounds of a run, first match wins, with notes on what else the run shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise

from ..consensus.rounds import Rounds
from ..resources.usage import Machine
from ..throughput import ClientStats, Throughput
from .bottleneck import KEEPS_UP_RULE, Bottleneck
from .cpu_bound import cpu_bound
from .table import StageRow

# Rule thresholds of `find_bottleneck` (shares of the window's wall time or of a rate).
BLOCKED_THRESHOLD = 0.05
FALLS_BEHIND = 0.95
SATURATED_BUSY = 0.8
CLIENT_SHORTFALL = 0.9
KEEPS_UP = 0.95
# Share of the window the mempools held their clients back past which the clients' shortfall is
# the system's back-pressure, not the load generator's limit.
HELD_BACK = 0.05
# Share of rounds that timed out past which a run that kept up pays for it in latency.
TIMED_OUT = 0.01
# Seal-to-commit p50 past which a run that did not keep up was in the collapsed state (batches
# waited longer than the default round timeout).
COLLAPSED_MS = 1000.0


def find_bottleneck(
    stages: Sequence[StageRow],
    end_to_end: Throughput,
    clients: ClientStats | None,
    consensus: Throughput | None,
    machines: Sequence[Machine] = (),
    *,
    rounds: Rounds | None = None,
) -> Bottleneck:
    """Name the component that limited the run, with the numbers that show it.

    The rules, first match wins:

    0. CPU. When a machine's processes used at least 90 % of its cores and the system did not
       keep up (rule 3), the run is CPU-bound, and the stage costing the most CPU per
       transaction (summed over nodes) is named, with a second line for any stage within 10 %
       of it (`cpu_bound.py`). On shared cores the rules below cannot tell a slow stage from one
       waiting for a core. Logs without CPU counters skip this rule.
    1. Back-pressure. Stages are joined by bounded channels that record the time their producer
       spent blocked because the channel was full. A stage whose producer was blocked on its input
       for at least BLOCKED_THRESHOLD (5 %) of the window could not keep up with its input. A slow
       stage fills its input, which blocks its producer, whose own input then fills, and so on
       upstream, so when several channels are blocked the *most downstream* such stage is the
       cause; the others are victims.
    2. The load generator. If the clients sent less than CLIENT_SHORTFALL (90 %) of their target
       rate, they could not generate the load (e.g. CPU shared with the nodes): the system was not
       pushed to the requested rate and the clients are the limit, but only if the system kept up
       with what they did send (rule 3). If it did not, something inside limits the run even at
       the lower rate: the rules below name it, and a note says the clients fell short too.
       Clients the nodes held back (their mempools at their bound for at least HELD_BACK, 5 %, of
       the window) did not fall short on their own: the system pushed back, so it is held to the
       rate asked, and the rules inside name what limited it.
    3. The offered load. If end-to-end throughput reached KEEPS_UP (95 %) of what the clients
       sent, the system kept up: nothing inside it limited the run; raise the rate. Unless at
       least TIMED_OUT (1 %) of the rounds timed out: the load went through, but late, and the
       verdict names the timeouts and whose rounds they were (latency is the symptom).
    4. Falling behind. Input channels are deep (the consensus output holds `channel_capacity`
       whole batches), so a slow stage can fall behind for a whole run without ever filling its
       input. The first stage, in pipeline order, whose throughput is below FALLS_BEHIND (95 %)
       of the stage before it while its input queue holds work is the limit: everything it did
       not process is still waiting in front of it. Its busy share tells whether it was short of
       work time (busy near 100 %) or of CPU (busy lower: threads waiting for a core that other
       processes on the machine hold).
    5. Saturation without back-pressure. The stage with the highest busy share, if it is at least
       SATURATED_BUSY (80 %), is working almost all the time and limits the run (its input is not
       bounded by a measured channel, or it is the last stage).
    6. Consensus. Otherwise every measured stage has slack and no channel backs up, yet the
       system does not keep up with the load: ordering and dissemination (HotStuff, mempool,
       network) limit the rate at which transactions reach the pipeline.
    """
    held_back = rounds is not None and (rounds.backpressure_share or 0.0) >= HELD_BACK
    verdict = _inside_the_system(
        stages, end_to_end, clients, consensus, machines, held_back=held_back
    )
    # A run that kept up through timed-out rounds (an outage, a crashed leader) had batches
    # wait, but nothing queued for good: its note is the timeouts', never the collapse's.
    kept_up = verdict.kept_up
    if kept_up and rounds is not None and rounds.timeout_share >= TIMED_OUT:
        verdict = _timeouts(rounds, end_to_end, verdict)
    notes = list(verdict.notes)
    shortfall = _client_shortfall(clients)
    if shortfall is not None and held_back and rounds is not None:
        notes.append(
            f"the mempools held their clients back {rounds.backpressure_share:.0%} of the window:"
            " the committee ran at its capacity, and the clients' shortfall is its back-pressure."
        )
    elif shortfall is not None and verdict.stage != "client":
        notes.append(shortfall)
    collapsed = None if kept_up else _collapsed(consensus, rounds, held_back)
    if collapsed is not None:
        notes.append(collapsed)
    return replace(verdict, notes=tuple(notes))


def _timeouts(rounds: Rounds, end_to_end: Throughput, kept_up: Bottleneck) -> Bottleneck:
    """Rule 3's exception: the load went through, but timed-out rounds delayed it."""
    blamed = ", ".join(f"{leader} x{n}" for leader, n in rounds.timed_out_leaders.items())
    p50 = end_to_end.latency.p50_ms if end_to_end.latency.count else None
    return Bottleneck(
        stage="consensus",
        rule="timeouts",
        explanation=(
            f"it kept up with the load ({kept_up.explanation.split(':')[0]}), but "
            f"{rounds.timeouts:,.0f} of {rounds.rounds:,.0f} rounds timed out "
            f"({rounds.timeout_share:.1%}"
            + (f"; leaders {blamed}" if blamed else "")
            + "): latency is the symptom"
            + (f" (end-to-end p50 {p50:,.0f} ms)." if p50 is not None else ".")
        ),
        evidence={
            **kept_up.evidence,
            "timed_out_share": rounds.timeout_share,
            "rounds_per_s": rounds.rounds_per_second,
        },
    )


def _collapsed(consensus: Throughput | None, rounds: Rounds | None, held_back: bool) -> str | None:
    """The note on a run that did not keep up and let its batches queue: the collapsed state
    the back-pressure exists to prevent (latency grows with the queue, and the queue with it)."""
    if held_back or consensus is None or consensus.latency.count == 0:
        return None
    p50 = consensus.latency.p50_ms
    if p50 is None or p50 < COLLAPSED_MS:
        return None
    pace = f" at {rounds.rounds_per_second:,.1f} rounds/s" if rounds is not None else ""
    return (
        f"collapsed: batches waited p50 {p50 / 1000:,.1f} s from seal to commit{pace}, longer"
        " than a round's timeout, and the mempools did not hold the clients back: the queue grew."
    )


def _inside_the_system(
    stages: Sequence[StageRow],
    end_to_end: Throughput,
    clients: ClientStats | None,
    consensus: Throughput | None,
    machines: Sequence[Machine],
    *,
    held_back: bool,
) -> Bottleneck:
    """`find_bottleneck`'s rules, before the notes."""
    offered = _offered_load(end_to_end, clients, held_back)
    first = (
        _cpu_rule(stages, offered, machines)
        or _back_pressure(stages)
        or offered
        or _falls_behind(stages)
    )
    if first is not None:
        return first
    busy = [row for row in stages if row.busy_share is not None]
    if busy:
        row = max(busy, key=lambda r: r.busy_share or 0.0)
        if (row.busy_share or 0.0) >= SATURATED_BUSY:
            return Bottleneck(
                stage=row.name,
                rule="saturated",
                explanation=f"{row.name} was busy {row.busy_share:.0%} of the time.",
                evidence={
                    f"{row.name}_busy_share": row.busy_share or 0.0,
                    f"{row.name}_tps": row.throughput or 0.0,
                },
            )
    if consensus is None:
        # No consensus (movevm): the busiest stage is the best candidate even below saturation.
        row = max(busy, key=lambda r: r.busy_share or 0.0) if busy else None
        return Bottleneck(
            stage=row.name if row else "unknown",
            rule="busiest",
            explanation=(
                f"{row.name} was the busiest stage ({row.busy_share:.0%})."
                if row
                else "no stage reported its busy time."
            ),
            evidence={f"{row.name}_busy_share": row.busy_share or 0.0} if row else {},
        )
    evidence = {
        f"{row.name}_busy_share": row.busy_share for row in busy if row.busy_share is not None
    }
    evidence["consensus_tps"] = consensus.tps
    if clients is not None:
        evidence["sent_tps"] = clients.sent_tps
    slack = ", ".join(f"{r.name} busy {r.busy_share:.0%}" for r in busy if r.busy_share is not None)
    return Bottleneck(
        stage="consensus",
        rule="ordering",
        explanation=(
            "no channel backs up and no stage is saturated"
            + (f" ({slack})" if slack else "")
            + ", yet the system does not keep up with the load: "
            "ordering and dissemination limit it."
        ),
        evidence=evidence,
    )


# ---------------------------------------------------------------------------------------------


def _cpu_rule(
    stages: Sequence[StageRow], offered: Bottleneck | None, machines: Sequence[Machine]
) -> Bottleneck | None:
    """Rule 0 of `find_bottleneck`: a saturated machine, unless the system kept up."""
    if offered is not None and offered.kept_up:
        return None
    costs = {r.name: r.us_per_tx_sum for r in stages if r.us_per_tx_sum is not None}
    return cpu_bound(costs, machines)


def _back_pressure(stages: Sequence[StageRow]) -> Bottleneck | None:
    """Rule 1 of `find_bottleneck`: the most downstream stage whose producer was blocked."""
    blocked = [
        row
        for row in stages
        if row.input_blocked_share is not None and row.input_blocked_share >= BLOCKED_THRESHOLD
    ]
    if blocked:
        row = blocked[-1]
        producer = row.input_channel.split("->")[0] if row.input_channel else "producer"
        evidence = {f"{producer}_blocked_share": row.input_blocked_share or 0.0}
        if row.busy_share is not None:
            evidence[f"{row.name}_busy_share"] = row.busy_share
        if row.throughput is not None:
            evidence[f"{row.name}_tps"] = row.throughput
        if row.queue_mean is not None:
            evidence[f"{row.name}_queue_mean"] = row.queue_mean
        busy = "" if row.busy_share is None else f" while {row.name} was busy {row.busy_share:.0%}"
        return Bottleneck(
            stage=row.name,
            rule="back-pressure",
            explanation=(
                f"{producer} was blocked on the full {row.input_channel} channel "
                f"{row.input_blocked_share:.0%} of the time{busy}: {row.name} cannot keep up "
                "with its input."
            ),
            evidence=evidence,
        )
    return None


def _offered_load(
    end_to_end: Throughput, clients: ClientStats | None, held_back: bool = False
) -> Bottleneck | None:
    """Rules 2 and 3 of `find_bottleneck`: the clients fell short, or the system kept up."""
    if clients is None or clients.target_tps <= 0:
        return None
    # Held back by the nodes, the clients sent what the system took: only the rate asked tells
    # whether it kept up.
    if held_back and end_to_end.tps < KEEPS_UP * clients.target_tps:
        return None
    kept_up = end_to_end.tps >= KEEPS_UP * clients.sent_tps
    # Clients that fell short limit the run only if the system took all they sent: when it did
    # not, it would not have taken more either (a committee that falls behind what the clients
    # send is the limit, however far the clients fell short of the rate asked).
    if clients.sent_tps < CLIENT_SHORTFALL * clients.target_tps and kept_up:
        return Bottleneck(
            stage="client",
            rule="load generator",
            explanation=(
                f"the clients sent {clients.sent_tps:,.0f} tx/s of the "
                f"{clients.target_tps:,.0f} tx/s asked ({clients.missed_bursts} late bursts): "
                "the load generator is the limit."
            ),
            evidence={
                "sent_tps": clients.sent_tps,
                "target_tps": clients.target_tps,
                "missed_bursts": float(clients.missed_bursts),
            },
        )
    if kept_up:
        return Bottleneck(
            stage="offered load",
            rule=KEEPS_UP_RULE,
            explanation=(
                f"end-to-end {end_to_end.tps:,.0f} tx/s matches the "
                f"{clients.sent_tps:,.0f} tx/s sent: nothing inside limited the run; "
                "raise --rate to find the limit."
            ),
            evidence={"e2e_tps": end_to_end.tps, "sent_tps": clients.sent_tps},
        )
    return None


def _client_shortfall(clients: ClientStats | None) -> str | None:
    """The note added to a verdict inside the system when the clients fell short as well."""
    if clients is None or clients.target_tps <= 0:
        return None
    if clients.sent_tps >= CLIENT_SHORTFALL * clients.target_tps:
        return None
    return (
        f"the clients also fell short: they sent {clients.sent_tps:,.0f} tx/s of the "
        f"{clients.target_tps:,.0f} tx/s asked ({clients.missed_bursts} late bursts), but the "
        "system did not keep up even with that."
    )


def _falls_behind(stages: Sequence[StageRow]) -> Bottleneck | None:
    """Rule 4 of `find_bottleneck`: the first stage that processes less than its input."""
    for upstream, row in pairwise(stages):
        if upstream.throughput is None or row.throughput is None or upstream.throughput <= 0:
            continue
        if row.throughput < FALLS_BEHIND * upstream.throughput and (row.queue_mean or 0.0) >= 1.0:
            busy_note = (
                "" if row.busy_share is None else f"; it was busy {row.busy_share:.0%} of the time"
            )
            evidence = {
                f"{upstream.name}_tps": upstream.throughput,
                f"{row.name}_tps": row.throughput,
                f"{row.name}_queue_mean": row.queue_mean or 0.0,
            }
            if row.busy_share is not None:
                evidence[f"{row.name}_busy_share"] = row.busy_share
            return Bottleneck(
                stage=row.name,
                rule="falls behind",
                explanation=(
                    f"{row.name} processed {row.throughput:,.0f} tx/s of the "
                    f"{upstream.throughput:,.0f} tx/s {upstream.name} gave it, and its input queue "
                    f"held {row.queue_mean:.1f} batches on average{busy_note}."
                ),
                evidence=evidence,
            )
    return None
