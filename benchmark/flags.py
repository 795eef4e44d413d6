"""The flags of `fab local` / `fab remote`: what each does, and the points of a sweep they ask for.

A flag that was not given arrives as None and stays out of everything: bench settings then take
the defaults of `BenchParameters` (remote runs: `REMOTE_DEFAULTS` first), node parameters the
node's own. The task signatures therefore carry no defaults of their own to drift apart. Flags
arrive as text (invoke hands a flag whose default is None over as a string) and are converted
here to the type of the field they set.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from invoke import Context

from . import binary_modes
from .config import BenchParameters, ConfigError, passed_fields
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
    if value is None:
        # What a binary does without the flag is its help's to say.
        return (
            f"default: the {binary_modes.binary_of(passed_fields().get(field, field)) or 'node'}'s"
        )
    return f"default {value}"


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
    if not binary_modes.runs_committee(base.mode) and len(nodes) * len(rates) > 1:
        raise ConfigError(
            f"{base.mode} has no input rate to sweep: its generator runs flat out"
            " (and no committee)"
        )
    return [replace(base, nodes=count, rate=rate) for count in nodes for rate in rates]


# What each of the harness's own bench flags does (`bench_help` appends its default, read from
# where it is defined). A flag the binaries take (`config.passed`) is not here: its help is the
# binaries' (`binary_modes.flag_help`), written once beside its clap argument.
HARNESS_FLAGS = {
    "mode": " | ".join(binary_modes.names()),
    "nodes": "committee size; a comma-separated list sweeps them",
    "rate": "total input rate over all clients (tx/s); a comma-separated list sweeps them",
    "faults": "nodes left unbooted (with their clients), at most (n-1)/3",
    "duration": "seconds the clients send",
    "batch_size": "mempool batch size (bytes)",
    "batch_delay": "max batch delay (ms)",
    "leader": "round-robin | reputation: who leads a round (reputation skips members that stopped"
    " taking part)",
    "channel_capacity": "capacity of every channel between actors and stages",
    "max_uncommitted_bytes": "back-pressure bound: a node's own sealed, uncommitted bytes past"
    " which its mempool stops reading client transactions",
    "gc_retention_ms": "ms committed blocks and batches are kept for peers that fell behind (with"
    " gc_depth rounds); past both, such a peer adopts a checkpoint",
    "accounts": "genesis accounts (movevm: accounts of the run)",
    "runs": "how many times to repeat each configuration",
    "store": "every node keeps blocks, batches and its safety state on disk (node run --store)",
    "delay": "one-way latency (ms) the nodes add to every committee link (WAN emulation)",
    "delay_matrix": "CSV file, N rows of N one-way latencies (ms): row i to column j",
    "node_cpus": "fab local: every node in a cgroup with a CPU quota of X cores (a fraction"
    " too), the clients in another without one; nodes x X must fit in the machine's cores",
    "vcpus": "fab local: every node a machine of V virtual CPUs (each thread at most one), a"
    " cgroup quota of V/K cores (root); nodes x V + --client-vcpus must fit K x the cores",
    "client_vcpus": "fab local, with --vcpus: the clients' virtual CPUs together",
    "bandwidth": "rate (Mbit/s) of every committee link, each direction, emulated by the sending"
    " node as a token bucket (unlimited unless given)",
}


def _passed_help() -> dict[str, str]:
    """The flags the binaries take, with their `--help` text."""
    described = {}
    for setting, flag in passed_fields().items():
        binary = "client" if binary_modes.binary_of(flag) == "client" else "node run"
        text = binary_modes.flag_help(flag) or f"see `{binary} --help`: --{flag}"
        described[setting] = text.rstrip(".")
    return described


# Every bench flag of `fab local` and `fab remote`, with what it does.
BENCH_FLAGS = {**HARNESS_FLAGS, **_passed_help()}

# The bench flags that are switches (`--store`): False unless given, and then no value.
BENCH_SWITCHES = tuple(name for name, kind in _field_types().items() if kind is bool)

# The fault schedule (benchmark/faults/schedule.py); not bench parameters: no sweep, no default.
FAULT_FLAGS = {
    "crash": "NODE@T or NODE@T:RESTART_T: SIGKILL node NODE T s after the clients start"
    " (and run it again at RESTART_T); repeatable",
    "kill_leader_every": (
        "every S s kill the leader of the current round, restart it S/2 later (no kill in the"
        " run's last S s)"
    ),
    "partition": "NODES@T1-T2 (e.g. 3@5-25 or 1,2@5-25): cut NODES off from the others from T1 to"
    " T2 s after the clients start; repeatable",
}


# Flags of `fab local` and `fab remote` that change how a run is analysed, not what it runs.
ANALYSIS_FLAGS = {
    "profile": "profile every node (flame graph and folded stacks in the logs; top functions)",
    "project_cores": "cores of the node the capacity projection is for (default 4)",
    "instance_price": "USD per hour of one instance (remote: settings' prices_usd_per_hour)",
}


def bench_help(defaults: Mapping[str, Any] | None = None) -> dict[str, str]:
    return {flag: f"{text}; {default_text(flag, defaults)}" for flag, text in BENCH_FLAGS.items()}


def with_bench_flags(body: Callable[..., None]) -> Callable[..., None]:
    """`body(c, bench, ...)` as a task that takes every flag of BENCH_FLAGS beside its own: invoke
    reads a task's flags from its signature, so `local` and `remote` get theirs built here from
    the one list instead of each spelling them out. `bench` receives them by name, as
    `flags.sweep_from_flags` takes them: None where not given, a switch True or None."""
    context, _bench, *own = inspect.signature(body).parameters.values()
    flags = [
        inspect.Parameter(
            name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=False if name in BENCH_SWITCHES else None,
            annotation=bool if name in BENCH_SWITCHES else str | None,
        )
        for name in BENCH_FLAGS
    ]

    @functools.wraps(body)
    def task_body(c: Context, **given: Any) -> None:  # noqa: ANN401 - the flags' values
        bench = {name: given.pop(name, None) or None for name in BENCH_SWITCHES}
        bench.update({name: given.pop(name, None) for name in BENCH_FLAGS if name not in bench})
        body(c, bench, **given)

    task_body.__signature__ = inspect.Signature([context, *flags, *own])  # type: ignore[attr-defined]
    return task_body
