"""Values at a key path inside parsed JSON: METRICS records, saved results.

Summaries, progress lines and saved results all read nested JSON the same way, so the reading
lives here rather than in any one of them (which made them import each other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def lookup(data: Mapping[str, Any], path: Sequence[str]) -> Any:  # noqa: ANN401 - JSON value
    """The value at `path`, or None when a key is missing or a step is not an object."""
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def number(data: Mapping[str, Any], path: Sequence[str]) -> float | None:
    """The number at `path` as a float; None for a missing value, a boolean or a non-number."""
    value = lookup(data, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
