"""What a transaction costs on rented machines: one instance per node at a price per hour."""

from __future__ import annotations

from dataclasses import dataclass

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Cost:
    usd_per_hour: float
    instances: int
    usd_per_million_tx: float | None
    tx_per_usd: float | None


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
