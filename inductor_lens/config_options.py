"""What to compile and how, Inductor and Dynamo config settings: ``KEY=VALUE`` pairs (``--option``,
``--dynamo-option``) and dicts (the Python API) checked against the installed torch's own config.

Each name is checked against torch's own list (``torch._inductor.list_options()``, ``torch._dynamo.config``),
with the closest valid names offered for a typo, and each value against the type the option is declared with
in torch's config (``cpp.simdlen: int | None``), not only its default's.
"""

from __future__ import annotations

import difflib
import importlib
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import UsageError

_INT = re.compile(r"[+-]?\d+")


def parse_value(text: str) -> bool | int | float | str:
    """``true``/``false`` -> bool, ``12`` -> int, ``1e-3`` -> float, anything else -> str."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.fullmatch(stripped):
        return int(stripped)
    try:
        return float(stripped)
    except ValueError:
        return text


@dataclass(frozen=True)
class TorchConfig:
    """One of torch's config modules whose names and values ``KEY=VALUE`` pairs are checked against."""

    what: str  # as errors name a setting of it: "Inductor option"
    flag: str  # the command-line flag that gives one
    module: str  # the config module (a torch ConfigModule)
    listing: str  # where its names are listed


INDUCTOR_CONFIG = TorchConfig("Inductor option", "--option", "torch._inductor.config", "torch._inductor.list_options()")
DYNAMO_CONFIG = TorchConfig("Dynamo option", "--dynamo-option", "torch._dynamo.config",
                            "torch._dynamo.config.get_config_copy()")  # fmt: skip


def parse_option(pair: str, config: TorchConfig = INDUCTOR_CONFIG) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"{config.flag} expects KEY=VALUE, got {pair!r}")
    return key, value


def config_defaults(config: TorchConfig) -> dict[str, Any]:
    """Every name of the config with its current value, from the installed torch, the names torch keeps as aliases
    of renamed settings too (Dynamo's ``cache_size_limit``, now ``recompile_limit``)."""
    module: Any = importlib.import_module(config.module)
    names = dict(module.get_config_copy())
    for name, entry in getattr(module, "_config", {}).items():  # private: each entry's alias, "module.name"
        target = str(getattr(entry, "alias", None) or "").removeprefix(config.module + ".")
        if target in names and name not in names:
            names[name] = names[target]
    return names


def config_types(config: TorchConfig, names: Iterable[str]) -> dict[str, Any]:
    """The type each named setting is declared with in torch's config (``int | None``, ``Literal[...]``,
    ``bool``), where torch records one."""
    module: Any = importlib.import_module(config.module)
    declared: dict[str, Any] = {}
    for name in names:
        try:
            declared[name] = module.get_type(name)  # ConfigModule's
        except (AttributeError, KeyError):
            continue
    return declared


def inductor_option_defaults() -> dict[str, Any]:
    """Every Inductor config name with its current value, from the installed torch."""
    return config_defaults(INDUCTOR_CONFIG)


def inductor_option_types(names: Iterable[str]) -> dict[str, Any]:
    """The type each named Inductor option is declared with in torch's config."""
    return config_types(INDUCTOR_CONFIG, names)


def parse_inductor_options(
    pairs: Iterable[str], known: Mapping[str, Any] | None = None, declared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` pairs and check each key and value against Inductor's own config.

    ``known`` maps option names to their defaults (from ``inductor_option_defaults()`` unless given);
    ``declared`` to their declared types (torch's config, unless ``known`` is given). A value is converted
    to the declared type (the default's type where none is declared); one that cannot be is an error.
    """
    return parse_config_pairs(INDUCTOR_CONFIG, pairs, known, declared)


def parse_dynamo_options(
    pairs: Iterable[str], known: Mapping[str, Any] | None = None, declared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``--dynamo-option KEY=VALUE`` pairs, checked against ``torch._dynamo.config`` as Inductor options are
    against Inductor's (``parse_inductor_options``)."""
    return parse_config_pairs(DYNAMO_CONFIG, pairs, known, declared)


def parse_config_pairs(
    config: TorchConfig,
    pairs: Iterable[str],
    known: Mapping[str, Any] | None = None,
    declared: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    parsed = [parse_option(p, config) for p in pairs]
    if not parsed:
        return {}
    if known is None:
        known = config_defaults(config)
        if declared is None:
            declared = config_types(config, (key for key, _ in parsed if key in known))
    declared = declared or {}
    options: dict[str, Any] = {}
    for key, raw in parsed:
        _check_name(config, key, known)
        options[key] = _coerce(config, key, raw, declared.get(key, type(known[key])))
    return options


def check_inductor_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Inductor options given as a dict (the Python API): every name must be one of torch's, and every value
    of the option's declared type."""
    return check_config_values(INDUCTOR_CONFIG, options)


def check_dynamo_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Dynamo config values given as a dict (a spec, the Python API), checked as ``check_inductor_options``."""
    return check_config_values(DYNAMO_CONFIG, options)


def check_config_values(config: TorchConfig, options: Mapping[str, Any]) -> dict[str, Any]:
    known = config_defaults(config) if options else {}
    for key in options:
        _check_name(config, key, known)
    declared = config_types(config, options) if options else {}
    for key, value in options.items():
        accepted = _accepted(declared.get(key, type(known[key])))
        if accepted is not None and not _fits(value, *accepted):
            raise UsageError(f"{config.what} {key!r} takes {_describe(*accepted)}, got {value!r}")
    return dict(options)


def _check_name(config: TorchConfig, key: str, known: Mapping[str, Any]) -> None:
    if key not in known:
        close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
        hint = f"closest: {', '.join(close)}" if close else f"see {config.listing}"
        raise UsageError(f"unknown {config.what} {key!r}", hint=hint)


_SIMPLE = (bool, int, float, str)
_NOT = object()


def _accepted(declared: Any) -> tuple[list[Any], bool] | None:
    """What a declared type allows: its simple types and Literal value tuples, and whether None is one of
    them; None where a value given as text cannot be checked (no declared type, a callable, a list, a class)."""
    if declared is type(None) or not declared or isinstance(declared, str):
        return None
    union = typing.get_origin(declared) in (typing.Union, types.UnionType)
    allowed: list[Any] = []
    optional = False
    for member in typing.get_args(declared) if union else (declared,):
        if member is type(None):
            optional = True
        elif member in _SIMPLE:
            allowed.append(member)
        elif typing.get_origin(member) is typing.Literal:
            allowed.append(typing.get_args(member))
        else:
            return None
    return (allowed, optional) if allowed else None


def _describe(allowed: list[Any], optional: bool) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    words = [names.get(kind) or "one of " + ", ".join(repr(v) for v in kind) for kind in allowed]
    return " or ".join(words + (["none"] if optional else []))


def _fits(value: Any, allowed: list[Any], optional: bool) -> bool:
    if value is None:
        return optional
    if isinstance(value, bool):
        return bool in allowed
    for kind in allowed:
        if isinstance(kind, tuple):
            if value in kind:
                return True
        elif isinstance(value, (int, float) if kind is float else kind):
            return True
    return False


def _coerce(config: TorchConfig, key: str, raw: str, declared: Any) -> Any:
    value = parse_value(raw)
    accepted = _accepted(declared)
    if accepted is None:
        return value
    allowed, optional = accepted
    if optional and raw.strip().lower() == "none":
        return None
    if type(value) in allowed:
        return value
    for kind in allowed:
        converted = _convert(kind, raw, value)
        if converted is not _NOT:
            return converted
    raise UsageError(f"{config.what} {key!r} takes {_describe(allowed, optional)}, got {raw!r}")


def _convert(kind: Any, raw: str, value: Any) -> Any:
    """``value`` (``raw`` parsed) as ``kind``, or ``_NOT``."""
    if isinstance(kind, tuple):
        return next((v for v in kind if str(v) == raw.strip()), _NOT)
    if kind is bool:
        return bool(value) if value in (0, 1) and type(value) is int else _NOT
    if kind is float:
        return float(value) if type(value) is int else _NOT
    if kind is str:
        return raw
    return _NOT
