"""The figures of the report this testbed reproduces, in one place, with what each one measured.

They are the only figures a results page holds that its runs did not make; a page prints them
beside its own with the ratio. The report gives capacities in thousands of transactions per
second, some as a range; its ratios between modes follow from them (`report_ratio`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportFigure:
    """A figure of the report: `low` to `high` (equal when it gives one number)."""

    low: float
    high: float
    meaning: str

    def text(self, digits: int = 0) -> str:
        if self.low == self.high:
            return f"{self.low:,.{digits}f}"
        return f"{self.low:,.{digits}f}-{self.high:,.{digits}f}"

    def against(self, ours: float | None) -> str:
        """Ours over the report's: a range of ratios where the report gives a range."""
        if ours is None or self.low <= 0:
            return "-"
        if self.low == self.high:
            return f"{ours / self.low:.2f}"
        return f"{ours / self.high:.2f}-{ours / self.low:.2f}"


# Capacity (tx/s) of each configuration of the report's table, keyed by the row the `modes`
# experiment runs for it. Its instances had 4 vCPUs, one node each.
CAPACITY: dict[str, ReportFigure] = {
    "hotstuff": ReportFigure(
        200_000, 200_000, "HotStuff alone: consensus on opaque transactions, no signature checked"
    ),
    "hotcrypto": ReportFigure(
        50_000, 50_000, "HotStuff with every transaction's ed25519 signature checked"
    ),
    "hotmove": ReportFigure(
        30_000, 35_000, "HotStuff, signatures and the Move VM executing every transaction"
    ),
    "movevm": ReportFigure(
        80_000, 80_000, "the Move VM alone: no consensus, no signatures, one process"
    ),
    "movevm --vm=adapter": ReportFigure(
        10_000,
        10_000,
        'the report\'s DiemVM row: "the same setup as for the MoveVM" (its section 3.3), a'
        " generator thread feeding the VM behind Diem's adapter, signatures off, one transaction"
        " at a time",
    ),
}

# Diem the chain, which the report measured as a whole system: not a configuration of this
# testbed, so no run here reproduces it.
DIEM_TESTNET = ReportFigure(
    1_000,
    1_000,
    'Diem\'s own testnet at 6 and 48 nodes, about 1,000 tx/s, "an order of magnitude" below'
    " HotMove: Diem's whole node (its storage, mempool, consensus and the framework's"
    " prologue and epilogue), which this testbed does not run; the rows above rebuild its parts,"
    " not that system",
)


@dataclass(frozen=True)
class ReportRatio:
    label: str
    numerator: str
    denominator: str

    def figure(self) -> ReportFigure:
        top, bottom = CAPACITY[self.numerator], CAPACITY[self.denominator]
        return ReportFigure(
            top.low / bottom.high,
            top.high / bottom.low,
            f"{self.numerator} over {self.denominator} in the report",
        )


# The ratios between modes the report's table implies.
HOTMOVE_OVER_HOTCRYPTO = ReportRatio("hotmove / hotcrypto", "hotmove", "hotcrypto")
ADAPTER_OVER_BARE = ReportRatio("adapter / bare (DiemVM / MoveVM)", "movevm --vm=adapter", "movevm")
HOTCRYPTO_OVER_HOTSTUFF = ReportRatio("hotcrypto / hotstuff", "hotcrypto", "hotstuff")


@dataclass(frozen=True)
class ReportCurve:
    """A curve of the report given by its two ends: `at_smallest` tx/s at `smallest` (nodes or
    vCPUs) to `at_largest` at `largest`."""

    smallest: int
    largest: int
    at_smallest: float
    at_largest: float
    meaning: str

    @property
    def factor(self) -> float:
        """How throughput changed from the smallest to the largest."""
        return self.at_largest / self.at_smallest


# Fig 1.2: hotcrypto against committee size, nodes of 4 vCPUs.
COMMITTEE_HOTCRYPTO = ReportCurve(
    6, 48, 50_000, 20_000, "hotcrypto against committee size, nodes of 4 vCPUs"
)
# Fig 1.5: hotcrypto against vCPUs per node (4 vCPUs gave 40,000-50,000 tx/s: the middle).
CORES_HOTCRYPTO = ReportCurve(4, 36, 45_000, 90_000, "hotcrypto against vCPUs per node")

# Fig 1.5 point by point: hotcrypto's capacity at each vCPU count per node.
CORES_HOTCRYPTO_POINTS: dict[int, ReportFigure] = {
    4: ReportFigure(40_000, 50_000, "hotcrypto, nodes of 4 vCPUs"),
    8: ReportFigure(70_000, 70_000, "hotcrypto, nodes of 8 vCPUs (about)"),
    16: ReportFigure(80_000, 80_000, "hotcrypto, nodes of 16 vCPUs"),
    36: ReportFigure(90_000, 90_000, "hotcrypto, nodes of 36 vCPUs (about)"),
}
