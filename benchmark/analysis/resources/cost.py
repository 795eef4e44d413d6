"""What a transaction costs on rented machines: one instance per process that holds a node (one
for a mode that runs in one process) at a price per hour, and the price the pages assume."""

from __future__ import annotations

from dataclasses import dataclass

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Price:
    """An instance type's on-demand price, with where and when it was that."""

    instance: str
    vcpus: int
    usd_per_hour: float
    region: str
    as_of: str

    def describe(self) -> str:
        return (
            f"AWS {self.instance} ({self.vcpus} vCPUs), on demand, Linux, in {self.region}:"
            f" ${self.usd_per_hour:g} an hour, AWS's listed price {self.as_of}"
        )


# The report's instance type: its nodes ran on c5.xlarge. The one price the pages assume.
REPORT_INSTANCE = Price(
    instance="c5.xlarge",
    vcpus=4,
    usd_per_hour=0.17,
    region="US East (N. Virginia), us-east-1",
    as_of="from the type's launch in November 2017 through 2024",
)


@dataclass(frozen=True)
class Cost:
    usd_per_hour: float
    instances: int
    usd_per_million_tx: float | None
    tx_per_usd: float | None


def instances(nodes: int, consensus: bool) -> int:
    """Instances a run rents: one per node, and one for a mode that runs in one process."""
    return max(1, nodes) if consensus else 1


def cost(usd_per_hour: float, instances: int, tps: float) -> Cost:
    """USD per million transactions = instances · price / 3600 / tps · 1e6; None at 0 tx/s."""
    usd_per_second = instances * usd_per_hour / SECONDS_PER_HOUR
    if tps <= 0 or usd_per_second <= 0:
        return Cost(usd_per_hour, instances, None, None)
    return Cost(
        usd_per_hour=usd_per_hour,
        instances=instances,
        usd_per_million_tx=usd_per_second / tps * 1e6,
        tx_per_usd=tps / usd_per_second,
    )
