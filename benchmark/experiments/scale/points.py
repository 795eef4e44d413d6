"""The points of `scale`: what each configuration is (an axis, a family, n nodes of V virtual
CPUs, where they run, the factor that fits them on this machine), and what a point measured."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from ...analysis.run_summary import Summary
from ...analysis.stages.model import Point
from ...faults.net_emulation import read_delay_matrix
from ..dilation import LINK_DELAY_MS, dilation_for
from ..experiment import Configuration, Outcome
from ..measures import (
    KEEPS_UP,
    by_rate,
    delivered,
    median_of,
    rounds_per_second,
    stage_us_per_tx,
)
from ..probe import Probe

COMMITTEE, CORES, REGIONS = "committee", "cores", "regions"
FAMILIES = ("hotstuff", "hotcrypto", "hotmove", "hotmove --exec=blockstm")
# The committee axis's nodes: one virtual CPU each (48 nodes of 1 and the clients' 1 need
# K = 28; nodes of the report's 4 would need K = 108, 27 minutes a run of 6 s).
COMMITTEE_VCPUS = 1.0
COMMITTEE_NODES = {"hotstuff": (4, 8, 16, 32, 40), "hotcrypto": (4, 8, 16, 32, 48)}
QUICK_COMMITTEE = (4, 7)
# The cores axis: 4 nodes of the report's vCPU counts (Fig 1.5). Nodes of 36 run at K = 81,
# 24 minutes a point: they have a page of their own, which reads the others from this one's.
CORES_VCPUS = (4.0, 8.0, 16.0)
CORES_LARGE_VCPUS = (36.0,)
CORES_FAMILIES = FAMILIES[1:]
# Whom the cores axis's Move transfers pay. The default, `ring`, makes every batch one chain of
# conflicts (each node seals one client's transactions, each paying the next account), which a
# parallel executor leaves to sequential execution: the axis asks whether a parallel VM helps
# where CPUs are to spare, so its sequential and Block-STM points pay any genesis account.
CORES_MOVE_DEST = "uniform"
# The regions: the report's three (Fig 1.8, 1.9), against one, at these committee sizes.
REGIONS_NODES = (4, 16)
THREE_REGIONS = "benchmark/experiments/three-regions.csv"
# The clients' virtual CPUs together: enough to send what the largest point orders.
CLIENT_VCPUS = 1.0
REPEATS = 3
DURATION = 6


@dataclass(frozen=True)
class Spec:
    """One point: a family (mode, and how it executes), n nodes of `vcpus` each, in one region
    or across `matrix`'s, asked `rate` tx/s."""

    axis: str
    family: str
    nodes: int
    vcpus: float
    rate: int
    matrix: str | None = None

    @property
    def dilation(self) -> int:
        return dilation_for(self.nodes, self.vcpus, CLIENT_VCPUS)

    @property
    def placement(self) -> str:
        return "three regions" if self.matrix else "one region"

    @property
    def label(self) -> str:
        where = f", {self.placement}" if self.axis == REGIONS else ""
        return f"{self.axis}: {self.family}, {self.nodes} x {self.vcpus:g} vCPUs{where}"

    def configuration(self, runs: int, duration: int) -> Configuration:
        mode, _, exec_flag = self.family.partition(" --exec=")
        flags: dict[str, str | bool] = {"mode": mode}
        if exec_flag:
            flags["exec"] = exec_flag
        flags |= {
            "nodes": str(self.nodes),
            "vcpus": f"{self.vcpus:g}",
            "client_vcpus": f"{CLIENT_VCPUS:g}",
            "dilation": str(self.dilation),
            "rate": str(self.rate),
            "runs": str(runs),
            "duration": str(duration),
        }
        if mode == "hotstuff":
            flags["max_retained_bytes"] = str(HOTSTUFF_RETAINED_BYTES)
        if mode == "hotmove" and self.axis == CORES:
            flags["dest"] = CORES_MOVE_DEST
        if self.matrix:
            flags["delay_matrix"] = self.matrix
        else:
            # One region's links, as the gate judged dilation with (`dilation.LINK_DELAY_MS`):
            # over loopback without them, latency is the kernel's undilated microseconds.
            flags["delay"] = LINK_DELAY_MS
        return Configuration(self.label, flags)

    def one_way_ms(self, repo_root: Path) -> float:
        """The mean one-way latency between two members (one region's links in one region)."""
        if self.matrix is None:
            return float(LINK_DELAY_MS)
        matrix = read_delay_matrix(repo_root / self.matrix, self.nodes)
        pairs = [matrix[i][j] for i in range(self.nodes) for j in range(self.nodes) if i != j]
        return sum(pairs) / len(pairs)


# Memory, which this machine cannot give a large saturated hotstuff committee: every node holds
# every member's uncommitted batches, up to the bound (8 MiB) each, so n nodes hold n² · 8 MiB
# between them (18 GiB at 48, with nothing else), and each also keeps up to
# `max_retained_bytes` (256 MiB by default) of committed batches for peers that fall behind. So
# hotstuff's committee stops at 40 nodes, and its nodes retain 32 MiB: no member falls behind
# in these runs, so nothing asks for more (4 nodes held 390 MiB each at the default, 32 nodes
# 580, and the kernel killed one of 48).
HOTSTUFF_RETAINED_BYTES = 32 * 1024 * 1024

# What each family orders at most, per node's virtual CPU, about: the rate asked is above it.
# (4 nodes of one vCPU over 1 ms links kept up with 2,000,000 tx/s of hotstuff at 38 % of their
# CPUs: its consensus thread alone takes about 0.2 µs a transaction.)
PER_VCPU = {"hotstuff": 6_000_000, "hotcrypto": 90_000}


def _rate(family: str, nodes: int, vcpus: float) -> int:
    """A rate above what `nodes` of `vcpus` order, so each point is saturated and delivers its
    capacity. A `hotstuff` node takes every member's batches, so a larger committee orders less
    per CPU; a node with signatures checks each transaction once whatever the committee (its
    own clients' at ingress, the others' batches once committed), so its rate does not shrink,
    and from 8 nodes up it is a third more than at 4 (asked less, 8 to 32 nodes of one vCPU
    kept up with all of it)."""
    mode = family.split(maxsplit=1)[0]
    factor = 8 / (7 + nodes // 4) if mode == "hotstuff" else 1.0 if nodes <= 4 else 4 / 3
    return int(PER_VCPU[mode] * vcpus * factor)


def _committee(quick: bool) -> list[Spec]:
    if quick:
        return [Spec(COMMITTEE, "hotstuff", n, 0.4, 20_000) for n in QUICK_COMMITTEE]
    return [
        Spec(COMMITTEE, family, n, COMMITTEE_VCPUS, _rate(family, n, COMMITTEE_VCPUS))
        for family, sizes in COMMITTEE_NODES.items()
        for n in sizes
    ]


def _regions(quick: bool) -> list[Spec]:
    if quick:
        return [Spec(REGIONS, "hotstuff", 4, 0.4, 20_000, THREE_REGIONS)]
    return [
        Spec(
            REGIONS,
            "hotstuff",
            n,
            COMMITTEE_VCPUS,
            _rate("hotstuff", n, COMMITTEE_VCPUS),
            THREE_REGIONS,
        )
        for n in REGIONS_NODES
    ]


# What 4 nodes of 4 vCPUs deliver, about, on the cores axis (its page, `--dest=uniform` for
# Move), and how that grows with the vCPUs: as V to the 0.55 (hotcrypto delivered 2.14x for 4x
# the vCPUs, its verifier paying more per transaction with more threads; Block-STM 2.1x its
# sequential executor's at 16). The sequential executor is one thread whatever V, but is asked
# Block-STM's rate so that the pair stays alike. A point is asked half as much again, so it
# saturates without signing transactions it will never send: the clients sign every one before
# the run, with real CPU, about a minute a run at a million a second.
CORES_AT_4 = {"hotcrypto": 240_000, "hotmove": 150_000}
CORES_GROWTH = 0.55
CORES_HEADROOM = 1.5


def _cores_rate(family: str, vcpus: float) -> int:
    mode = family.split(maxsplit=1)[0]
    return int(CORES_HEADROOM * CORES_AT_4[mode] * (vcpus / 4) ** CORES_GROWTH) // 1000 * 1000


def _cores(sizes: Sequence[float]) -> list[Spec]:
    return [
        Spec(CORES, family, 4, vcpus, _cores_rate(family, vcpus))
        for family in CORES_FAMILIES
        for vcpus in sizes
    ]


def _cores_small(quick: bool) -> list[Spec]:
    return [Spec(CORES, "hotcrypto", 4, 0.4, 2_000)] if quick else _cores(CORES_VCPUS)


def _cores_large(quick: bool) -> list[Spec]:
    return [Spec(CORES, "hotcrypto", 4, 0.8, 4_000)] if quick else _cores(CORES_LARGE_VCPUS)


# The pages of `scale`, each a list of points full or `--quick`; each runs within 90 minutes.
SCALE_PAGES: dict[str, Callable[[bool], list[Spec]]] = {
    "scale": lambda quick: [*_committee(quick), *_regions(quick)],
    "scale-cores": _cores_small,
    "scale-cores-36": _cores_large,
}


def specs(quick: bool) -> list[Spec]:
    """Every point of every page, in the order they run."""
    return [spec for page in SCALE_PAGES.values() for spec in page(quick)]


def configurations_of(page: str) -> Callable[[bool], Sequence[Configuration]]:
    """The configurations of `page`'s points, full or `--quick`."""

    def configurations(quick: bool) -> Sequence[Configuration]:
        runs, duration = (1, 3) if quick else (REPEATS, DURATION)
        return [spec.configuration(runs, duration) for spec in SCALE_PAGES[page](quick)]

    return configurations


def spec_of(configuration: Configuration) -> Spec:
    flags = configuration.flags
    family = str(flags["mode"]) + (f" --exec={flags['exec']}" if "exec" in flags else "")
    matrix = flags.get("delay_matrix")
    return Spec(
        configuration.label.split(":", 1)[0],
        family,
        int(str(flags["nodes"])),
        float(str(flags["vcpus"])),
        int(str(flags["rate"]).split(",")[-1]),
        str(matrix) if matrix else None,
    )


# -- what a point measured ------------------------------------------------------------------------


def speed_of(probe: Probe | None) -> float | None:
    """One index of the machine's speed from a probe: the geometric mean of its hashing and
    signing rates (CPU costs scale with its inverse)."""
    if probe is None or probe.sha256_mb_per_s <= 0 or probe.signatures_per_s <= 0:
        return None
    return (probe.sha256_mb_per_s * probe.signatures_per_s) ** 0.5


@dataclass(frozen=True)
class Measured:
    spec: Spec
    runs: tuple[Summary, ...]
    # The dilation its runs ran at (as they recorded it), and the speed probe beside them.
    dilation: int
    speed: float | None
    one_way_ms: float

    @property
    def capacity(self) -> float:
        return median(delivered(s) for s in self.runs)

    @property
    def asked(self) -> int:
        return int(self.runs[0].config.get("rate") or self.spec.rate)

    @property
    def saturated(self) -> bool:
        """Delivered less than asked: a capacity, not a lower bound of one."""
        return self.capacity < KEEPS_UP * self.asked

    def median(self, measure: object) -> float | None:
        return median_of([measure(s) for s in self.runs])  # type: ignore[operator]

    @property
    def median_rounds(self) -> float | None:
        return self.median(rounds_per_second)

    @property
    def budget_used(self) -> float | None:
        used = self.median(node_cores)
        return None if used is None else used / self.spec.vcpus

    @property
    def limited_by(self) -> str:
        """The limiting stage most of the runs named."""
        named = [s.bottleneck.stage for s in self.runs]
        return max(set(named), key=named.count) if named else "-"

    def point(self) -> Point:
        stages = {
            row.name: c
            for row in self.runs[0].stages
            if (c := self.median(stage_us_per_tx(row.name))) is not None
        }
        used = self.median(node_cores)
        exec_threads = int(self.spec.vcpus + 0.999) if "--exec=" in self.spec.family else 1
        return Point(
            nodes=self.spec.nodes,
            vcpus=self.spec.vcpus,
            tps=self.capacity,
            saturated=self.saturated,
            node_cores_used=used if used is not None else self.spec.vcpus,
            rounds_per_s=self.median(rounds_per_second),
            us_per_tx=stages,
            bytes_per_tx=self.median(moved_per_tx),
            tx_bytes=self.median(tx_bytes),
            bound_bytes=self.median(bound_bytes),
            one_way_ms=self.one_way_ms,
            speed=self.speed,
            exec_threads=exec_threads,
        )


def measured(outcomes: Sequence[Outcome], repo_root: Path) -> list[Measured]:
    points = []
    for outcome in outcomes:
        if not outcome.summaries or outcome.configuration.bench is not None:
            continue
        spec = spec_of(outcome.configuration)
        runs = max(
            by_rate(outcome.summaries).values(), key=lambda r: median(delivered(s) for s in r)
        )
        factor = int(runs[0].config.get("dilation") or 1)
        speeds = [speed_of(p) for p in (outcome.probe_before, outcome.probe_after)]
        known = [s for s in speeds if s is not None]
        points.append(
            Measured(
                spec,
                tuple(runs),
                factor,
                median(known) if known else None,
                spec.one_way_ms(repo_root),
            )
        )
    return points


def node_cores(summary: Summary) -> float | None:
    """Virtual CPUs one node used over the window (all its threads: what its budget counts)."""
    return summary.resources.nodes.cpu_cores if summary.resources else None


def moved_per_tx(summary: Summary) -> float | None:
    """Bytes a node moved per transaction ordered, in its busier direction."""
    traffic, consensus = summary.traffic, summary.consensus
    if traffic is None or consensus is None or consensus.tps <= 0:
        return None
    return max(traffic.sent_bytes_per_s, traffic.received_bytes_per_s) / consensus.tps


def tx_bytes(summary: Summary) -> float | None:
    consensus = summary.consensus
    if consensus is None or not consensus.bps or consensus.tps <= 0:
        return None
    return consensus.bps / consensus.tps


# The node's default bound on its uncommitted bytes (`max_uncommitted_bytes`, docs/parameters.md).
DEFAULT_BOUND = 8 * 1024 * 1024


def bound_bytes(summary: Summary) -> float:
    bound = summary.config.get("max_uncommitted_bytes")
    return float(bound) if isinstance(bound, int | float) and bound > 0 else float(DEFAULT_BOUND)
