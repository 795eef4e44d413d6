"""How a run is analysed, as opposed to what it runs: the core count of the capacity projection
and the price of an instance. They change no process, so they are not bench parameters (and not
part of a result's key); they are saved in its configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import HarnessError
from .stages.projection import DEFAULT_PROJECT_CORES


class AnalysisOptionsError(HarnessError):
    """An analysis option is out of range."""


@dataclass(frozen=True)
class AnalysisOptions:
    project_cores: int = DEFAULT_PROJECT_CORES
    # USD per hour of one instance (one node per instance); None: no cost is computed.
    instance_price: float | None = None

    def __post_init__(self) -> None:
        if self.project_cores < 1:
            raise AnalysisOptionsError(
                f"--project-cores must be at least 1, got {self.project_cores}"
            )
        if self.instance_price is not None and self.instance_price <= 0:
            raise AnalysisOptionsError(
                f"--instance-price must be positive (USD per hour), got {self.instance_price}"
            )

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"project_cores": self.project_cores}
        if self.instance_price is not None:
            config["instance_price"] = self.instance_price
        return config
