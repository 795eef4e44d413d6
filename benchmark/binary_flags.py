"""Which flags of `node run` and `client` a mode takes, as the binaries say (`node describe --mode
M` and `client --describe --mode M`): each flag's default, choices and bounds, whether the mode
takes it and, when not, what the mode lacks. The harness keeps no list of modes per flag: it
checks a run's settings against this and passes the settings the binaries take through to them.

A setting of `BenchParameters` made with `passed(...)` is one of these flags: given a value other
than the binaries' default, it must be one a binary running the mode takes, and it then reaches
that binary's command line as `--flag value`. Adding such a setting is the flag itself in the
binary (its `///` doc is its help everywhere, `fab local --help` included), its field in
`config.py`, and `python3 -m benchmark.binary_modes` to write `descriptions/` again. A setting in
`PER_MEMBER`
(`--misbehave`) holds one entry per member that takes it: each entry is checked, and only those
members' command lines carry it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from .config import BenchParameters, ConfigError, passed_fields, run_tool
from .flags import flag_name

# Passed settings that only some members take: one comma-separated entry per member
# (`BenchParameters.misbehaving` says which).
PER_MEMBER: tuple[str, ...] = ("misbehave",)


@dataclass(frozen=True)
class Flag:
    """One flag of a binary, as a mode takes it."""

    name: str
    # The value the binary takes when the flag is not given; None: off, or decided at start.
    default: str | None
    choices: tuple[str, ...]
    switch: bool
    applies: bool
    # What the mode lacks, when it does not take the flag.
    needs: str | None
    # Another flag and the values it must have when this one is given (`fees` needs `vm adapter`).
    with_flag: tuple[str, tuple[str, ...]] | None
    minimum: float | None
    maximum: float | None

    @classmethod
    def from_json(cls, data: object, source: str) -> Flag:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: a flag's description is a JSON object")
        try:
            condition = data["with"]
            with_flag = None
            if condition is not None:
                with_flag = (str(condition["flag"]), tuple(str(v) for v in condition["values"]))
            return cls(
                name=str(data["name"]),
                default=None if data["default"] is None else str(data["default"]),
                choices=tuple(str(choice) for choice in data["choices"]),
                switch=bool(data["switch"]),
                applies=bool(data["applies"]),
                needs=None if data["needs"] is None else str(data["needs"]),
                with_flag=with_flag,
                minimum=None if data["min"] is None else float(data["min"]),
                maximum=None if data["max"] is None else float(data["max"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"{source}: a flag's description lacks {error}") from error

    def is_default(self, value: object) -> bool:
        """Whether `value` (a setting's) is what the binary takes without the flag."""
        if value is None or value is False:
            return True
        if self.switch:
            return False
        return self.default is not None and _same(text_of(value), self.default)

    def refuse(self, value: object, setting: str, mode: str, other: object) -> str | None:
        """Why `value` cannot be given in `mode` (`other`: the value of the flag it goes with);
        None when it can."""
        flag = flag_name(setting)
        if not self.applies:
            return f"{flag} needs {self.needs}: mode {mode} has none"
        text = text_of(value)
        if self.choices and not self.switch and text not in self.choices:
            return f"unknown {flag} {text!r}; expected one of {', '.join(self.choices)}"
        if self.with_flag is not None:
            other_flag, values = self.with_flag
            if text_of(other) not in values:
                return f"{flag} is for --{other_flag} {'|'.join(values)}, not {text_of(other)}"
        number = _number(text)
        if number is not None:
            if self.minimum is not None and number < self.minimum:
                return f"{flag} must be at least {self.minimum:g}, got {text}"
            if self.maximum is not None and number > self.maximum:
                return f"{flag} must be at most {self.maximum:g}, got {text}"
        return None


@dataclass(frozen=True)
class ModeFlags:
    """The flags of the binaries that run `mode`: `node` for a committee's nodes (empty when
    the mode runs none), `client` for its clients or its one standalone process."""

    mode: str
    node: Mapping[str, Flag]
    client: Mapping[str, Flag]

    def check(self, bench: BenchParameters) -> None:
        """Refuse a passed setting given a value no binary of the mode takes."""
        defaults = {f.name: f.default for f in fields(BenchParameters)}
        for setting, flag in passed_fields().items():
            # A per-member setting: each member's entry (the conducts of `--misbehave`).
            per_member = (bench.conducts() or [None]) if setting in PER_MEMBER else None
            for value in per_member or [getattr(bench, setting)]:
                self._check_one(bench, setting, flag, value, defaults[setting])

    def _check_one(
        self, bench: BenchParameters, setting: str, flag: str, value: object, default: object
    ) -> None:
        # The harness's defaults are the binaries' (a test holds them together).
        if value == default:
            return
        described = [table[flag] for table in (self.node, self.client) if flag in table]
        if not described:
            raise ConfigError(
                f"{flag_name(setting)}: no binary that mode {bench.mode} runs takes --{flag}"
            )
        if all(known.is_default(value) for known in described):
            return
        reasons = [
            known.refuse(value, setting, bench.mode, _other(bench, known)) for known in described
        ]
        if all(reasons):
            # The reason of a binary that takes the flag in this mode comes first.
            taking = [r for r, known in zip(reasons, described, strict=True) if known.applies]
            raise ConfigError(str((taking or reasons)[0]))

    def node_arguments(self, bench: BenchParameters, index: int | None = None) -> list[str]:
        """The passed settings `node run` takes in this mode, as node `index`'s command line's
        flags (None: a member that takes no PER_MEMBER setting)."""
        return _arguments(bench, self.node, index)

    def client_arguments(self, bench: BenchParameters) -> list[str]:
        """The passed settings the client takes in this mode."""
        return _arguments(bench, self.client)

    @classmethod
    def from_descriptions(
        cls, mode: str, node: Mapping[str, object], client: Mapping[str, object], source: str
    ) -> ModeFlags:
        """From what `node describe` and `client --describe` print for `mode`."""
        # A mode without a committee runs no node: its flags are the client's alone.
        node_flags = node.get("flags") if node.get("process") == "node" else None
        return cls(
            mode=mode, node=_table(node_flags, source), client=_table(client.get("flags"), source)
        )


def describe(node_binary: Path, mode: str) -> ModeFlags:
    """Ask `node` and `client` (beside it) which flags `mode` takes; asked once per build of
    the binaries (a run's check and its command lines read the same answer)."""
    client = node_binary.with_name("client")
    return _described(node_binary, mode, _built_at(node_binary), _built_at(client))


def _built_at(binary: Path) -> int:
    try:
        return binary.stat().st_mtime_ns
    except OSError:
        return 0  # asking it fails with the reason


@functools.lru_cache(maxsize=32)
def _described(node_binary: Path, mode: str, node_built: int, client_built: int) -> ModeFlags:
    node = _printed([str(node_binary), "describe", "--mode", mode])
    client = _printed([str(node_binary.with_name("client")), "--describe", "--mode", mode])
    return ModeFlags.from_descriptions(mode, node, client, str(node_binary))


def text_of(value: object) -> str:
    """A setting as a command line spells it: `0.5`, `200`, `adapter`."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _arguments(
    bench: BenchParameters, table: Mapping[str, Flag], index: int | None = None
) -> list[str]:
    arguments: list[str] = []
    for setting, flag in passed_fields().items():
        known = table.get(flag)
        value = getattr(bench, setting)
        if setting in PER_MEMBER:
            value = None if index is None else bench.misbehaving().get(index)
        if known is None or not known.applies or known.is_default(value):
            continue
        arguments += [f"--{flag}"] if known.switch else [f"--{flag}", text_of(value)]
    return arguments


def _other(bench: BenchParameters, flag: Flag) -> object:
    """The value of the setting `flag` goes with (None when it goes with none)."""
    if flag.with_flag is None:
        return None
    other = flag.with_flag[0]
    setting = next((s for s, f in passed_fields().items() if f == other), None)
    return None if setting is None else getattr(bench, setting)


def _same(text: str, default: str) -> bool:
    a, b = _number(text), _number(default)
    return a == b if a is not None and b is not None else text == default


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _table(flags: object, source: str) -> dict[str, Flag]:
    if flags is None:
        return {}
    if not isinstance(flags, list):
        raise ConfigError(f"{source}: `flags` is a list")
    described = (Flag.from_json(item, source) for item in flags)
    return {flag.name: flag for flag in described}


def _printed(command: list[str]) -> dict[str, object]:
    printed = run_tool(command)
    try:
        data = json.loads(printed)
    except json.JSONDecodeError as error:
        raise ConfigError(f"`{' '.join(command)}` printed no JSON: {error}") from error
    if not isinstance(data, dict):
        raise ConfigError(f"`{' '.join(command)}` printed no JSON object")
    return data
