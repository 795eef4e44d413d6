"""`settings.json`: where and how remote runs happen (AWS key, regions, instances, ports, repo).

Example (see `benchmark/settings.example.json`):

    {
      "key": {"name": "hotmove", "path": "~/.ssh/hotmove.pem"},
      "instances": {"type": "m5d.8xlarge", "regions": ["us-east-1", "eu-west-1"],
                    "user": "ubuntu"},
      "ports": {"consensus": 8000, "mempool": 8001, "transactions": 8002},
      "repo": {"name": "hotmove", "url": "https://github.com/OWNER/hotmove.git", "branch": "main"},
      "prices_usd_per_hour": {"m5d.8xlarge": 1.808}
    }

`instances.image_name` / `instances.image_owner` select the AMI (default: Canonical's newest
Ubuntu 22.04 amd64); `instances.disk_gb` sizes the root volume. `prices_usd_per_hour` (optional)
gives the on-demand price of instance types; the one of `instances.type` prices the runs (USD per
million transactions in the summary), unless `fab remote --instance-price` overrides it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..run_files import Ports

DEFAULT_IMAGE_NAME = "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*"
CANONICAL_OWNER = "099720109477"


class SettingsError(HarnessError):
    """settings.json is missing, unreadable or lacks a field."""


@dataclass(frozen=True)
class Settings:
    key_name: str
    key_path: Path
    regions: tuple[str, ...]
    instance_type: str
    ports: Ports
    repo_name: str
    repo_url: str
    branch: str
    ssh_user: str = "ubuntu"
    image_name: str = DEFAULT_IMAGE_NAME
    image_owner: str = CANONICAL_OWNER
    disk_gb: int = 200
    # USD per hour of one instance of `instance_type`; None: not in the settings.
    instance_price: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        def need(*path: str) -> Any:  # noqa: ANN401 - JSON value, checked by the caller
            value: Any = data
            for key in path:
                if not isinstance(value, dict) or key not in value:
                    raise SettingsError(f"settings: missing '{'.'.join(path)}'")
                value = value[key]
            return value

        instances = need("instances")
        regions = need("instances", "regions")
        if (
            not isinstance(regions, list)
            or not regions
            or not all(isinstance(r, str) for r in regions)
        ):
            raise SettingsError("settings: 'instances.regions' must be a non-empty list of names")
        try:
            ports = Ports(
                int(need("ports", "consensus")),
                int(need("ports", "mempool")),
                int(need("ports", "transactions")),
            )
        except (TypeError, ValueError) as error:
            raise SettingsError(f"settings: bad port: {error}") from error
        try:
            disk_gb = int(instances.get("disk_gb", 200))
        except (TypeError, ValueError) as error:
            raise SettingsError(f"settings: 'instances.disk_gb' must be GB: {error}") from error
        return cls(
            key_name=str(need("key", "name")),
            key_path=Path(str(need("key", "path"))).expanduser(),
            regions=tuple(regions),
            instance_type=str(need("instances", "type")),
            ports=ports,
            repo_name=str(need("repo", "name")),
            repo_url=str(need("repo", "url")),
            branch=str(need("repo", "branch")),
            ssh_user=str(instances.get("user", "ubuntu")),
            image_name=str(instances.get("image_name", DEFAULT_IMAGE_NAME)),
            image_owner=str(instances.get("image_owner", CANONICAL_OWNER)),
            disk_gb=disk_gb,
            instance_price=_price(data.get("prices_usd_per_hour"), str(instances.get("type"))),
        )

    @classmethod
    def load(cls, path: Path) -> Settings:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as error:
            raise SettingsError(
                f"{path} not found: copy benchmark/settings.example.json there and edit it"
            ) from error
        except (OSError, json.JSONDecodeError) as error:
            raise SettingsError(f"cannot read {path}: {error}") from error
        if not isinstance(data, dict):
            raise SettingsError(f"{path}: expected a JSON object")
        return cls.from_dict(data)


def _price(prices: Any, instance_type: str) -> float | None:  # noqa: ANN401 - JSON value
    """The price of `instance_type` in `prices_usd_per_hour`, if the settings give one."""
    if prices is None:
        return None
    if not isinstance(prices, dict):
        raise SettingsError("settings: 'prices_usd_per_hour' must map instance types to USD")
    price = prices.get(instance_type)
    if price is None:
        return None
    if isinstance(price, bool) or not isinstance(price, int | float) or price <= 0:
        raise SettingsError(f"settings: price of {instance_type} must be a positive number")
    return float(price)
