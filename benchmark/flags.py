"""From the flags of `fab local` / `fab remote` to the points of a sweep.

A flag that was not given arrives as None and stays out of everything: bench settings then take
the defaults of `BenchParameters` (remote runs: `REMOTE_DEFAULTS` first), node parameters the
node's own. The task signatures therefore carry no defaults of their own to drift apart. Flags
arrive as text (invoke hands a flag whose default is None over as a string) and are converted
here to the type of the field they set.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .config import NODE_MODES, BenchParameters, ConfigError
from .errors import HarnessError
from .parameters import NodeParameters

# Flags named differently from the field they set.
FIELD_OF_FLAG: Mapping[str, str] = {
    "batch_delay": "max_batch_delay",
    "delay": "delay_ms",
    "bandwidth": "bandwidth_mbit",
}
# Bench fields whose None means "off" rather than "the node's default".
OFF_UNLESS_GIVEN = ("delay_ms", "delay_matrix", "node_cpus", "vcpus", "bandwidth_mbit")
# Bench fields whose None means a default that depends on another setting.
NONE_MEANS: Mapping[str, str] = {
    "workload_arg": "the workload's (cpuheavy 128, kvstore 4)",
    "exec_threads": "one per core",
}
# The flags that take a comma-separated list: together they span the sweep.
SWEPT = ("nodes", "rate")


class FlagError(HarnessError):
    """A flag's value cannot be read."""


def flag_name(name: str) -> str:
    """`tx_size` -> `--tx-size`, as the user typed it."""
    return "--" + name.replace("_", "-")


def default_text(flag: str, defaults: Mapping[str, Any] | None = None) -> str:
    """The default of a flag for its help line, read from where it is defined."""
    field = FIELD_OF_FLAG.get(flag, flag)
    if field in NodeParameters.names():
        return "default: the node's"
    value = (defaults or {}).get(field, getattr(BenchParameters(), field))
    if value is None and field in OFF_UNLESS_GIVEN:
        return "default: none"
    if value is None and field in NONE_MEANS:
        return f"default: {NONE_MEANS[field]}"
    return "default: the node's" if value is None else f"default {value}"


def int_list(text: object, flag: str) -> list[int]:
    """`"16000,20000"` -> [16000, 20000]; `flag` names the flag in the error."""
    try:
        values = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError as error:
        raise FlagError(
            f"{flag_name(flag)} must be comma-separated integers, got {text!r}"
        ) from error
    if not values:
        raise FlagError(f"{flag_name(flag)} is empty")
    return values


def optional_int(value: object, flag: str) -> int | None:
    """An integer flag that is off unless given (`--prometheus-port`)."""
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError as error:
        raise FlagError(f"{flag_name(flag)} must be an integer, got {value!r}") from error


def positive_int(value: object, flag: str) -> int:
    """An integer flag that must be above zero (`--base-port`, `fab create --nodes`)."""
    number = optional_int(value, flag)
    if number is None or number <= 0:
        raise FlagError(f"{flag_name(flag)} must be a positive integer, got {value!r}")
    return number


def positive_ints(text: object, flag: str) -> list[int]:
    """`int_list` whose values must all be above zero (`--max-latency`)."""
    values = int_list(text, flag)
    for value in values:
        if value <= 0:
            raise FlagError(f"{flag_name(flag)} must be positive, got {value}")
    return values


def optional_float(value: object, flag: str) -> float | None:
    """A number flag that is off unless given (`--instance-price`)."""
    if value is None:
        return None
    try:
        return float(str(value))
    except ValueError as error:
        raise FlagError(f"{flag_name(flag)} must be a number, got {value!r}") from error


def either(value: object, alias: object, name: str, alias_name: str) -> object:
    """The value of a flag that has an alias; giving both is a mistake worth naming."""
    if value is not None and alias is not None:
        raise FlagError(
            f"{flag_name(name)} and {flag_name(alias_name)} are the same flag; give one"
        )
    return alias if value is None else value


def _field_types() -> dict[str, type]:
    """Field name -> the type a flag's text converts to (`int | None` -> int)."""
    hints = {
        **typing.get_type_hints(BenchParameters),
        **typing.get_type_hints(NodeParameters),
    }
    converted = {}
    for name, hint in hints.items():
        kind = hint
        if isinstance(hint, types.UnionType):
            kind = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        if kind in (int, float, str, bool):
            converted[name] = kind
    return converted


def _convert(flag: str, value: object, kind: type) -> Any:  # noqa: ANN401 - int, float or str
    if kind is str or not isinstance(value, str):
        return value
    if kind is bool:
        if value.lower() in ("true", "yes", "on", "1"):
            return True
        if value.lower() in ("false", "no", "off", "0"):
            return False
        raise FlagError(f"{flag_name(flag)} must be true or false, got {value!r}")
    try:
        return kind(value)
    except ValueError as error:
        raise FlagError(f"{flag_name(flag)} must be {kind.__name__}, got {value!r}") from error


def bench_from_flags(
    flags: Mapping[str, object | None], defaults: Mapping[str, Any] | None = None
) -> BenchParameters:
    """One BenchParameters from single-valued flags (keyed by flag name); None: not given."""
    kinds = _field_types()
    given: dict[str, Any] = {}
    for flag, value in flags.items():
        if value is None:
            continue
        field = FIELD_OF_FLAG.get(flag, flag)
        if field not in kinds:
            raise FlagError(f"{flag_name(flag)} sets nothing the harness knows")
        given[field] = _convert(flag, value, kinds[field])
    return BenchParameters.from_dict({**(defaults or {}), **given})


def sweep_from_flags(
    flags: Mapping[str, object | None], defaults: Mapping[str, Any] | None = None
) -> list[BenchParameters]:
    """Every point of the sweep the flags ask for: `--nodes` and `--rate` may be lists."""
    single = {name: value for name, value in flags.items() if name not in SWEPT}
    if flags.get("nodes") is not None:
        # The base is validated too: with the largest committee, so that `--nodes=7 --faults=2`
        # is not checked against the default 4 nodes (each point is checked on its own below).
        single["nodes"] = str(max(int_list(flags["nodes"], "nodes")))
    base = bench_from_flags(single, defaults)
    nodes = int_list(flags["nodes"], "nodes") if flags.get("nodes") is not None else [base.nodes]
    rates = int_list(flags["rate"], "rate") if flags.get("rate") is not None else [base.rate]
    return sweep_points(base, nodes, rates)


def sweep_points(
    base: BenchParameters, nodes: Sequence[int], rates: Sequence[int]
) -> list[BenchParameters]:
    """Every committee size with every rate, in that order; each is validated on creation."""
    if base.mode not in NODE_MODES and len(nodes) * len(rates) > 1:
        raise ConfigError(
            f"{base.mode} has no input rate to sweep: its generator runs flat out"
            " (and no committee)"
        )
    return [replace(base, nodes=count, rate=rate) for count in nodes for rate in rates]
