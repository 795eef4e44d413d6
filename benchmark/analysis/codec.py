"""Dataclasses to JSON-ready values and back, by their type hints: what a page's record keeps of
a run (its summary, what its page read from its logs) is read again as the objects it was, so
that the page is written again from them byte for byte.

Numbers, text, booleans and None go through as they are (JSON keeps an int an int and a float a
float); a tuple comes back a tuple, a dataclass the dataclass, a dict keyed by int keyed by int.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from ..errors import HarnessError

T = TypeVar("T")
# JSON data as `json.loads` gives it, and a type hint as `typing` gives it.
Json = Any
Hint = Any


class DecodeError(HarnessError):
    """A saved value does not fit the type it is read as."""


def encode(value: object) -> Json:
    """`value` as JSON-ready data: dataclasses as dicts of their fields, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def decode(cls: type[T], data: object) -> T:
    """`data` (as `encode` left it and JSON carried it) read as an instance of dataclass `cls`."""
    found = _decode(cls, data)
    if not isinstance(found, cls):
        raise DecodeError(f"expected {cls.__name__}, read {type(found).__name__}")
    return found


def _decode(hint: Hint, data: Json) -> Json:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint, data)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return _union(hint, data)
    if origin in (tuple, list, dict):
        return _container(hint, data)
    return data


def _union(hint: Hint, data: Json) -> Json:
    """The first member of the union that is not carried as it is; None as None."""
    members = [a for a in get_args(hint) if a is not type(None)]
    if data is None:
        return None
    for member in members:
        if member not in (int, float, str, bool) and member is not Any:
            return _decode(member, data)
    return data


def _container(hint: Hint, data: Json) -> Json:
    origin, args = get_origin(hint), get_args(hint)
    if origin is dict:
        if not isinstance(data, dict):
            raise DecodeError(f"expected an object for {hint}, found {type(data).__name__}")
        key, value = args or (Any, Any)
        return {(int(k) if key is int else k): _decode(value, v) for k, v in data.items()}
    if not isinstance(data, list):
        raise DecodeError(f"expected a list for {hint}, found {type(data).__name__}")
    if origin is list:
        return [_decode(args[0] if args else Any, v) for v in data]
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], v) for v in data)
    return tuple(_decode(a, v) for a, v in zip(args, data, strict=True))


def _dataclass(cls: type, data: Json) -> object:
    if not isinstance(data, dict):
        raise DecodeError(f"expected an object for {cls.__name__}, found {type(data).__name__}")
    hints = get_type_hints(cls)
    values = {
        f.name: _decode(hints[f.name], data[f.name])
        for f in dataclasses.fields(cls)
        if f.init and f.name in data
    }
    try:
        return cls(**values)
    except TypeError as error:
        raise DecodeError(f"{cls.__name__}: {error}") from error
