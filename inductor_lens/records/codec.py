"""Records, the JSON codec of lens.json: generic over the record dataclasses, driven by their type hints.

Adding a field needs no codec change. Non-finite floats become the strings "nan"/"inf"/"-inf" (JSON
has no NaN). ``from_jsonable`` checks every value against its declared type, so a document of the
wrong shape raises TypeError/ValueError rather than building records that break later.

Where the content is JSON that Inductor or Triton wrote (kernel metadata, option values), fields say
``JsonValue``: any JSON value, read as it is (lists stay lists). In a union, the option of the value's
own JSON type is tried first, so the string "1.5" or "nan" of a ``JsonValue`` stays a string (a float
field still reads "nan" back as the float it wrote).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Hashable, Mapping
from typing import Any, ForwardRef, Literal, TypeAlias

# A JSON scalar, and any JSON value. Recursive: typing.get_type_hints leaves the inner "JsonValue" a
# ForwardRef, which from_jsonable reads as any JSON value.
JsonScalar: TypeAlias = bool | int | float | str | None
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
_JSON_VALUE = (ForwardRef("JsonValue"), "JsonValue")
# The JSON type each declared type is read from, to try a union's options in a useful order.
_JSON_KIND: dict[Any, type] = {
    bool: bool, int: int, float: float, str: str, tuple: list, list: list, dict: dict, Mapping: dict,
}  # fmt: skip


def to_jsonable(value: Any) -> Any:
    names = _record_fields(value.__class__)
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def dumps(document: Any) -> str:
    """A lens.json document as compact JSON (no indentation: a large run's document is a third smaller)."""
    return json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n"


def from_jsonable(tp: Any, data: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin is Literal:
        if data not in typing.get_args(tp):
            raise ValueError(f"{data!r} is not one of {typing.get_args(tp)}")
        return data
    if tp in _JSON_VALUE:
        return _json_value(data)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        # the option of the data's own JSON type first: "1.5" stays a string where str is allowed
        for option in sorted(options, key=lambda o: _json_kind(o) is not type(data)):
            if option is type(None):
                continue
            try:
                return from_jsonable(option, data)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{data!r} matches none of {options}")
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {tp.__name__}, got {type(data).__name__}")
        kwargs = {name: from_jsonable(hint, data[name]) for name, hint in _field_types(tp) if name in data}
        return tp(**kwargs)
    if origin in (tuple, list):
        args = typing.get_args(tp)
        item_type = args[0] if args else Any
        if not isinstance(data, list):
            raise TypeError(f"expected a list, got {type(data).__name__}")
        return origin(from_jsonable(item_type, v) for v in data)
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        args = typing.get_args(tp)
        value_type = args[1] if len(args) == 2 else Any
        if not isinstance(data, dict):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        return {k: from_jsonable(value_type, v) for k, v in data.items()}
    if tp is float:
        if isinstance(data, str):
            return float(data)
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise TypeError(f"expected a number, got {data!r}")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise TypeError(f"expected an integer, got {data!r}")
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise TypeError(f"expected true/false, got {data!r}")
        return data
    if tp is str:
        if not isinstance(data, str):
            raise TypeError(f"expected a string, got {data!r}")
        return data
    return data


@functools.cache
def _record_fields(cls: Hashable) -> tuple[str, ...] | None:
    """The field names of a record class; None for anything else (cached: called for every value)."""
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    """A record class's fields with their resolved types (resolving them is most of a large document's read time)."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _json_kind(tp: Any) -> type | None:
    return _JSON_KIND.get(typing.get_origin(tp) or tp)


def _json_value(data: Any) -> Any:
    """``data`` itself, once checked to be JSON (what json.loads gives: dict, list, str, number, bool, None)."""
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                raise TypeError(f"expected a JSON object key, got {key!r}")
            _json_value(value)
    elif isinstance(data, list):
        for value in data:
            _json_value(value)
    elif data is not None and not isinstance(data, (bool, int, float, str)):
        raise TypeError(f"expected a JSON value, got {type(data).__name__}")
    return data


def int_or_none(value: Any) -> int | None:
    """``value`` where it is an int (a bool, which JSON and Python both let pass as one, is not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_json_value(value: Any) -> JsonValue:
    """``value`` as JSON, anything else named by its type: an Inductor option may hold a pass object or a
    function (``post_grad_custom_post_pass``), which a record keeps as ``"<function my_pass>"``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [as_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): as_json_value(v) for k, v in value.items()}
    name = getattr(value, "__qualname__", None)
    return f"<{type(value).__name__} {name}>" if isinstance(name, str) else f"<{type(value).__qualname__} object>"


def lens_document(text: str, key: str, newest: int) -> Any:
    """The ``key`` part of a lens.json document, after checking that this version can read it."""
    document = json.loads(text)
    if not isinstance(document, dict) or key not in document:
        other = next((k for k in ("run", "comparison") if isinstance(document, dict) and k in document), None)
        what = f"it holds a {other}" if other else f"no {key!r} key"
        raise ValueError(f"not a lens.json document of a {key} ({what})")
    version = document.get("schema_version")
    if not isinstance(version, int):
        raise ValueError("lens.json has no schema_version")
    if version > newest:
        raise ValueError(
            f"lens.json has schema version {version}, newer than this inductor-lens reads "
            f"({newest}); upgrade inductor-lens"
        )
    return document[key]
